"""The Dask executor: on a 2-worker LocalCluster the dataset equals a serial run's, row for
row; failed runs on workers are logged and resumed; connection and usage errors are one
line."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.helpers.cli import assert_same_dataset, invoke, ok
from tests.helpers.configs import small_experiment

distributed = pytest.importorskip("distributed")

SMALL = small_experiment("dask_small", seed=5, seeds=2, requests=400,
                         warmup={"requests": 50}, metrics={"sample_every": 20},
                         allocators=["random", "first_fit",
                                     {"name": "best_fit", "options": {"score": "max"}}],
                         matrix={"workload.duration.offered_load": [0.7, 1.1]})


def write(folder: Path, cfg: dict, name: str = "exp.yaml") -> Path:
    p = folder / name
    p.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return p


@pytest.fixture(scope="module")
def cluster():
    """One 2-worker, 1-thread-per-worker process cluster for the module (forked workers
    start in a fraction of a second; spawned ones import dcsim first, as on a real cluster,
    and behave the same)."""
    import dask

    with dask.config.set({"distributed.worker.multiprocessing-method": "fork"}), \
            distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                     dashboard_address=None, silence_logs=logging.ERROR) as c:
        yield c


@pytest.fixture(scope="module")
def serial(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("serial")
    ok("run", write(tmp, SMALL), "--out", tmp / "out")
    return tmp / "out"


def test_existing_scheduler_gives_the_serial_rows(tmp_path, cluster, serial):
    """--address: every summary, request and timeseries row equals the serial run's."""
    out = tmp_path / "out"
    r = ok("run", write(tmp_path, SMALL), "--out", out, "--address", cluster.scheduler_address)
    assert "2 worker(s)" in r.stderr
    assert len(pd.read_parquet(out / "summary.parquet")) == 12
    assert_same_dataset(serial, out)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["executor"]["executor"] == "dask"
    assert manifest["executor"]["address"] == cluster.scheduler_address
    assert manifest["runs_finished"] == 12
    assert not [p for p in out.rglob(".*") if ".tmp" in p.name]


def test_executor_dask_starts_a_local_cluster(tmp_path, serial):
    """--executor dask --jobs 2 starts (and stops) its own 2-worker cluster."""
    out = tmp_path / "out"
    r = ok("run", write(tmp_path, SMALL), "--out", out, "--executor", "dask", "--jobs", "2")
    assert "local cluster of 2 worker(s)" in r.stderr
    assert_same_dataset(serial, out)


def test_failures_on_workers_are_logged_and_resumed(tmp_path, cluster):
    """A run that raises on a worker is logged with the worker's traceback; the others are
    committed; after the cause is fixed --resume runs only the failed ones. The cause: a
    failure trace whose storm of events at time 0 passes every check made when the sweep
    is planned and trips the failure-rate cap only while the run replays it."""
    calm = pd.DataFrame({"time": [5.0, 20.0], "kind": ["server", "server"],
                         "component": [0, 1], "duration": [10.0, 10.0]})
    calm.to_csv(tmp_path / "calm.csv", index=False)
    n = 6000  # 12,000 failure and repair events before the first arrival
    storm = pd.DataFrame({"time": [0.0] * n, "kind": ["server"] * n,
                          "component": [i % 4 for i in range(n)], "duration": [1e-3] * n})
    storm.to_csv(tmp_path / "storm.csv", index=False)
    cfg = dict(SMALL, failures={"trace": {"path": "calm.csv"}},
               allocators=["first_fit", "random"],
               matrix={"failures.trace.path": ["calm.csv", "storm.csv"]})
    out = tmp_path / "out"
    r = invoke("run", write(tmp_path, cfg), "--out", out, "--address", cluster.scheduler_address)
    assert r.exit_code == 1, r.output
    assert f"error: 4 of 8 runs failed; see {out / 'failures.jsonl'}" in r.stderr
    failures = [json.loads(x) for x in (out / "failures.jsonl").read_text().splitlines()]
    assert {f["params"]["path"] for f in failures} == {"storm.csv"}
    assert {(f["allocator"], f["seed"]) for f in failures} == {
        (a, s) for a in ("first_fit", "random") for s in (0, 1)}
    assert all(f["error"] == "DcsimError" and "would swamp the run" in f["message"]
               and "execute_run" in f["traceback"] for f in failures)
    assert os.getpid() not in {f["pid"] for f in failures}  # recorded on the workers
    assert set(pd.read_parquet(out / "summary.parquet")["path"]) == {"calm.csv"}

    calm.to_csv(tmp_path / "storm.csv", index=False)  # fixed
    r = ok("run", write(tmp_path, cfg), "--out", out, "--address", cluster.scheduler_address,
           "--resume")
    assert "running the other 4" in r.stderr and not (out / "failures.jsonl").exists()
    ok("run", write(tmp_path, cfg), "--out", tmp_path / "serial")
    assert_same_dataset(tmp_path / "serial", out)


def test_a_worker_with_another_dcsim_is_refused(tmp_path, cluster, monkeypatch):
    """Workers must run the client's dcsim version; nothing runs otherwise."""
    import dcsim

    monkeypatch.setattr(dcsim, "__version__", "0.0.0-client")
    r = invoke("run", write(tmp_path, SMALL), "--out", tmp_path / "o",
               "--address", cluster.scheduler_address)
    assert r.exit_code == 1 and "this client 0.0.0-client" in r.stderr
    assert not (tmp_path / "o" / "runs").exists()


def test_unreachable_scheduler_is_one_line(tmp_path):
    import dask

    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        r = invoke("run", write(tmp_path, SMALL), "--out", tmp_path / "o",
                   "--address", "tcp://127.0.0.1:9")
    assert r.exit_code == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --address tcp://127.0.0.1:9: cannot "
                                                   "reach the Dask scheduler")


@pytest.mark.parametrize("args, msg", [
    (["--address", "tcp://x:8786", "--jobs", "2"], "--jobs"),
    (["--address", "tcp://x:8786", "--executor", "local"], "--executor dask"),
])
def test_usage_errors(tmp_path, args, msg):
    r = invoke("run", write(tmp_path, SMALL), "--out", tmp_path / "o", *args)
    assert r.exit_code == 2 and msg in r.output + r.stderr
