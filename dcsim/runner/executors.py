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

import logging
import os
import socket
import time
import traceback
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from dcsim.errors import ConfigError

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


def dask_setup(worker) -> None:  # pragma: no cover - runs in local Dask workers
    """Dask preload hook of the local cluster's workers (``--executor dask``): exit when the
    ``dcsim run`` process that forked the worker dies, even by kill -9.

    Forked workers inherit each other's end of the pipe through which Dask tells a worker
    that its parent is gone, and the lock on the output directory; without this, a worker of
    a killed ``dcsim run`` could wait forever and keep a resume waiting for the lock. A run
    it was writing leaves only hidden temporaries, which the next ``dcsim run`` deletes."""
    import threading

    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.1)
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
        """At most ``jobs`` runs are in the pool at a time. When a worker dies (``os._exit``
        in a plugin, a signal, the out-of-memory killer) the pool breaks and every run in
        it fails with it; those runs are then run again one at a time, each in a pool of
        its own, so only the run that kills its worker fails, and a fresh pool takes the
        rest."""
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
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    pool = ProcessPoolExecutor(max_workers=workers, initializer=_watch_parent)
    try:
        pending = {}
        while queue or pending:
            while queue and len(pending) < workers:
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
        _stop_workers(pool)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _stop_workers(pool, grace: float = 3.0) -> None:
    """SIGTERM every worker of ``pool`` (its run aborts, deleting its temporaries), then
    SIGKILL those still alive after ``grace`` seconds (a plugin stuck in C code, or one that
    ignores signals), so an interrupt ends ``dcsim run`` within seconds."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
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
    """The pool process running a run ended without raising (recorded in failures.jsonl)."""


# ----------------------------------------------------------------------------------- Dask
def _scratch_dir() -> str | None:
    """The Dask worker's local directory (its configured scratch space), if on a worker."""
    try:
        from distributed import get_worker

        return get_worker().local_directory
    except Exception:
        return None


def attempt_packed(plan: RunPlan) -> tuple[str, Any]:
    """On a worker: run ``plan`` into a private scratch folder and return its files.

    ``("ok", (row, {relative path: bytes}))`` or ``("failed", failure record)``.
    """
    import shutil
    import tempfile

    tmp = tempfile.mkdtemp(prefix=f"dcsim-{plan.run_id}-", dir=_scratch_dir())
    try:
        status, payload = attempt(plan, tmp)
        if status != "ok":
            return status, payload
        root = Path(tmp)
        files = {p.relative_to(root).as_posix(): p.read_bytes()
                 for p in sorted(root.rglob("*")) if p.is_file() and not p.name.startswith(".")}
        return "ok", (payload, files)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def commit_files(out: Path, files: dict[str, bytes]) -> None:
    """Write a run's files into ``out`` like :class:`~dcsim.results.writer.RunWriter`
    does: each aside and renamed, the ``runs/<run_id>.json`` commit marker last."""
    from dcsim.results.schema import STREAMED
    from dcsim.results.writer import write_atomic

    def key(rel: str) -> tuple[bool, str]:
        return PurePosixPath(rel).parts[0] == "runs", rel

    for rel in sorted(files, key=key):
        parts = PurePosixPath(rel).parts
        if PurePosixPath(rel).is_absolute() or ".." in parts or parts[0] not in (
                *STREAMED, "runs"):
            raise ValueError(f"a worker returned an unexpected file {rel!r}")
        write_atomic(out.joinpath(*parts), files[rel])


def worker_info(needs: list[tuple[str, str]]) -> dict[str, Any]:
    """On a worker: its dcsim version and which of the needed plugins it lacks."""
    import dcsim
    from dcsim.plugins import get_plugin_class

    missing = []
    for name, kind in needs:
        try:
            get_plugin_class(name, kind)
        except Exception:
            missing.append(f"{kind} {name!r}")
    return {"dcsim": dcsim.__version__, "missing": missing}


#: Dask settings of the local cluster (``--executor dask``); a cluster you start yourself
#: can take the same ones (docs/howto/cluster-sweeps.md).
LOCAL_CLUSTER_CONFIG = {
    # forked workers start with dcsim and its plugins already imported, in a fraction of a
    # second (spawned ones, Dask's default, import them again: seconds per worker); POSIX only
    "distributed.worker.multiprocessing-method": "fork" if hasattr(os, "fork") else "spawn",
    # the statistical profiler samples every worker's stack every 10 ms, taking the GIL from
    # the simulation, the system monitor polls twice a second and the event loop's watchdog
    # ticks every 20 ms: together a few % of each core
    "distributed.worker.profile.enabled": False,
    "distributed.admin.system-monitor.interval": "2s",
    "distributed.admin.tick.interval": "200ms",
}


