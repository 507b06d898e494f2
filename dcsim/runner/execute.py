"""Run an experiment's plans on an executor and assemble its output directory: resume,
overwrite, the lock, failures, the summary and manifest. One run is
:func:`dcsim.runner.run.execute_run`."""

from __future__ import annotations

import platform
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from dcsim import __version__
from dcsim.errors import ConfigError, DcsimError
from dcsim.results.schema import STREAMED
from dcsim.runner.executors import Executor, Log, PoolExecutor
from dcsim.runner.plan import Experiment, resolved_config

FAILURES = "failures.jsonl"
LOCK = ".dcsim.lock"
MANAGED = (*STREAMED, "runs", "summary.parquet", "manifest.json", "experiment.yaml", FAILURES)


def make_executor(executor: str = "local", jobs: int | None = None, address: str | None = None,
                  log: Log | None = None) -> Executor:
    """The executor the ``run`` command's ``--executor``, ``--jobs``, ``--address`` name."""
    if address is not None or executor == "dask":
        from dcsim.runner.dask_executor import DaskExecutor

        return DaskExecutor(address=address, workers=jobs, log=log)
    if executor != "local":
        raise ConfigError(f"--executor: unknown executor {executor!r} (local, dask)")
    return PoolExecutor(1 if jobs is None else jobs)


class RunsFailed(DcsimError):
    """Some runs raised; the others finished and the summary and manifest were written."""

    def __init__(self, failed: list[dict[str, Any]], total: int, log_path: Path):
        self.failed, self.total, self.log_path = failed, total, log_path
        first = failed[0]
        msg = (first["message"].strip().splitlines() or [""])[0]
        if len(msg) > 160:
            msg = msg[:157] + "..."
        super().__init__(f"{len(failed)} of {total} runs failed; see {log_path} "
                         f"(first: {first['run_id']}: {first['error']}: {msg})")


