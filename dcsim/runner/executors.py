"""Where an experiment's runs execute: in-process, on a local process pool, or on Dask.

Every executor calls the same :func:`attempt` on the same picklable
:class:`~dcsim.runner.plan.RunPlan`, and a run's randomness comes only from (experiment
seed, seed index), so the rows do not depend on the executor. An executor yields one
:class:`Outcome` per run as it ends: its summary row, or a failure record (which run, the
exception, the traceback). A run that raises never stops the others; only an interrupt
(Ctrl-C, SIGTERM) does.

Who writes the files:

- in-process, on the local pool and on a local Dask cluster (``--executor dask``), the run
  writes into the output directory itself (hidden temporaries renamed into place,
  ``runs/<run_id>.json`` last); these workers are children of ``dcsim run`` on the same
  machine, inherit its lock on the directory and end when it dies;
- on a Dask cluster at ``--address``, the worker writes the run into a scratch folder of its
  own, sends the finished files back with the result, and the client commits them into the
  output directory in the same order. Remote workers therefore need no access to the output
  directory (no shared file system), and a killed client leaves nothing half-committed
  (work still running on the cluster cannot write into the directory afterwards).
"""

from __future__ import annotations

import os
import socket
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dcsim.runner.plan import Experiment, RunPlan

Log = Callable[[str], None]


@dataclass
class Outcome:
    """How one run ended: ``row`` (its summary row) or ``error`` (its failure record)."""

    plan: RunPlan
    row: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


def failure_record(plan: RunPlan, exc: BaseException, tb: str | None = None) -> dict[str, Any]:
    """What ``failures.jsonl`` records of a run that raised ``exc``."""
    return {
        "run_id": plan.run_id,
        "allocator": plan.label,
        "seed": plan.seed,
        "params": plan.params,
        "error": type(exc).__name__,
        "message": str(exc),
        "traceback": tb if tb is not None else "".join(
            traceback.format_exception(type(exc), exc, exc.__traceback__)),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }


def attempt(plan: RunPlan, out: str | Path) -> tuple[str, Any]:
    """Run ``plan`` into ``out``: ``("ok", row)`` or ``("failed", failure record)``.

    Exceptions are caught, and so is ``SystemExit``: a plugin calling ``sys.exit()`` fails
    its own run, not the experiment. Only an interrupt (KeyboardInterrupt) ends it.
    """
    from dcsim.runner.run import execute_run

    try:
        return "ok", execute_run(plan, out)
    except (Exception, SystemExit) as e:  # recorded; the experiment goes on
        return "failed", failure_record(plan, e)


class Executor:
    """Runs plans and yields their outcomes in the order they end (this one: serially)."""

    name = "local"

    def describe(self) -> dict[str, Any]:
        return {"executor": self.name, "jobs": 1}

    def run(self, exp: Experiment, plans: list[RunPlan], out: Path) -> Iterator[Outcome]:
        for plan in plans:
            status, payload = attempt(plan, out)
            yield Outcome(plan, row=payload) if status == "ok" else Outcome(plan, error=payload)


_PARENT: int | None = None  # in a pool worker: the pid of the dcsim process that made it


def _watch_parent() -> None:  # pragma: no cover - runs in pool workers
    """Pool worker initializer: end the worker when the ``dcsim run`` process dies, even by
    kill -9, instead of letting it finish runs nobody collects (and keep holding the output
    directory's lock, which it inherited).

    A thread notices the parent's death within 0.1 s and sends the worker SIGTERM; the
    handler inherited from ``dcsim run`` raises KeyboardInterrupt, so the run under way
    deletes its temporaries and :func:`_pool_attempt` exits. Should that interrupt be lost
    (raised inside a ``__del__``, where Python ignores exceptions), the worker exits anyway
    2 s later.
    """
    import signal
    import sys
    import threading

    global _PARENT
    _PARENT = os.getppid()
    default_hook = sys.unraisablehook

    def quiet_interrupts(u) -> None:  # Ctrl-C inside a __del__: not worth a traceback
        if not isinstance(u.exc_value, KeyboardInterrupt):
            default_hook(u)

    sys.unraisablehook = quiet_interrupts

    def on_signal(signum, frame) -> None:
        # during a run: unwind it (its temporaries are deleted); between runs: just end
        if _RUNNING:
            raise KeyboardInterrupt
        os._exit(1)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    def watch() -> None:
        while os.getppid() == _PARENT:
            time.sleep(0.1)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(2)
        os._exit(1)

    threading.Thread(target=watch, name="dcsim-parent-watch", daemon=True).start()


