"""GPU-sharing clusters (``mode: gpu``): the FGD paper's experiment (Weng et al., ATC'23).

A run builds the cluster from the node list, orders the pod list (``gpu.order``), inflates
it to ``gpu.inflate.target`` × the cluster's GPUs (:mod:`dcsim.gpu.workload`) and offers
the pods one by one to the GPU allocator; a pod placed stays (the paper's pods never
leave), a pod that fits nowhere is rejected and counted. The ordering and inflation draw
from the run's workload generator, so every allocator of a seed sees the same pods in the
same order; the allocator has the plugin generator.

Each choice is validated (:meth:`dcsim.gpu.cluster.GpuCluster.reason`): a node where the
pod does not fit, a device with too little free, a GPU model the pod does not accept, the
wrong number of devices — a :class:`~dcsim.errors.PluginError` naming the allocator.

**Arrived share.** After each pod, ``arrived`` is the GPU request of every pod offered so
far (placed or not) over the cluster's milli-GPU, and ``alloc`` the milli-GPU placed over
the same. The paper's curves (its Fig. 9a) plot ``alloc`` against ``arrived`` in steps of
one percent: the authors' ``merge_alloc_discrete.py`` rounds each pod's ``arrived`` to a
whole percent (half to even) and averages the pods of each percent (an empty percent takes
the pods within one percent of it). dcsim writes that curve as the ``timeseries`` table, one
row per percent, and the summary's ``alloc_gpu_share``, ``frag_gpus`` … are the values of
its last row (130 % for the paper's inflation).

**Fragmentation** is :mod:`dcsim.gpu.frag` over the run's typical pods (``gpu.typical``),
kept per node and updated where a pod lands.

**Pods that come and go** (``gpu.arrivals``, beyond the paper; :mod:`dcsim.modes.gpu.spec`):
a SimPy run (:class:`~dcsim.sim.core.SimCore`) in which the pods drawn from the list arrive
in a Poisson process and each placed pod is released after its holding time (a departure
at the same instant as an arrival comes first). Nothing waits: a pod that fits nowhere is
lost. The measured window runs from the first measured arrival (after ``warmup``) to the
last arrival; ``alloc_gpu_share``, ``frag_gpus`` and ``frag_ratio`` of the summary are then
time averages over it, and the ``timeseries`` rows are samples over time.

**Records.** ``sink("pods", columns)``: one row per offered pod; ``sink("timeseries",
columns)``: one row per arrived percent (one per sample with ``arrivals``); the summary is
:func:`run_gpu`'s return. Columns and units: ``docs/reference/outputs.md`` (declared in
:mod:`dcsim.results.schema`).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from contextlib import AbstractContextManager as ContextManager
from contextlib import nullcontext
from functools import partial
from typing import Any

import numpy as np

from dcsim.errors import ConfigError, DcsimError, PluginError
from dcsim.gpu.cluster import MILLI, GpuCluster, GpuPlacement, GpuPod
from dcsim.gpu.frag import FragModel
from dcsim.gpu.trace import PodTable
from dcsim.gpu.workload import arrival_order, by_name, inflate
from dcsim.gpu_allocators.base import GpuAllocator
from dcsim.metrics import Observers, RunStart
from dcsim.modes.base import Sink
from dcsim.modes.gpu.spec import GpuSpec, load_lists, parse_gpu, typical_of
from dcsim.sim.core import SimCore, TimeAverage


def _choice(allocator, raw: Any, pod: GpuPod, cluster: GpuCluster) -> tuple[int, tuple]:
    def name():
        return getattr(allocator, "label", type(allocator).__name__)
    try:
        node, devices = raw
        node = int(node)
        devices = tuple(int(d) for d in devices)
    except (TypeError, ValueError):
        raise PluginError(f"GPU allocator {name()!r} returned {raw!r} for pod {pod.id}; "
                          "expected (node, devices) or None") from None
    why = cluster.reason(pod, node, devices)
    if why is not None:
        raise PluginError(f"GPU allocator {name()!r} chose an invalid placement for pod "
                          f"{pod.id} ({pod.name}): {why}")
    return node, devices


def curve(arrived: np.ndarray, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The authors' discretisation (see the module docstring): per whole percent of
    ``arrived`` (a share) from 0 to the last, the mean of each of ``values`` over its pods;
    ``pods`` counts them (0 where the window of ±1 % was used)."""
    pct = np.round(arrived * 100.0).astype(np.int64)
    top = int(pct.max()) if len(pct) else 0
    counts = np.bincount(pct, minlength=top + 1).astype(np.float64)
    sums = {k: np.bincount(pct, weights=v, minlength=top + 1) for k, v in values.items()}
    out: dict[str, list] = {"arrived_pct": [], "pods": [], **{k: [] for k in values}}
    for p in range(top + 1):
        if counts[p]:
            sel, n = slice(p, p + 1), counts[p]
        else:
            sel = slice(max(p - 1, 0), p + 2)
            n = counts[sel].sum()
            if not n:
                continue
        out["arrived_pct"].append(p)
        out["pods"].append(int(counts[p]))
        for k in values:
            out[k].append(float(sums[k][sel].sum() / n))
    return {k: np.asarray(v) for k, v in out.items()}