class DaskExecutor(Executor):
    """Runs on Dask distributed: a local cluster of ``workers`` processes (which write their
    runs' files themselves), or the existing scheduler at ``address`` (whose workers send
    the files back for the client to commit)."""

    name = "dask"

    def __init__(self, address: str | None = None, workers: int | None = None,
                 log: Log | None = None):
        self.address = address
        self.workers = workers or os.cpu_count() or 1
        self.log = log or (lambda msg: None)
        self._seen_workers = 0

    def describe(self) -> dict[str, Any]:
        d: dict[str, Any] = {"executor": self.name}
        if self.address:
            d["address"] = self.address
        else:
            d["local_workers"] = self.workers
        d["workers_seen"] = self._seen_workers
        return d

    def _connect(self):
        try:
            import distributed
        except ImportError:
            raise ConfigError('the dask executor needs dask[distributed]; install it with: '
                              'pip install -e ".[dask]"') from None
        if self.address is None:
            import dask

            with dask.config.set(LOCAL_CLUSTER_CONFIG):
                cluster = distributed.LocalCluster(
                    n_workers=self.workers, threads_per_worker=1, processes=True,
                    dashboard_address=":0", silence_logs=logging.ERROR,
                    preload=["dcsim.runner.executors"])  # dask_setup: die with dcsim run
            client = distributed.Client(cluster)
            link = f", dashboard {cluster.dashboard_link}" if _has_dashboard() else ""
            self.log(f"dask: local cluster of {self.workers} worker(s){link}")
            return distributed, cluster, client
        try:  # waits distributed.comm.timeouts.connect (Dask's config, default 30 s)
            client = distributed.Client(self.address)
        except (OSError, TimeoutError, ValueError) as e:
            raise ConfigError(f"--address {self.address}: cannot reach the Dask scheduler "
                              f"({e})") from None
        return distributed, None, client

    def _check_workers(self, client, exp: Experiment, plans: list[RunPlan]) -> None:
        import dcsim

        kind = exp.spec.plugin_kind
        needs = sorted({(p.allocator["name"], kind) for p in plans})
        try:
            info = client.run(worker_info, needs)
        except Exception as e:
            raise ConfigError(f"the Dask workers cannot run dcsim ({type(e).__name__}: {e}); "
                              "install dcsim and your plugins on every worker") from None
        self._seen_workers = len(info)
        for addr, i in sorted(info.items()):
            if i["dcsim"] != dcsim.__version__:
                raise ConfigError(f"Dask worker {addr} has dcsim {i['dcsim']}, this client "
                                  f"{dcsim.__version__}; install the same version everywhere")
            if i["missing"]:
                raise ConfigError(f"Dask worker {addr} lacks the {', '.join(i['missing'])}; "
                                  "install the same plugins on every worker")
        if self.address is not None:
            self.log(f"dask: scheduler {self.address}, {len(info)} worker(s) now"
                     + ("; the runs wait for workers to join" if not info else ""))

    def run(self, exp: Experiment, plans: list[RunPlan], out: Path) -> Iterator[Outcome]:
        if not plans:
            return
        distributed, cluster, client = self._connect()
        futures = []
        try:
            self._check_workers(client, exp, plans)
            token = uuid.uuid4().hex[:8]
            by_key = {}
            # a local cluster's workers are this process's children on this machine (they
            # hold its lock and die with it): they write into `out` themselves, like a
            # pool's; a remote cluster's workers send the files back for this process to write
            local = cluster is not None
            target = str(Path(out).resolve())
            for plan in plans:  # unique keys: two clients never share a run's result
                key = f"dcsim-{plan.run_id}-{token}"
                f = (client.submit(attempt, plan, target, key=key, pure=False) if local
                     else client.submit(attempt_packed, plan, key=key, pure=False))
                futures.append(f)
                by_key[f.key] = plan
            for f in distributed.as_completed(futures):
                plan = by_key[f.key]
                try:
                    status, payload = f.result()
                except Exception as e:  # the task itself could not run (KilledWorker, ...)
                    yield Outcome(plan, error=failure_record(plan, e))
                    continue
                finally:
                    f.release()
                if status != "ok":
                    yield Outcome(plan, error=payload)
                    continue
                if local:
                    yield Outcome(plan, row=payload)
                    continue
                row, files = payload
                try:
                    commit_files(out, files)
                except Exception as e:  # e.g. the disk is full: this run is not committed
                    yield Outcome(plan, error=failure_record(plan, e))
                    continue
                yield Outcome(plan, row=row)
        finally:
            _close(client, cluster, futures)


def _close(client, cluster, futures: Iterable) -> None:
    """Cancel what is left (a remote cluster stops scheduling it) and disconnect."""
    try:
        left = [f for f in futures if not f.done()]
        if left:
            client.cancel(left)
    except Exception:
        pass
    try:
        client.close()
    finally:
        if cluster is not None:
            cluster.close()


def _has_dashboard() -> bool:
    import importlib.util

    return importlib.util.find_spec("bokeh") is not None


def make_executor(executor: str = "local", jobs: int | None = None, address: str | None = None,
                  log: Log | None = None) -> Executor:
    """The executor the ``run`` command's ``--executor``, ``--jobs``, ``--address`` name."""
    if address is not None or executor == "dask":
        return DaskExecutor(address=address, workers=jobs, log=log)
    if executor != "local":
        raise ConfigError(f"--executor: unknown executor {executor!r} (local, dask)")
    return PoolExecutor(1 if jobs is None else jobs)
