"""The Dask executor (``--executor dask``, ``--address``): a local cluster of this machine's
workers, or an existing cluster whose workers write each run into scratch space and send
its files back for the client to commit (see :mod:`dcsim.runner.executors` for who writes
what)."""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from dcsim.errors import ConfigError

if TYPE_CHECKING:
    from dcsim.runner.plan import Experiment, RunPlan

from dcsim.runner.executors import Executor, Log, Outcome, WorkerDied, attempt, failure_record

#: how many times a run whose worker process died is run again, on another worker, before it
#: fails as ``WorkerDied`` (Dask's ``distributed.scheduler.allowed-failures``, 3 by default):
#: once, as the local pool runs each run of a broken pool once more, alone. A death from
#: outside (kill -9, a lost node) costs a run one try; a run that kills its worker every time
#: costs two worker restarts, not four
RETRIES = 1

#: on a local cluster, how long the sweep waits with no worker connected (all died and none
#: came back) before the runs still to do fail instead of waiting for ever
NO_WORKERS_S = 60.0


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


def attempt_local(plan: RunPlan, out: str) -> tuple[str, Any]:
    """On a local cluster's worker: :func:`attempt`, unless the run is already committed in
    ``out``. Dask runs a finished task again when the worker holding its result dies before
    ``dcsim run`` fetched it; the run then returns its committed row instead of simulating
    again (and rewriting its files), so that it cannot share the blame of a later death."""
    import json

    from dcsim.results.writer import run_record_path, summary_row

    record = run_record_path(Path(out), plan.run_id)
    if record.exists():  # not before this invocation: prepare_out planned it as unfinished
        return "ok", summary_row(json.loads(record.read_text()))
    return attempt(plan, out)


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
    """On a worker: its dcsim version, the hash of its dcsim source
    (:mod:`dcsim.results.provenance`) and which of the needed plugins it lacks."""
    import dcsim
    from dcsim.plugins import get_plugin_class
    from dcsim.results.provenance import dcsim_code

    missing = []
    for name, kind in needs:
        try:
            get_plugin_class(name, kind)
        except Exception:
            missing.append(f"{kind} {name!r}")
    return {"dcsim": dcsim.__version__, "source_hash": dcsim_code()["source_hash"],
            "missing": missing}


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
    # a worker that dies costs exactly its own run: Dask blames every task "processing" on a
    # dying worker, and with the default saturation (1.1) a one-thread worker holds a second
    # task queued behind the running one, which would share the blame (and, after
    # RETRIES + 1 such deaths, fail with KilledWorker though it never ran); at 1.0 it holds
    # only the one it runs (the next is sent when it ends: a millisecond on one machine)
    "distributed.scheduler.worker-saturation": 1.0,
    "distributed.scheduler.allowed-failures": RETRIES,
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
                    preload=["dcsim.runner.dask_executor"])  # dask_setup: die with dcsim run
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
        from dcsim.results.provenance import dcsim_code

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
        ours = dcsim_code()["source_hash"]
        other = sorted(a for a, i in info.items() if i.get("source_hash", ours) != ours)
        if other:  # each run records the code that ran it: the worker's
            self.log(f"dask: {len(other)} worker(s) (e.g. {other[0]}) run other dcsim code "
                     f"than this client (the same version, another source hash); their runs "
                     "record their own code, which a later --resume compares with this "
                     "client's")
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
                f = (client.submit(attempt_local, plan, target, key=key, pure=False) if local
                     else client.submit(attempt_packed, plan, key=key, pure=False))
                futures.append(f)
                by_key[f.key] = plan
            deaths = _exit_codes(cluster) if local else {}
            for f, error in _ended(distributed, client, futures, local):
                plan = by_key[f.key]
                try:
                    if error is None:
                        status, payload = f.result()
                except Exception as e:  # the task itself could not run (KilledWorker, ...)
                    error = e
                finally:
                    f.release()
                if error is not None:
                    if local and (row := _committed_row(out, plan)) is not None:
                        yield Outcome(plan, row=row)  # a committed run never failed
                    else:
                        yield Outcome(plan, error=_task_failure(plan, error, deaths, local))
                    continue
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