#: the columns of :meth:`GpuRun.now`, in order (then :data:`POWER` with gpu.power)
NOW = ("alloc_gpu_share", "frag_gpus", "frag_ratio", "alloc_cpu_share", "alloc_mem_share")
POWER = ("power_w", "power_gpu_w", "power_cpu_w")


class GpuRun:
    """What both protocols share: the cluster, the allocator, the fragmentation kept per
    node, the totals placed, and the per-pod records of the ``n`` pods to be offered
    (``rows``: their rows of the pod list)."""

    def __init__(self, s: GpuSpec, cluster: GpuCluster, pods: PodTable, frag: FragModel,
                 allocator, rows: np.ndarray, inflated: np.ndarray):
        self.spec = s
        self.cluster = cluster
        self.pods = pods
        self.frag = frag
        self.allocator = allocator
        self.view = cluster.view()
        self.rows = rows
        self.inflated = inflated
        n = len(rows)
        self.n = n
        self.offered = 0   # pods offered so far (read by a progress watcher, never written)
        self.cap_gpu = float(cluster.total_gpu_milli)
        self.cap_cpu = float(cluster.cpu_cap.sum()) or 1.0
        self.cap_mem = float(cluster.mem_cap.sum()) or 1.0
        self.node_frag = frag.node_frag(cluster)
        self.frag_total = float(self.node_frag.sum())
        #: the nodes' draw (gpu.power; dcsim.gpu.power), with its running totals
        self.power = s.power.model(cluster) if s.power is not None else None
        self.watts = list(self.power.totals()) if self.power is not None else [0.0, 0.0]
        #: milli-GPU of the nodes down (failures)
        self.down_gpu = 0
        self.accepted = np.zeros(n, dtype=bool)
        self.node_of = np.full(n, -1, dtype=np.int64)
        self.devices_of: list[list[int]] = [[] for _ in range(n)]
        self.arrived = np.zeros(n)
        self.alloc = np.zeros(n)
        self.frag_after = np.zeros(n)
        self.watts_after = np.zeros((n, 2)) if self.power is not None else None
        self.decision = np.zeros(n)
        self.asked = self.used = self.used_cpu = self.used_mem = 0
        #: the run's metric plugins (dcsim.metrics; with gpu.arrivals only) and the clock
        #: they are told the time by, or None: then no metric hook is called
        self.metrics: Observers | None = None
        self.clock: Callable[[], float] | None = None

    # -- one pod ----------------------------------------------------------------------------
    def offer(self, i: int) -> GpuPlacement | None:
        """Offer pod ``i`` to the allocator; place it if it chose a node."""
        pod = self.pods.pod(int(self.rows[i]), i)
        self.asked += pod.total_gpu_milli
        self.offered += 1
        if self.metrics is not None:
            self.metrics.arrival(self.clock(), pod)
        placement = self.place(i, pod, first=True)
        self.arrived[i] = self.asked / self.cap_gpu
        self.alloc[i] = self.used / self.cap_gpu
        self.frag_after[i] = self.frag_total
        if self.watts_after is not None:
            self.watts_after[i] = self.watts
        return placement

    def offer_again(self, i: int) -> GpuPlacement | None:
        """Offer pod ``i`` once more (its node failed): placed, it keeps its id and its
        record says where it is now; its asked GPU is not counted twice."""
        return self.place(i, self.pods.pod(int(self.rows[i]), i), first=False)

    def place(self, i: int, pod: GpuPod, first: bool) -> GpuPlacement | None:
        """Ask the allocator for ``pod`` (arrival ``i``) and place it where it chose; the
        ``first`` offer is recorded (decision time, accepted, node and devices)."""
        alloc = self.allocator
        try:
            t0 = time.perf_counter()
            raw = alloc.allocate(pod, self.view)
            if first:
                self.decision[i] = time.perf_counter() - t0
        except DcsimError:
            raise
        except Exception as e:  # a plugin's own bug: name it, no traceback for the user
            raise PluginError(f"GPU allocator {alloc.label!r} failed on pod {i} "
                              f"({pod.name}): {type(e).__name__}: {e}") from e
        if raw is None:
            if self.metrics is not None:
                self.metrics.decision(self.clock(), pod, None)
            return None
        node, devs = _choice(alloc, raw, pod, self.cluster)
        placement = self.cluster.reserve(pod, node, devs)
        if first:
            self.accepted[i] = True
            self.node_of[i] = node
            self.devices_of[i] = list(devs)
        self._moved(pod, node, +1)
        if self.metrics is not None:  # a metric sees (node, devices): it cannot release it
            self.metrics.decision(self.clock(), pod, (node, tuple(devs)))
        return placement

    def release(self, p: GpuPlacement) -> None:
        self.cluster.release(p)
        self._moved(p.pod, p.node, -1)

    def _moved(self, pod: GpuPod, node: int, sign: int) -> None:
        self.used += sign * pod.total_gpu_milli
        self.used_cpu += sign * pod.cpu
        self.used_mem += sign * pod.mem
        self.node_changed(node)

    def node_changed(self, node: int) -> None:
        """Bring the kept fragmentation and draw of ``node`` up to date."""
        new = float(self.frag.node_frag(self.cluster, [node])[0])
        self.frag_total += new - self.node_frag[node]
        self.node_frag[node] = new
        pw = self.power
        if pw is not None:
            g, c = pw.gpu_w[node], pw.cpu_w[node]
            pw.update(self.cluster, [node])
            self.watts[0] += pw.gpu_w[node] - g
            self.watts[1] += pw.cpu_w[node] - c
        if self.spec.check_invariants:
            self.cluster.check()

    def set_down(self, node: int, down: bool) -> None:
        """Take ``node`` down (it holds no pod now) or bring it back."""
        self.cluster.set_down(node, down)
        g = int(self.cluster.gpu_cap[node].sum())
        self.down_gpu += g if down else -g
        self.node_changed(node)

    def names(self) -> tuple[str, ...]:
        """The columns of :meth:`now`, in order."""
        return NOW + (POWER if self.power is not None else ())

    def now(self) -> np.ndarray:
        """alloc_gpu_share, frag_gpus, frag_ratio, alloc_cpu_share, alloc_mem_share now
        (then power_w, power_gpu_w, power_cpu_w with gpu.power)."""
        idle = self.cap_gpu - self.used - self.down_gpu
        head = [self.used / self.cap_gpu, self.frag_total / MILLI,
                self.frag_total / idle if idle > 0 else 0.0,
                self.used_cpu / self.cap_cpu, self.used_mem / self.cap_mem]
        if self.power is not None:
            g, c = self.watts
            head += [g + c, g, c]
        return np.array(head)

    def check_end(self) -> None:
        if not self.spec.check_invariants:
            return
        total = float(self.frag.node_frag(self.cluster).sum())
        if abs(self.frag_total - total) > 1e-6 * max(self.cap_gpu, 1):
            raise AssertionError("the kept fragmentation drifted from a recomputation")
        if self.used != self.cluster.used_gpu_milli():
            raise AssertionError("GPU accounting drifted")
        if self.power is not None:
            g, c = self.power.draw(self.cluster)
            if abs(self.watts[0] - g.sum()) + abs(self.watts[1] - c.sum()) > 1e-6 * (
                    1 + g.sum() + c.sum()):
                raise AssertionError("the kept power drifted from a recomputation")

    # -- records ----------------------------------------------------------------------------
    def pod_columns(self) -> dict[str, list]:
        pods, rows = self.pods, self.rows
        r = rows.tolist()
        return {
            "id": list(range(self.n)), "name": [pods.names[x] for x in r], "row": r,
            "inflated": self.inflated.tolist(), "cpu": pods.cpu[rows].tolist(),
            "mem": pods.mem[rows].tolist(), "num_gpu": pods.num_gpu[rows].tolist(),
            "gpu_milli": pods.gpu_milli[rows].tolist(),
            "gpu_types": ["|".join(pods.types[x]) for x in r],
            "accepted": self.accepted.tolist(), "node": self.node_of.tolist(),
            "devices": self.devices_of, "arrived_gpu_share": self.arrived.tolist(),
            "alloc_gpu_share": self.alloc.tolist(),
            "frag_gpus": (self.frag_after / MILLI).tolist(),
            "decision_s": self.decision.tolist()}

    def summary(self, at: dict[str, float]) -> dict[str, Any]:
        """The summary, with ``at`` the values of alloc_gpu_share, frag_gpus and
        frag_ratio the protocol reports."""
        c = self.cluster
        full = c.gpu_free == c.gpu_cap
        n, n_acc = self.n, int(self.accepted.sum())
        return {
            "received": n, "accepted": n_acc, "rejected": n - n_acc,
            "acceptance_ratio": n_acc / n if n else math.nan,
            "arrived_gpu_share": float(self.arrived[-1]) if n else 0.0,
            "alloc_gpu_share": at["alloc_gpu_share"],
            "final_alloc_gpu_share": self.used / self.cap_gpu,
            "unalloc_gpus": (1.0 - at["alloc_gpu_share"]) * c.total_gpus,
            "frag_gpus": at["frag_gpus"], "frag_ratio": at["frag_ratio"],
            "alloc_cpu_share": self.used_cpu / self.cap_cpu,
            "alloc_mem_share": self.used_mem / self.cap_mem,
            "used_nodes": int(((~full.all(axis=1)) | (c.cpu_free < c.cpu_cap)).sum()),
            "nodes": c.n_nodes, "gpus": c.total_gpus,
            "inflated": int(self.inflated.sum()), "typical_pods": len(self.frag.typical),
            "mean_decision_s": float(self.decision.mean()) if n else 0.0,
        }


