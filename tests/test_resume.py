"""--resume after an interruption (kill -9 included) gives the dataset of an uninterrupted
run, leftovers of killed runs are never read as data, and failed runs are logged, do not stop
the others and run again on resume (a plugin calling sys.exit, a worker that dies or is
killed fails only its own run); the README's first command run twice keeps every run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
import yaml

from tests.helpers.cli import assert_same_dataset, invoke, ok
from tests.helpers.configs import small_experiment
from tests.helpers.runs import QUICKSTART, patch_loss_runs, small_quickstart

CFG = small_experiment(
    "resume", seed=11, seeds=3, requests=4000, workload={"batch_size": 100},
    warmup={"requests": 50},
    # small row groups: a run's hidden temporary appears early and grows while it runs
    metrics={"flush_rows": 100, "sample_every": 20},
    allocators=["random", "first_fit"])
N_RUNS = 6


def write(tmp_path: Path, cfg: dict = CFG) -> Path:
    p = tmp_path / "exp.yaml"
    p.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return p


def leftovers(out: Path) -> list[Path]:
    return [p for p in out.rglob(".*") if ".tmp" in p.name]


def wait_unlocked(out: Path, timeout: float = 20) -> None:
    """Return once no process holds the output directory's lock."""
    import fcntl

    with open(out / ".dcsim.lock", "a+") as f:
        deadline = time.time() + timeout
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except OSError:
                if time.time() > deadline:
                    pytest.fail(f"{out} is still locked {timeout} s after the kill")
                time.sleep(0.05)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """One uninterrupted serial run."""
    tmp = tmp_path_factory.mktemp("ref")
    out = tmp / "out"
    ok("run", write(tmp), "--out", out)
    return out