@contextmanager
def _lock(out: Path, log: Callable[[str], None]) -> Iterator[None]:
    """Hold ``out/.dcsim.lock`` while writing, so that two invocations never write (or clean)
    the same directory at once; the second waits. A killed process's lock is released."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock
        yield
        return
    with open(out / LOCK, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            log(f"waiting for another dcsim process writing to {out} to finish (Ctrl-C to stop)")
            fcntl.flock(f, fcntl.LOCK_EX)
        yield  # released when the file closes


def _is_temporary(p: Path) -> bool:
    return p.name.startswith(".") and ".tmp" in p.name


def clean_unfinished(out: Path, finished: set[str] | None) -> int:
    """Delete what interrupted runs left: hidden temporaries, and (given the finished run
    ids) the Parquet files of runs without their ``runs/<run_id>.json``. Returns how many
    files went. Only call it while no run is writing into ``out``."""
    gone = 0
    for folder in (out, out / "runs"):
        for p in folder.glob(".*"):
            if p.is_file() and _is_temporary(p):
                p.unlink(missing_ok=True)
                gone += 1
    for kind in STREAMED:
        root = out / kind
        if not root.is_dir():
            continue
        for p in sorted(root.rglob("*")):
            if not p.is_file():
                continue
            if _is_temporary(p) or (finished is not None and p.suffix == ".parquet"
                                    and not p.name.startswith(".") and p.stem not in finished):
                p.unlink(missing_ok=True)
                gone += 1
        for d in sorted((d for d in root.rglob("*") if d.is_dir()), key=lambda d: -len(d.parts)):
            if not any(d.iterdir()):
                d.rmdir()
    return gone


def prepare_out(exp: Experiment, out: Path, overwrite: bool, resume: bool = False,
                code: dict[str, dict[str, Any]] | None = None, rerun_changed: bool = False,
                log: Callable[[str], None] | None = None) -> dict[str, dict[str, Any]]:
    """Check ``out`` against ``exp`` and return the runs already finished there (kept only
    with ``resume``), or clear it with ``overwrite``. What interrupted runs left (hidden
    temporaries, Parquet files of runs without their json) is deleted.

    Finished runs whose recorded code differs from ``code`` (each planned run's
    :func:`~dcsim.runner.fingerprint.run_code`; default: computed here) are refused with
    :class:`~dcsim.errors.CodeChangedError` before anything in ``out`` is touched, or, with
    ``rerun_changed``, deleted so that they run again (said through ``log``)."""
    from dcsim.results.verify import verify
    from dcsim.results.writer import bad_records, run_record_path, run_records, summary_row
    from dcsim.runner.fingerprint import code_changes, experiment_code

    out.mkdir(parents=True, exist_ok=True)
    if overwrite:
        for name in MANAGED:
            p = out / name
            if p.is_dir():
                shutil.rmtree(p)
            elif p.exists():
                p.unlink()
        clean_unfinished(out, set())
        return {}
    bad = bad_records(out)   # a torn or foreign record: its run is not finished
    records = run_records(out)
    done = {k: summary_row(v) for k, v in records.items()}
    planned = {r.run_id for r in exp.runs}
    stale = sorted(set(done) - planned)
    if stale:
        raise ConfigError(
            f"{out}: holds {len(stale)} run(s) of a different configuration "
            f"(e.g. {stale[0]}); use --overwrite to replace them or --out to write elsewhere"
        )
    if done and not resume:
        left = len(planned) - len(done)
        rest = f"run the other {left}" if left else "run nothing (all are finished)"
        raise ConfigError(
            f"{out}: already holds {len(done)} finished run(s) of this experiment; use "
            f"--resume to keep them and {rest}, or --overwrite to run everything again"
        )
    changed = code_changes(records, code if code is not None else experiment_code(exp),
                           [r.run_id for r in exp.runs])
    if changed and not rerun_changed:
        raise changed.error(out)
    if changed and log is not None:
        log(f"rerunning {len(changed.runs)} finished run(s) whose code changed: "
            f"{changed.describe()}")
    for run_id in changed.runs:  # the json first: from here on the run is unfinished
        run_record_path(out, run_id).unlink()
        del done[run_id]
    check = verify(out, {k: records[k] for k in done})
    if check.broken and log is not None:
        log(f"rerunning {check.describe()}")
    for run_id in check.broken:
        run_record_path(out, run_id).unlink()
        del done[run_id]
    if check.unverified and log is not None:
        log(f"{len(check.unverified)} finished run(s) were recorded without their files' "
            "checksums (by an older dcsim); they are kept unverified (--overwrite runs "
            "everything again)")
    for p in bad:
        if log is not None:
            log(f"{p} is not a run record dcsim wrote (unreadable JSON); that run is run "
                "again")
        p.unlink()
    clean_unfinished(out, set(done))
    return done


def unchanged_runs(exp: Experiment, out: Path) -> int:
    """How many of ``exp``'s runs are finished in ``out`` and were made by the code that
    would run them now (what ``rerun_changed`` keeps)."""
    from dcsim.results.writer import run_records
    from dcsim.runner.fingerprint import code_changes, experiment_code

    if not Path(out).is_dir():
        return 0
    order = [r.run_id for r in exp.runs]
    records = {k: v for k, v in run_records(out).items() if k in set(order)}
    return len(records) - len(code_changes(records, experiment_code(exp), order).runs)


def run_experiment(
    exp: Experiment,
    out: str | Path | None = None,
    jobs: int = 1,
    overwrite: bool = False,
    on_done: Callable[[dict[str, Any]], None] | None = None,
    *,
    resume: bool = False,
    rerun_changed: bool = False,
    executor: Executor | None = None,
    on_failed: Callable[[dict[str, Any]], None] | None = None,
    log: Callable[[str], None] | None = None,
) -> Path:
    """Run every unfinished run of ``exp``; write summary, resolved config and manifest.

    ``executor`` (default: a local pool of ``jobs`` processes) runs them. With ``resume``
    the runs already finished in ``out`` are kept; without it (and without ``overwrite``) a
    directory that holds finished runs is refused, and so is one whose finished runs were
    made by other code than would run now (:class:`~dcsim.errors.CodeChangedError`, naming
    what changed); ``rerun_changed`` (which implies ``resume``) runs those again instead.
    A run that raises is recorded in
    ``failures.jsonl`` and the others go on; if any failed, :class:`RunsFailed` is raised
    after the summary and manifest are written.
    """
    from dcsim.results.unify import unify_tables
    from dcsim.results.verify import refuse_links
    from dcsim.results.writer import (
        run_records,
        summary_row,
        write_atomic,
        write_json,
        write_summary,
    )
    from dcsim.runner.fingerprint import experiment_code

    out = Path(out) if out is not None else Path("results") / exp.name
    executor = executor if executor is not None else PoolExecutor(jobs)
    log = log or (lambda msg: None)
    resume = resume or rerun_changed
    code = experiment_code(exp)  # before any worker starts: forked ones inherit it
    out.mkdir(parents=True, exist_ok=True)
    refuse_links(out)  # before the lock, a deletion or a write: a refusal leaves it whole
    with _lock(out, log):
        done = prepare_out(exp, out, overwrite, resume, code, rerun_changed, log)
        (out / FAILURES).unlink(missing_ok=True)
        write_atomic(out / "experiment.yaml",
                     yaml.safe_dump(resolved_config(exp), sort_keys=False).encode())
        todo = [r for r in exp.runs if r.run_id not in done]
        if done:
            log(f"resuming: {len(done)} of {len(exp.runs)} runs are finished in {out}; "
                f"running the other {len(todo)}")
        rows = dict(done)
        failures: dict[str, dict[str, Any]] = {}
        started = time.time()
        for r in exp.runs:
            if r.run_id in done and on_done:
                on_done(done[r.run_id])
        outcomes = executor.run(exp, todo, out)
        try:
            for o in outcomes:
                if o.error is None:
                    rows[o.plan.run_id] = o.row
                    if on_done:
                        on_done(o.row)
                else:
                    failures[o.plan.run_id] = o.error
                    write_atomic(out / FAILURES, b"".join(
                        _json_line(failures[r.run_id]) for r in exp.runs
                        if r.run_id in failures))
                    if on_failed:
                        on_failed(o.error)
        finally:
            outcomes.close()  # stops the executor: a pool shuts down, a Dask client closes
            clean_unfinished(out, None)  # temporaries only: no run is writing any more
            # what is committed on disk is the truth: runs that finished while an interrupted
            # pool shut down are there even though this loop never saw their results
            order = [r.run_id for r in exp.runs]
            planned = set(order)
            records = {k: v for k, v in run_records(out).items() if k in planned}
            rows.update({k: summary_row(v) for k, v in records.items()})
            # ... and a run committed there did not fail, whatever an executor reported
            committed_failures = [k for k in failures if k in rows]
            if committed_failures:
                for k in committed_failures:
                    del failures[k]
                if failures:
                    write_atomic(out / FAILURES, b"".join(
                        _json_line(failures[r.run_id]) for r in exp.runs
                        if r.run_id in failures))
                else:
                    (out / FAILURES).unlink(missing_ok=True)
            present = [rows[i] for i in order if i in rows]
            if present:
                # one column list per table over the runs (a sweep's points can differ)
                unify_tables(out, {k: records[k] for k in order if k in records})
                write_summary(out, present, order)
            write_json(out / "manifest.json",
                       _manifest(exp, rows, failures, started, executor.describe(), code))
    if failures:
        raise RunsFailed([failures[r.run_id] for r in exp.runs if r.run_id in failures],
                         len(exp.runs), out / FAILURES)
    return out


def _json_line(record: dict[str, Any]) -> bytes:
    import json

    return (json.dumps(record, default=str) + "\n").encode()


def _manifest(exp: Experiment, rows: dict[str, dict[str, Any]],
              failures: dict[str, dict[str, Any]], started: float, executor: dict[str, Any],
              code: dict[str, dict[str, Any]]):
    import numpy
    import simpy

    from dcsim.allocators.single import FirstFitAllocator
    from dcsim.kernels import kernel_choice, kernels_on

    return {
        "dcsim_version": __version__,
        "experiment": exp.name,
        "config_file": exp.source,
        "seed": exp.spec.seed,
        "seeds": exp.spec.seeds,
        "jobs": executor.get("jobs"),
        "executor": executor,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "runs_planned": len(exp.runs),
        "runs_finished": sum(r.run_id in rows for r in exp.runs),
        "runs_failed": sum(r.run_id in failures for r in exp.runs),
        "runs": [
            {
                "run_id": r.run_id,
                "allocator": r.label,
                "seed": r.seed,
                "params": r.params,
                "finished": r.run_id in rows,
                "error": (f"{failures[r.run_id]['error']}: {failures[r.run_id]['message']}"
                          if r.run_id in failures else None),
                "wall_time_s": rows.get(r.run_id, {}).get("wall_time_s"),
                # the code that made its row; for a run not finished, the code of this
                # invocation
                "code_id": rows.get(r.run_id, {}).get("code_id", code[r.run_id]["code_id"]),
            }
            for r in exp.runs
        ],
        # whether the compiled kernels were on (AHAB's lookahead; first_fit's scan, which
        # under auto loads once a process's numpy comparisons have cost SCAN_AFTER_S more
        # than the scan would have): the same rows either way, other timings
        "kernels": "numba" if kernels_on() else "numpy",
        "first_fit_scan_after_s": (None if not kernels_on() else 0.0 if kernel_choice() ==
                                   "numba" else FirstFitAllocator.SCAN_AFTER_S),
        "code": _code_section(code),
        "versions": {
            "python": platform.python_version(),
            "numpy": numpy.__version__,
            "simpy": getattr(simpy, "__version__", "?"),
            "numba": _installed("numba"),
        },
    }


def _code_section(code: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The manifest's ``code``: dcsim's fingerprint, the library versions and every plugin
    from another distribution that a planned run uses (the runs' ``code_id`` fold these)."""
    from dcsim.results import provenance

    plugins = {}
    for run in code.values():
        for p in run["plugins"]:
            plugins.setdefault((p["kind"], p["name"]), p)
    return {"dcsim": dict(provenance.dcsim_code()), "libraries": dict(provenance.libraries()),
            "plugins": [plugins[k] for k in sorted(plugins)]}


def _installed(dist: str) -> str | None:
    """The installed version of a distribution, None if it is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None