def _one_pass(run: GpuRun, sink: Sink | None) -> dict[str, Any]:
    """The paper's protocol: every pod offered once, in order, none released."""
    n = run.n
    cpu = np.zeros(n)
    mem = np.zeros(n)
    idle = np.zeros(n)
    for i in range(n):
        run.offer(i)
        cpu[i] = run.used_cpu / run.cap_cpu
        mem[i] = run.used_mem / run.cap_mem
        idle[i] = run.cap_gpu - run.used
    run.check_end()
    ratio = np.divide(run.frag_after, idle, out=np.zeros(n), where=idle > 0)
    values = {"alloc_gpu_share": run.alloc, "frag_gpus": run.frag_after / MILLI,
              "frag_ratio": ratio, "alloc_cpu_share": cpu, "alloc_mem_share": mem}
    if run.watts_after is not None:
        w = run.watts_after
        values.update({"power_w": w.sum(axis=1), "power_gpu_w": w[:, 0],
                       "power_cpu_w": w[:, 1]})
    series = curve(run.arrived, values)
    series["unalloc_gpus"] = (1.0 - series["alloc_gpu_share"]) * run.cluster.total_gpus
    if sink is not None:
        sink("pods", run.pod_columns())
        sink("timeseries", {k: v.tolist() for k, v in series.items()})
    last = {k: float(v[-1]) if len(v) else math.nan for k, v in series.items()}
    out = run.summary(last)
    if run.power is not None:
        out.update({k: last[k] for k in POWER})
    return out