def _ended(distributed, client, futures: list, local: bool) -> Iterator[tuple[Any, Any]]:
    """The futures as they end, each with None, or, on a local cluster that has had no
    worker for :data:`NO_WORKERS_S` seconds (they died and did not come back), with the
    error that the runs still to do fail with (the sweep ends instead of waiting for ever)."""
    ended = distributed.as_completed(futures)
    yielded: set = set()
    alone_since = None
    checked = time.monotonic()
    while not ended.is_empty():
        batch = ended.next_batch(block=False)
        for f in batch:
            yielded.add(f)
            yield f, None
        if batch:
            alone_since = None
            continue
        time.sleep(0.05)  # as_completed itself polls every 0.1 s
        if not local or time.monotonic() - checked < 2.0:
            continue
        checked = time.monotonic()
        if client.nthreads():
            alone_since = None
        elif alone_since is None:
            alone_since = checked
        elif checked - alone_since > NO_WORKERS_S:
            error = WorkerDied(f"every worker of the local Dask cluster died and none came back "
                               f"within {NO_WORKERS_S:.0f} s; this run had not ended")
            for f in futures:
                if f not in yielded:
                    yield f, error
            return


def _exit_codes(cluster) -> dict[str, int]:
    """{worker address: exit code} of the local cluster's worker processes that ended, filled
    in as they end (best effort: it wraps the exit callback of each Nanny's WorkerProcess,
    which Dask does not document; without it a death's exit code is just unknown)."""
    codes: dict[str, int] = {}
    for nanny in list(getattr(cluster, "workers", {}).values()):
        proc = getattr(nanny, "process", None)
        on_exit = getattr(proc, "on_exit", None)
        if on_exit is None:
            continue

        def record(exitcode, proc=proc, on_exit=on_exit) -> None:
            if getattr(proc, "worker_address", None):
                codes[proc.worker_address] = exitcode
            on_exit(exitcode)

        proc.on_exit = record
    return codes


def _committed_row(out: Path, plan: RunPlan) -> dict[str, Any] | None:
    """The summary row of ``plan`` if its run is committed in ``out``, else None."""
    import json

    from dcsim.results.writer import run_record_path, summary_row

    try:
        return summary_row(json.loads(run_record_path(out, plan.run_id).read_text()))
    except (OSError, ValueError):
        return None


def _task_failure(plan: RunPlan, error: BaseException, deaths: dict[str, int],
                  local: bool) -> dict[str, Any]:
    """The failure record of a run whose task did not end with a result: Dask's KilledWorker
    (its worker died on every try) becomes ``WorkerDied``, worded as the local pool's, with
    the exit code where the worker was this machine's (a local cluster)."""
    from distributed.scheduler import KilledWorker

    if not isinstance(error, KilledWorker):
        return failure_record(plan, error)
    address = getattr(error.last_worker, "address", None)
    deadline = time.monotonic() + 2.0  # the Nanny may hear of the exit just after the scheduler
    while local and address not in deaths and time.monotonic() < deadline:
        time.sleep(0.05)
    return failure_record(plan, WorkerDied(
        f"the worker process running this run died without an exception "
        f"({_exit_text(deaths.get(address), address)}; os._exit, a signal or the "
        f"out-of-memory killer); it died on each of its {error.allowed_failures + 1} tries "
        f"(a worker process each), and the other runs went on"), tb="")


def _exit_text(code: int | None, address: str | None) -> str:
    """"exit code 3", "killed by signal 9 (SIGKILL)", or where to look when unknown."""
    if code is None:
        return f"exit code unknown; see the log of worker {address}"
    if code < 0:
        import signal

        try:
            name = f" ({signal.Signals(-code).name})"
        except ValueError:
            name = ""
        return f"killed by signal {-code}{name}"
    return f"exit code {code}"


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