@pytest.mark.parametrize("executor", [
    pytest.param(["--jobs", "1"], marks=pytest.mark.slow),  # the pool's path, one process
    ["--jobs", "2"],
    pytest.param(["--executor", "dask", "--jobs", "2"], marks=pytest.mark.slow),
], ids=["serial", "pool", "dask"])
def test_kill_9_mid_experiment_then_resume_equals_an_uninterrupted_run(tmp_path, reference,
                                                                        executor):
    """SIGKILL while runs are under way: no visible file is torn, a plain re-run asks for
    --resume, and --resume completes the very dataset of one clean run."""
    if "dask" in executor:
        pytest.importorskip("distributed")
    # On a busy machine the last runs can finish between the poll that sees the experiment
    # mid-way and the kill landing: such an attempt proves nothing, so start again (the
    # behaviour under test is what a kill that does land mid-experiment leaves).
    for attempt in range(4):
        out = tmp_path / f"out{attempt}"
        p = subprocess.Popen([sys.executable, "-m", "dcsim", "run", str(write(tmp_path)),
                              "--out", str(out), *executor],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 60
        try:
            while time.time() < deadline:  # a run finished, another one half-written
                if list((out / "runs").glob("*.json")) and list(
                        (out / "requests").rglob(".*.parquet.tmp")):
                    break
                time.sleep(0.02)
            p.send_signal(signal.SIGKILL)
        finally:
            p.wait(timeout=30)
        wait_unlocked(out)  # the killed process's workers abort their runs and exit
        committed = {f.stem for f in (out / "runs").glob("*.json")}
        if 1 <= len(committed) < N_RUNS:
            break
    assert 1 <= len(committed) < N_RUNS, "the kill did not land mid-experiment"
    assert not (out / "summary.parquet").exists()
    for f in (out / "requests").rglob("*.parquet"):  # every visible file is whole
        if not f.name.startswith("."):
            pd.read_parquet(f)
    r = invoke("run", write(tmp_path), "--out", out)
    assert r.exit_code == 1 and "--resume" in r.stderr
    r = ok("run", write(tmp_path), "--out", out, "--resume", *executor)
    assert f"{len(committed)} of {N_RUNS} runs are finished" in r.stderr
    assert_same_dataset(reference, out, runs=N_RUNS)
    assert not leftovers(out)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["runs_finished"] == N_RUNS and manifest["runs_failed"] == 0


def test_leftovers_of_a_killed_run_are_never_read(tmp_path, reference):
    """Hidden temporaries are skipped by pyarrow, and a run killed between its renames and
    its json (visible Parquet files, no json) is deleted and run again on resume."""
    import shutil

    out = tmp_path / "out"
    shutil.copytree(reference, out)
    run_id = sorted(f.stem for f in (out / "runs").glob("*.json"))[0]
    (out / "runs" / f"{run_id}.json").unlink()
    torn = next((out / "requests").rglob(f"{run_id}.parquet"))
    torn.write_bytes(torn.read_bytes()[:100])  # as if cut short
    garbage = [torn.with_name(".other.parquet.tmp"), out / ".summary.parquet.tmp123",
               out / "runs" / f".{run_id}.json.tmp99",
               next((out / "timeseries").rglob("*.parquet")).with_name(".x.parquet.tmp")]
    for g in garbage:
        g.write_bytes(b"not parquet")
    # pyarrow's discovery ignores dot-files: only the torn visible file breaks a read
    pd.read_parquet(out / "timeseries")
    with pytest.raises(pa.ArrowInvalid):
        pd.read_parquet(out / "requests")
    r = ok("run", write(tmp_path), "--out", out, "--resume")
    assert f"{N_RUNS - 1} of {N_RUNS} runs are finished" in r.stderr
    assert not leftovers(out)
    assert_same_dataset(reference, out, runs=N_RUNS)


def test_failed_runs_are_logged_the_others_finish_and_resume_reruns_them(tmp_path, reference,
                                                                         monkeypatch):
    """A run that raises is recorded in failures.jsonl (run, error, traceback) without
    stopping the others; the command exits 1 naming the count and the log; --resume then runs
    only the failed run and the dataset equals a clean run's."""
    from dcsim.modes.loss.mode import LossMode

    real = LossMode.build

    def flaky(self, spec, plan, *args):
        if plan.label == "first_fit" and plan.seed == 1:
            raise RuntimeError("boom in first_fit seed 1")
        return real(self, spec, plan, *args)

    monkeypatch.setattr(LossMode, "build", flaky)
    out = tmp_path / "out"
    # --resume is fine on a first submission too (a batch job that may be requeued)
    r = invoke("run", write(tmp_path), "--out", out, "--resume")
    assert r.exit_code == 1
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith(f"error: 1 of {N_RUNS} runs failed; see {out / 'failures.jsonl'}")
    assert "RuntimeError: boom in first_fit seed 1" in line
    [failure] = [json.loads(x) for x in (out / "failures.jsonl").read_text().splitlines()]
    assert failure["allocator"] == "first_fit" and failure["seed"] == 1
    assert failure["run_id"].startswith("first_fit-s1-") and failure["params"] == {}
    assert failure["error"] == "RuntimeError" and "boom" in failure["message"]
    assert "Traceback" in failure["traceback"] and "flaky" in failure["traceback"]
    s = pd.read_parquet(out / "summary.parquet")
    assert len(s) == N_RUNS - 1 and failure["run_id"] not in set(s["run_id"])
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["runs_finished"] == N_RUNS - 1 and manifest["runs_failed"] == 1
    assert [m["error"] for m in manifest["runs"] if m["error"]] == [
        "RuntimeError: boom in first_fit seed 1"]
    assert not leftovers(out)

    monkeypatch.setattr(LossMode, "build", real)  # "fixed"
    kept = {p: p.stat().st_mtime_ns for p in (out / "requests").rglob("*.parquet")}
    r = ok("run", write(tmp_path), "--out", out, "--resume")
    assert "running the other 1" in r.stderr
    assert all(p.stat().st_mtime_ns == t for p, t in kept.items())
    assert not (out / "failures.jsonl").exists()
    assert_same_dataset(reference, out, runs=N_RUNS)


def test_failures_in_pool_workers_are_logged(tmp_path, monkeypatch):
    """The same on a 2-process pool (workers are forked, so they see the patch)."""
    from dcsim.modes.loss.mode import LossMode

    real = LossMode.build

    def flaky(self, spec, plan, *args):
        if plan.seed == 0:
            raise ValueError(f"bad seed for {plan.label}")
        return real(self, spec, plan, *args)

    monkeypatch.setattr(LossMode, "build", flaky)
    out = tmp_path / "out"
    cfg = dict(CFG, seeds=2, workload=dict(CFG["workload"], requests=300))
    r = invoke("run", write(tmp_path, cfg), "--out", out, "--jobs", "2")
    assert r.exit_code == 1 and "error: 2 of 4 runs failed" in r.stderr
    failures = [json.loads(x) for x in (out / "failures.jsonl").read_text().splitlines()]
    assert [(f["allocator"], f["seed"], f["error"]) for f in failures] == [
        ("random", 0, "ValueError"), ("first_fit", 0, "ValueError")]
    assert sorted(pd.read_parquet(out / "summary.parquet")["seed"]) == [1, 1]


def test_resume_and_overwrite_exclude_each_other(tmp_path):
    r = invoke("run", write(tmp_path), "--out", tmp_path / "o", "--resume", "--overwrite")
    assert r.exit_code == 2 and "exclude each other" in r.output + r.stderr


def test_a_second_invocation_waits_for_the_first(tmp_path, reference):
    """Two processes never write into one directory at once: the second waits for the lock."""
    import fcntl
    import threading

    out = tmp_path / "out"
    out.mkdir()
    holder = open(out / ".dcsim.lock", "a+")  # noqa: SIM115 - released by the timer
    fcntl.flock(holder, fcntl.LOCK_EX)
    timer = threading.Timer(0.5, holder.close)
    timer.start()
    t0 = time.time()
    r = ok("run", write(tmp_path), "--out", out)
    timer.join()
    assert time.time() - t0 >= 0.5
    assert "waiting for another dcsim process writing to" in r.stderr
    assert_same_dataset(reference, out, runs=N_RUNS)




def _failures(out: Path) -> list[dict]:
    f = out / "failures.jsonl"
    return [json.loads(x) for x in f.read_text().splitlines()] if f.exists() else []


def _committed(out: Path) -> set[str]:
    return {p.stem for p in (out / "runs").glob("*.json")}


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_plugin_calling_sys_exit_fails_only_its_run(tmp_path, monkeypatch, jobs):
    from tests.helpers.cli import invoke

    def exit_4(plan):
        if plan.label == "best_fit" and plan.seed == 1:
            raise SystemExit(4)

    patch_loss_runs(monkeypatch, exit_4)
    out = tmp_path / "o"
    r = invoke("run", small_quickstart(tmp_path), "--out", out, "--jobs", jobs)
    assert r.exit_code == 1
    assert "error: 1 of 9 runs failed" in r.stderr and "SystemExit: 4" in r.stderr
    [f] = _failures(out)
    assert (f["allocator"], f["seed"], f["error"]) == ("best_fit", 1, "SystemExit")
    assert len(_committed(out)) == 8


def test_a_worker_that_dies_fails_only_its_own_run(tmp_path, monkeypatch):
    """os._exit in a plugin (what an OOM kill looks like) breaks the pool; the runs that
    were in it run again alone, so only the dying run fails and every other is kept. The
    failure log and runs/ agree; --resume runs only the dead run again."""
    from tests.helpers.cli import invoke, ok

    def die(plan):
        if plan.label == "random" and plan.seed == 0:
            os._exit(3)

    patch_loss_runs(monkeypatch, die)
    out = tmp_path / "o"
    r = invoke("run", small_quickstart(tmp_path), "--out", out, "--jobs", "2")
    assert r.exit_code == 1 and "error: 1 of 9 runs failed" in r.stderr
    [f] = _failures(out)
    assert (f["allocator"], f["seed"], f["error"]) == ("random", 0, "WorkerDied")
    assert f["run_id"] not in _committed(out) and len(_committed(out)) == 8
    monkeypatch.undo()
    r = ok("run", small_quickstart(tmp_path), "--out", out, "--resume", "--jobs", "2")
    assert "running the other 1" in r.stderr
    assert len(_committed(out)) == 9 and not _failures(out)


def test_a_killed_worker_is_retried_and_the_failure_log_agrees_with_runs(tmp_path,
                                                                        monkeypatch):
    """A worker killed from outside once (kill -9) takes its pool down; its run and the
    others in the pool run again and succeed: no failure is reported for a committed run."""
    import signal

    from tests.helpers.cli import ok

    marker = tmp_path / "killed-once"

    def kill_once(plan):
        if plan.label == "first_fit" and plan.seed == 2 and not marker.exists():
            marker.write_text("x")
            os.kill(os.getpid(), signal.SIGKILL)

    patch_loss_runs(monkeypatch, kill_once)
    out = tmp_path / "o"
    ok("run", small_quickstart(tmp_path), "--out", out, "--jobs", "2")
    assert marker.exists() and len(_committed(out)) == 9 and not _failures(out)


def test_a_run_reported_failed_but_committed_is_not_a_failure(tmp_path):
    """Whatever an executor reports, runs/ is the truth: a run whose files were committed
    is neither in failures.jsonl nor counted as failed."""
    from dcsim.runner.execute import run_experiment
    from dcsim.runner.executors import Executor, Outcome, attempt, failure_record
    from dcsim.runner.plan import load_experiment

    class LostResult(Executor):
        def run(self, exp, plans, out):
            for i, plan in enumerate(plans):
                status, payload = attempt(plan, out)
                assert status == "ok"
                yield (Outcome(plan, error=failure_record(plan, RuntimeError("lost")))
                       if i == 0 else Outcome(plan, row=payload))

    exp = load_experiment(small_quickstart(tmp_path, seeds=1))
    out = run_experiment(exp, tmp_path / "o", executor=LostResult())
    assert len(_committed(out)) == 3 and not _failures(out)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["runs_failed"] == 0 and manifest["runs_finished"] == 3


def test_the_readme_first_command_runs_twice_and_shows_the_numbers(tmp_path):
    """README's first command with --resume: a second invocation keeps every run and exits
    0; both end with the headline table and the wall time; off a terminal every finished
    run prints a progress line with an ETA."""
    from tests.helpers.cli import ok

    out = tmp_path / "small"
    args = ("run", QUICKSTART, "--seeds", "2", "--set", "workload.requests=300",
            "--set", "warmup.requests=30", "--out", out, "--resume")
    first = ok(*args)
    progress = [x for x in first.stderr.splitlines() if x.startswith("[")]
    assert progress[0].startswith("[1/6] runs done,") and "ETA" in progress[0]
    assert progress[-1].startswith("[6/6] runs done,") and "ETA" not in progress[-1]
    second = ok(*args)
    assert "resuming: 6 of 6 runs are finished" in second.stderr
    assert not [x for x in second.stderr.splitlines() if x.startswith("[")]
    for r in (first, second):
        assert f"6 runs -> {out} in " in r.stdout
        table = r.stdout.split("mean ± 95 % interval over seeds:\n")[1].splitlines()
        assert table[0].split()[:3] == ["allocator", "acceptance_ratio", "util_cpu"]
        assert [x.split()[0] for x in table[2:5]] == ["random", "first_fit", "best_fit"]
        assert all(x.split()[-1] == "2" for x in table[2:5])  # seeds