class GpuOnline(SimCore):
    """Pods that arrive and leave (``gpu.arrivals``; see the module docstring).
    ``failures`` builds the run's failure adapter from the engine
    (:class:`dcsim.modes.gpu.failures.GpuFailures`), or is None."""

    def __init__(self, run: GpuRun, times: np.ndarray, holding: np.ndarray, warmup: int,
                 sample_every: float, sink: Sink | None = None,
                 failures: Callable[[GpuOnline], Any] | None = None,
                 metrics: Observers | None = None):
        SimCore.__init__(self)
        self.run = run
        #: the run's metric plugins, or None (they see every pod, warm-up included)
        self.metrics = metrics
        if metrics is not None:
            run.metrics, run.clock = metrics, lambda: float(self.env.now)
        self.times = times
        self.holding = holding
        self.warmup = warmup
        self.sample_every = sample_every
        self.sink = sink
        self.end = float(times[-1]) if len(times) else 0.0
        self.start = float(times[warmup]) if warmup < len(times) else self.end
        self.names = run.names()
        self.avg = TimeAverage(len(self.names))
        self.opened = False
        self.active = 0
        self.received = 0
        self.samples: dict[str, list] = {k: [] for k in ("time", "active", *self.names)}
        self.asked_window = self.placed_window = 0
        self.asks = run.pods.total_gpu_milli[run.rows].tolist()   # each arrival's GPU ask
        #: per arrival, its placement while it holds one; per node, the arrivals on it
        self.current: list[GpuPlacement | None] = [None] * run.n
        self.on_node: list[set[int]] = [set() for _ in range(run.cluster.n_nodes)]
        # the allocator's optional hooks, called only where it overrides them
        # (GpuAllocator.released, failed, repaired; the failure adapter reads these too)
        kind = type(run.allocator)
        self.notifies_release = kind.released is not GpuAllocator.released
        self.notifies_failures = (kind.failed is not GpuAllocator.failed
                                  or kind.repaired is not GpuAllocator.repaired)
        self.interruptions = np.zeros(run.n, dtype=np.int64)
        self._failures = failures(self) if failures is not None else None
        if self._failures is not None:
            self.samples.update({k: [] for k in self._failures.process.avail_columns})

    def measuring(self) -> bool:
        """Whether the measured window is open (from the first measured arrival)."""
        return self.opened

    def tick(self, t: float) -> None:
        """Bring the time averages up to ``t`` (opening the window at its start); called
        before every change, by the engine and by its failure adapter."""
        if not self.opened and t >= self.start:
            self.avg.open(self.start)
            self.opened = True
            self.failures_window(self.start, open_=True)
        self.avg.advance(t, self.run.now())

    def _sample(self, t: float) -> None:
        self.tick(t)
        row = self.samples
        row["time"].append(float(t))
        row["active"].append(self.active)
        for k, v in zip(self.names, self.run.now().tolist(), strict=True):
            row[k].append(v)
        if self._failures is not None:
            for k, v in zip(self._failures.process.avail_columns,
                            self._failures.availability(), strict=True):
                row[k].append(v)
        if self.metrics is not None:
            for k, v in self.metrics.sample(float(t)).items():
                row.setdefault(k, []).append(v)

    def hold(self, i: int, p: GpuPlacement) -> None:
        """Arrival ``i`` holds ``p`` now."""
        self.current[i] = p
        self.on_node[p.node].add(i)

    def _arrive(self, i: int, t: float) -> None:
        self.received += 1
        p = self.run.offer(i)
        measured = i >= self.warmup
        g = self.asks[i]
        if measured:
            self.asked_window += g
        if p is None:
            return
        if measured:
            self.placed_window += g
        self.active += 1
        self.hold(i, p)
        self.depart_after(float(self.holding[i]), partial(self._depart, i))

    def _depart(self, i: int, _event) -> None:
        p = self.current[i]
        if p is None:          # a failure took it away earlier
            return
        self.tick(self.env.now)
        self.evict(i)
        if self.notifies_release:
            self.run.allocator.released(p.pod, p, self.run.cluster.view())
        if self.metrics is not None:
            self.metrics.departure(float(self.env.now), p.pod)

    def evict(self, i: int) -> GpuPlacement:
        """Release arrival ``i``'s placement (it departs, or its node failed)."""
        p = self.current[i]
        self.run.release(p)
        self.on_node[p.node].discard(i)
        self.current[i] = None
        self.active -= 1
        return p

    def _main(self):
        if self.metrics is not None:
            self.metrics.start(RunStart("gpu", None, self.run.cluster.view(),
                                        ("gpu", "cpu", "mem")))
        self._sample(0.0)
        self.start_failures()
        yield from self.walk(self.times.tolist(), self._arrive,
                             periodic=[(self.sample_every, self._sample)], end=self.end,
                             tick=self.tick)
        self.tick(self.end)
        self.avg.close(self.end, self.run.now())
        self.failures_window(self.end, open_=False)
        if self._failures is not None:
            self._failures.process.stopped = True
        self._sample(self.end)

    def simulate_all(self) -> dict[str, Any]:
        sink = self.sink
        main = self.env.process(self._main())
        self.simulate(until=main)
        self.run.check_end()
        mean = self.avg.mean() if self.avg.end > self.avg.start else self.run.now()
        at = dict(zip(self.names, (float(x) for x in mean), strict=True))
        gpus = self.run.cluster.total_gpus
        fp = self._failures.process if self._failures is not None else None
        if sink is not None:
            cols = self.run.pod_columns()
            cols["arrival"] = self.times.tolist()
            cols["duration"] = self.holding.tolist()
            if fp is not None:
                cols["interruptions"] = self.interruptions.tolist()
            sink("pods", cols)
            series = dict(self.samples)
            series["unalloc_gpus"] = [(1.0 - a) * gpus for a in series["alloc_gpu_share"]]
            sink("timeseries", series)
            if fp is not None and fp.rows["time"]:
                sink("component_failures", fp.columns())
        out = self.run.summary(at)
        acc = self.run.accepted[self.warmup:]
        n = len(acc)
        out.update({   # counted over the measured window, like loss mode's
            "received": n, "accepted": int(acc.sum()), "rejected": n - int(acc.sum()),
            "acceptance_ratio": float(acc.mean()) if n else math.nan,
            "gpu_acceptance": (self.placed_window / self.asked_window if self.asked_window
                               else math.nan),
            "window_start": self.start, "window_end": self.end, "sim_time": self.end})
        pw = self.run.spec.power
        if pw is not None:
            span = (self.end - self.start) * pw.time_unit_s
            out.update({"mean_power_w": at["power_w"], "mean_power_gpu_w": at["power_gpu_w"],
                        "mean_power_cpu_w": at["power_cpu_w"],
                        "energy_j": at["power_w"] * span,
                        "energy_gpu_j": at["power_gpu_w"] * span,
                        "energy_cpu_j": at["power_cpu_w"] * span})
        if fp is not None:
            out.update(fp.summary("lost_pod_time"))
            out["lost_gpu_time"] = self._failures.lost_gpu_time
        if self.metrics is not None:
            out.update(self.metrics.summary())
        return out


