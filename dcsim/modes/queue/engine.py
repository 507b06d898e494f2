"""Queue mode: play a run's job sets through DeepRM's time-slotted environment.

Queue mode is time-slotted rather than event-driven: DeepRM's semantics are a machine image
``horizon`` steps deep that shifts by one row per step, with any number of decisions inside
a step, so :class:`dcsim.queue.env.QueueEnv` is the engine here and SimPy would add an event
per step and nothing else (see ``docs/about/design.md``).

Every job set starts on an empty machine at time 0. The summary averages over the jobs of
all job sets of the run, as the DeepRM authors do (slowdown over finished jobs).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager as ContextManager
from typing import Any

import numpy as np

from dcsim.queue.env import QueueConfig, QueueEnv
from dcsim.queue.jobs import JobSet
from dcsim.schedulers.base import Scheduler

Sink = Callable[[str, dict[str, Any]], None]


def _mean(x: np.ndarray) -> float:
    return float(x.mean()) if x.size else float("nan")


def _timeseries(k: int, rec: dict[str, np.ndarray], end: int, resources: tuple[str, ...],
                capacity: np.ndarray) -> dict[str, Any]:
    """One row per time step ``t`` in ``[0, end)`` of job set ``k``: jobs arrived
    (``received``), of them not dropped (``accepted``), running (``active``), waiting
    (arrived, neither started nor dropped) and each resource's utilisation (demand of the
    running jobs ÷ capacity), sampled at the start of the step."""
    t = np.arange(max(int(end), 1), dtype=np.float64)[:, None]
    arrival, start, finish = rec["arrival"][None], rec["start"][None], rec["finish"][None]
    dropped = rec["dropped"][None]
    arrived = arrival <= t
    running = (start <= t) & ~(finish <= t)  # NaN comparisons are False: never started
    waiting = arrived & ~dropped & ~(start <= t)
    cols: dict[str, Any] = {
        "jobset": np.full(t.shape[0], k, dtype=np.int64), "time": t[:, 0],
        "received": arrived.sum(axis=1).astype(np.int64),
        "accepted": (arrived & ~dropped).sum(axis=1).astype(np.int64),
        "active": running.sum(axis=1).astype(np.float64),
        "waiting": waiting.sum(axis=1).astype(np.int64),
    }
    for i, r in enumerate(resources):
        cols[f"util_{r}"] = (running * rec[f"demand_{r}"][None]).sum(axis=1) / capacity[i]
    return cols


def run_queue(config: QueueConfig, jobsets: list[JobSet], scheduler: Scheduler,
              sink: Sink | None = None,
              watch: Callable[[Callable[[], tuple]], ContextManager] | None = None
              ) -> dict[str, Any]:
    """Run ``scheduler`` on every job set; stream one row per job to ``sink("jobs", …)``
    and return the run's summary metrics. ``watch(probe)``, if given, is entered around
    the job sets; ``probe()`` reads (jobs of the job sets played, jobs in all, steps played)
    and changes nothing (``dcsim run``'s progress lines)."""
    if watch is None:
        return _run_queue(config, jobsets, scheduler, sink, {})
    seen = {"jobs": 0, "steps": 0}
    total = sum(len(js) for js in jobsets)
    with watch(lambda: (seen["jobs"], total, float(seen["steps"]))):
        return _run_queue(config, jobsets, scheduler, sink, seen)


def _run_queue(config: QueueConfig, jobsets: list[JobSet], scheduler: Scheduler,
               sink: Sink | None, seen: dict[str, int]) -> dict[str, Any]:
    env = QueueEnv(config)
    resources = jobsets[0].resources if jobsets else ()
    capacity = config.capacity_for(len(resources))
    slowdowns, completions = [], []
    counts = dict.fromkeys(("received", "finished", "dropped", "unfinished", "forced"), 0)
    steps = 0
    work = np.zeros(len(resources))
    for k, js in enumerate(jobsets):
        summary = env.run(scheduler, js)
        rec = env.records()
        fin = ~np.isnan(rec["finish"])
        slowdowns.append(rec["slowdown"][fin])
        completions.append(rec["completion_time"][fin])
        counts["received"] += summary["jobs"]
        counts["finished"] += summary["finished"]
        counts["dropped"] += summary["dropped"]
        counts["unfinished"] += summary["unfinished"]
        counts["forced"] += int(summary["forced"])
        # slot-steps of work done by the episode's end (a forced end cuts running jobs)
        end = summary["steps"]
        ran = np.clip(np.fmin(rec["finish"], end) - rec["start"], 0, None)
        ran = np.nan_to_num(ran)
        work += (js.demand * ran[:, None]).sum(axis=0)
        steps += end
        seen["jobs"], seen["steps"] = counts["received"], steps   # for a progress watcher
        if sink is not None:
            n = len(js)
            cols: dict[str, Any] = {
                "id": rec["id"], "jobset": np.full(n, k, dtype=np.int64),
                "arrival": rec["arrival"].astype(np.float64),
                "duration": rec["length"].astype(np.float64),
            }
            for r in resources:
                cols[r] = rec[f"demand_{r}"]
            cols |= {
                "accepted": ~rec["dropped"], "dropped": rec["dropped"],
                "start": rec["start"], "end": rec["finish"],
                "wait": rec["start"] - rec["arrival"],
                "completion_time": rec["completion_time"], "slowdown": rec["slowdown"],
            }
            if n:
                sink("jobs", cols)
            sink("timeseries", _timeseries(k, rec, end, resources, capacity))
    received = counts["received"]
    out: dict[str, Any] = {
        "received": received,
        "accepted": received - counts["dropped"],
        "acceptance_ratio": (received - counts["dropped"]) / received if received else
        float("nan"),
        "mean_slowdown": _mean(np.concatenate(slowdowns)) if slowdowns else float("nan"),
        "mean_completion_time": (_mean(np.concatenate(completions)) if completions
                                 else float("nan")),
        **{k: counts[k] for k in ("finished", "dropped", "unfinished")},
        "jobsets": len(jobsets),
        "forced_jobsets": counts["forced"],
        "sim_time": float(steps),
    }
    for i, r in enumerate(resources):
        out[f"util_{r}"] = float(work[i] / (capacity[i] * steps)) if steps else float("nan")
    return out