_RUNNING = False  # in a pool worker: whether a run is under way


def _pool_attempt(plan: RunPlan, out: str | Path) -> tuple[str, Any]:  # pragma: no cover
    """:func:`attempt` in a pool worker. An interrupt (Ctrl-C to the process group, or
    SIGTERM from ``dcsim run`` stopping or from its death) aborts the run, which deletes its
    temporaries, and ends the worker quietly: ``dcsim run`` reports the interruption."""
    global _RUNNING
    _RUNNING = True
    try:
        return attempt(plan, out)
    except KeyboardInterrupt:
        os._exit(1)
    finally:
        _RUNNING = False


class PoolExecutor(Executor):
    """A local process pool of ``jobs`` processes (in-process for 1); each run writes its
    own files."""

    def __init__(self, jobs: int):
        self.jobs = jobs

    def describe(self) -> dict[str, Any]:
        return {"executor": self.name, "jobs": self.jobs}

    def run(self, exp: Experiment, plans: list[RunPlan], out: Path) -> Iterator[Outcome]:
        """At most ``jobs`` runs are under way at a time, and one more waits behind each
        (so a worker goes on at once). When a worker dies (``os._exit`` in a plugin, a
        signal, the out-of-memory killer) the pool breaks and every run in it fails with
        it; those runs are then run again one at a time, each in a pool of its own, so
        only the run that kills its worker fails, and a fresh pool takes the rest."""
        if self.jobs <= 1 or len(plans) <= 1:
            yield from super().run(exp, plans, out)
            return
        queue = list(reversed(plans))
        while queue:
            suspects: list[RunPlan] = []
            yield from _pool_pass(queue, min(self.jobs, len(queue)), out, suspects)
            for plan in suspects:  # each alone: a death now is this run's own
                yield from _pool_pass([plan], 1, out, None)


def _pool_pass(queue: list[RunPlan], workers: int, out: Path,
               suspects: list[RunPlan] | None) -> Iterator[Outcome]:
    """Run the plans of ``queue`` (popped from its end) on a fresh pool of ``workers``
    until it is empty or the pool breaks. On a break the runs that were in the pool go to
    ``suspects`` (None: they fail, naming the dead worker) and the pass ends."""
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    before = set(multiprocessing.active_children())  # the pool's workers: started after
    pool = ProcessPoolExecutor(max_workers=workers, initializer=_watch_parent)
    try:
        pending = {}
        while queue or pending:
            # one run queued behind each worker's, so that a worker starts its next run
            # as soon as it ends one, not after this process has handled the result
            while queue and len(pending) < 2 * workers:
                plan = queue.pop()
                pending[pool.submit(_pool_attempt, plan, out)] = plan
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            broken = []
            for f in finished:
                plan = pending.pop(f)
                try:
                    status, payload = f.result()
                except BrokenProcessPool:
                    broken.append(plan)
                    continue
                except Exception as e:  # the result could not come back (unpicklable, ...)
                    yield Outcome(plan, error=failure_record(plan, e))
                    continue
                yield (Outcome(plan, row=payload) if status == "ok"
                       else Outcome(plan, error=payload))
            if broken:
                broken += pending.values()  # they all went down with the pool
                pending.clear()
                if suspects is not None:
                    suspects.extend(broken)
                    return
                for plan in broken:
                    yield Outcome(plan, error=failure_record(plan, WorkerDied(
                        "the process running this run died without an exception "
                        "(os._exit, a signal or the out-of-memory killer); it died again "
                        "when run alone, and the other runs went on"), tb=""))
                return
    except BaseException:  # an interrupt: stop the runs under way too, hung ones included
        _stop_workers(before)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _stop_workers(before: set, grace: float = 3.0) -> None:
    """SIGTERM every worker of the pool (its run aborts, deleting its temporaries), then
    SIGKILL those still alive after ``grace`` seconds (a plugin stuck in C code, or one that
    ignores signals), so an interrupt ends ``dcsim run`` within seconds. The workers are
    the child processes started since the pool was made (``before``: the children then);
    this process starts none of its own meanwhile."""
    import multiprocessing

    procs = [p for p in multiprocessing.active_children() if p not in before]
    for p in procs:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + grace
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join(1.0)


class WorkerDied(Exception):
    """The process running a run ended without raising (recorded in failures.jsonl): a pool
    process, or a Dask worker (:mod:`dcsim.runner.dask_executor`, where Dask's KilledWorker
    becomes this)."""