def _online_workload(s: GpuSpec, pods: PodTable, cap_gpu: float, rng: np.random.Generator,
                     where: str):
    """Rows, arrival times and holding times of the ``gpu.arrivals`` pods."""
    a = s.arrivals
    rows = by_name(pods)[rng.integers(len(pods), size=a.pods)]
    g = pods.total_gpu_milli.astype(np.float64)
    if a.holding == "trace":
        d = pods.deletion - pods.creation     # checked by load_lists
        work = float((g * d).mean())
        holding = d[rows]
    else:
        work = float(g.mean()) * a.mean_holding
        holding = rng.exponential(a.mean_holding, size=a.pods)
    if work <= 0:
        raise ConfigError(f"{where}.arrivals: the pods ask for no GPU time, so no arrival "
                          "rate gives a GPU load")
    rate = a.load * cap_gpu / work
    times = np.cumsum(rng.exponential(1.0 / rate, size=a.pods))
    return rows, times, holding


def run_gpu(spec: dict[str, Any] | GpuSpec, allocator, rng: np.random.Generator,
            sink: Sink | None, base_dir: str | os.PathLike | None = None, *,
            where: str = "gpu", failures=None,
            failure_rng: np.random.Generator | None = None,
            watch: Callable[[Callable[[], tuple]], ContextManager] | None = None,
            metrics: Observers | None = None) -> dict[str, Any]:
    """One run of ``allocator`` (an instance) on the ``gpu:`` section ``spec`` (see the
    module docstring); returns the summary. ``metrics``: the run's metric plugins
    (:class:`dcsim.metrics.Observers`; with ``gpu.arrivals`` only), or None. ``failures``
    (a validated ``failures:`` section; with ``gpu.arrivals`` only) fails nodes, drawn
    from ``failure_rng``
    (:mod:`dcsim.modes.gpu.failures`). ``watch(probe)``, if given, is entered around the
    simulation; ``probe()`` reads (pods offered, pods in all, simulated time or None in a
    one-pass run) and changes nothing (``dcsim run``'s progress lines)."""
    s = parse_gpu(spec, where) if not isinstance(spec, GpuSpec) else spec
    if failures is not None and s.arrivals is None:
        raise ConfigError(f"failures: mode gpu fails nodes only in a run with "
                          f"{where}.arrivals (the one-pass protocol has no time)")
    if metrics is not None and s.arrivals is None:
        raise ConfigError(f"metrics.plugins: mode gpu runs metric plugins only with "
                          f"{where}.arrivals (the one-pass protocol has no time)")
    nodes, pods = load_lists(s, base_dir, where)
    cluster = GpuCluster(nodes)
    typical = typical_of(s, pods, where)
    frag = FragModel(typical, cluster.models)
    if s.arrivals is not None:
        rows, times, holding = _online_workload(s, pods, cluster.total_gpu_milli, rng, where)
        inflated = np.zeros(len(rows), dtype=bool)
    else:
        rows = arrival_order(pods, s.order, rng)
        inflated = np.zeros(len(rows), dtype=bool)
        if s.inflate is not None:
            rows, inflated = inflate(pods, rows, s.inflate.target * cluster.total_gpu_milli,
                                     rng, s.inflate.stop)
    from dcsim.gpu_allocators.base import GpuContext

    allocator.setup(cluster.view(), GpuContext(pods, typical, frag))
    run = GpuRun(s, cluster, pods, frag, allocator, rows, inflated)
    watching = watch if watch is not None else (lambda probe: nullcontext())
    if s.arrivals is None:
        with watching(lambda: (run.offered, run.n, None)):
            return _one_pass(run, sink)
    a = s.arrivals
    every = a.sample_every or (float(times[-1]) / 200 if len(times) and times[-1] > 0
                               else 1.0)
    warm = int(math.floor(a.warmup * len(rows)))
    make = None
    if failures is not None:
        from dcsim.modes.gpu.failures import GpuFailures

        def make(engine):
            return GpuFailures(engine, failures, failure_rng, base_dir)
    online = GpuOnline(run, times, holding, warm, every, sink, make, metrics)
    with watching(lambda: (run.offered, run.n, float(online.env.now))):
        return online.simulate_all()
