"""Metric plugins in vm_online and gpu (``gpu.arrivals``), as in loss mode: arrivals,
decisions, departures (a failure's interruptions included), failures and repairs in time
order, each placement departing at most once; their columns in the summary and the time
series; the same run with and without a metric; the one-pass GPU protocol and the modes
without metrics refuse them, naming why."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from dcsim.cli import main
from dcsim.experiment_sections import parse_failures
from dcsim.metrics import Observers
from dcsim.modes.gpu.engine import run_gpu
from dcsim.plugins import get_plugin_class
from tests.helpers.failures import run_vm
from tests.helpers.metric_calls import Recorder, check_order

GPU_DATA = str(Path(__file__).resolve().parent / "data" / "gpu")
VMS = [  # id, arrival, duration, cpu, mem      first fit on 2 hosts x 2 NUMAs x 20 cores
    (0, 0.5, 6.0, 8, 4), (1, 1.0, 3.0, 8, 4), (2, 1.5, 9.0, 12, 4), (3, 2.0, 1.0, 20, 4),
    (4, 3.0, 4.0, 4, 4), (5, 4.0, 30.0, 16, 4), (6, 6.0, 2.0, 20, 4), (7, 9.0, 5.0, 6, 4)]


def vm_run(tmp_path, failures, metrics):
    return run_vm(tmp_path, VMS, failures, sample_every=2.0,
                  metrics=Observers(metrics) if metrics else None)


@pytest.mark.parametrize("on_failure", ["drop", "reallocate"])
def test_vm_online_metrics_hear_every_event_in_order(tmp_path, on_failure):
    failures = {"on_failure": on_failure,
                "servers": {"ttf": {"dist": "exponential", "mean": 4.0}, "ttr": 2.0}}
    rec = Recorder()
    out, tables = vm_run(tmp_path, failures, [rec])
    calls = rec.calls
    assert calls[0] == ("start", "vm_online", ("cpu", "mem"))
    check_order(calls, all_depart=False)
    arrivals = [c for c in calls if c[0] == "arrival"]
    assert len(arrivals) == out["received"] == len(VMS)
    firsts = {}
    for c in calls:
        if c[0] == "decision":
            firsts.setdefault(c[2], c[3])
    assert sum(p is not None for p in firsts.values()) == out["accepted"]
    fails = tables["component_failures"]["event"]
    assert sum(c[0] == "failure" for c in calls) == fails.count("fail") > 0
    assert sum(c[0] == "repair" for c in calls) == fails.count("repair")
    assert out["recorded_events"] == len(calls)
    assert len(tables["timeseries"]["recorded_so_far"]) == len(tables["timeseries"]["time"])
    # the same run without the metric
    out2, tables2 = vm_run(tmp_path, failures, None)
    for k in ("recorded_events", "mean_decision_s", "reschedule_seconds"):
        out.pop(k, None), out2.pop(k, None)
    assert out == pytest.approx(out2, nan_ok=True)
    assert tables["vms"]["host"] == tables2["vms"]["host"]


def gpu_spec():
    return {"nodes": {"path": "nodes.csv"}, "pods": {"path": "pods.csv"}, "inflate": None,
            "check_invariants": True,
            "arrivals": {"pods": 200, "load": 1.2, "mean_holding": 100, "warmup": 0.2,
                         "sample_every": 50}}


def gpu_run(metrics, on_failure="reallocate"):
    cls = get_plugin_class("best_fit", "gpu_allocator")
    alloc = cls(cls.parse_options({}), rng=np.random.default_rng(2))
    tables: dict[str, dict] = {}
    fails = parse_failures({"servers": {"ttf": {"dist": "exponential", "mean": 300},
                                        "ttr": 40}, "on_failure": on_failure})
    out = run_gpu(gpu_spec(), alloc, np.random.default_rng(4),
                  lambda t, c: tables.setdefault(t, c), GPU_DATA, failures=fails,
                  failure_rng=np.random.default_rng(9),
                  metrics=Observers(metrics) if metrics else None)
    return out, tables


@pytest.mark.parametrize("on_failure", ["drop", "reallocate"])
def test_gpu_metrics_hear_every_event_in_order(on_failure):
    rec = Recorder()
    out, tables = gpu_run([rec], on_failure)
    calls = rec.calls
    assert calls[0] == ("start", "gpu", ("gpu", "cpu", "mem"))
    check_order(calls, all_depart=False)
    assert sum(c[0] == "arrival" for c in calls) == 200
    events = tables["component_failures"]["event"]   # every one (n_failures: the window's)
    assert sum(c[0] == "failure" for c in calls) == list(events).count("fail") > 0
    assert sum(c[0] == "repair" for c in calls) == list(events).count("repair")
    placed = [c for c in calls if c[0] == "decision" and c[3] is not None]
    assert all(isinstance(c[3], tuple) and isinstance(c[3][1], tuple) for c in placed)
    assert out["recorded_events"] == len(calls)
    series = tables["timeseries"]
    assert len(series["recorded_so_far"]) == len(series["time"])
    out2, tables2 = gpu_run(None, on_failure)
    for k in ("recorded_events", "mean_decision_s"):
        out.pop(k, None), out2.pop(k, None)
    assert out == pytest.approx(out2, nan_ok=True)
    assert tables["pods"]["node"] == tables2["pods"]["node"]


METRIC = '''\
from dcsim import hookimpl
from dcsim.metrics import Column, Metric


class Placed(Metric):
    name = "placed_here"
    summary_columns = {"placed_count": Column("int64", "decisions that placed")}
    timeseries_columns = {"placed_so_far": Column("int64", "decisions that placed so far")}

    def on_start(self, run):
        self.n = 0

    def on_decision(self, now, request, placement):
        self.n += placement is not None

    def sample(self, now):
        return {"placed_so_far": self.n}

    def summary(self):
        return {"placed_count": self.n}


@hookimpl
def register_metrics(register):
    register(Placed)
'''


def test_gpu_one_pass_refuses_metrics_and_online_runs_them(tmp_path):
    import shutil

    import pandas as pd

    for f in ("nodes.csv", "pods.csv"):
        shutil.copy(Path(GPU_DATA) / f, tmp_path / f)
    (tmp_path / "placed.py").write_text(METRIC)
    cfg = {"name": "g", "mode": "gpu", "plugins": ["placed.py"], "seed": 1,
           "gpu": {"nodes": {"path": "nodes.csv"}, "pods": {"path": "pods.csv"},
                   "inflate": None},
           "gpu_allocators": ["best_fit"], "metrics": {"plugins": ["placed_here"]}}
    (tmp_path / "one.yaml").write_text(yaml.safe_dump(cfg))
    r = CliRunner().invoke(main, ["validate", str(tmp_path / "one.yaml")])
    assert r.exit_code != 0 and "Traceback" not in r.output
    assert ("metrics.plugins: mode gpu runs metric plugins only with gpu.arrivals "
            "(the one-pass protocol has no time)") in r.output
    cfg["gpu"]["arrivals"] = {"pods": 120, "load": 1.0, "mean_holding": 50}
    (tmp_path / "on.yaml").write_text(yaml.safe_dump(cfg))
    r = CliRunner().invoke(main, ["run", str(tmp_path / "on.yaml"), "--out",
                                  str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    s = pd.read_parquet(tmp_path / "out" / "summary.parquet")
    pods = pd.read_parquet(tmp_path / "out" / "pods")
    assert int(s["placed_count"].iloc[0]) == int(pods["accepted"].sum()) > 0
    ts = pd.read_parquet(tmp_path / "out" / "timeseries")
    assert "placed_so_far" in ts.columns and ts["placed_so_far"].is_monotonic_increasing
