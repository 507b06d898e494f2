"""Resampled traces (``trace.resample: true``) and sweeping a whole workload section."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dcsim.errors import ConfigError
from dcsim.model.topologies import build_topology
from dcsim.runner.config import sweep_value
from dcsim.runner.plan import load_experiment
from dcsim.workload.spec import build_source

TOPO = build_topology({"kind": "fabric", "preset": "alpha"})  # 40 servers of 10 cpu / 10 mem


@pytest.fixture
def table(tmp_path) -> Path:
    """Four requests whose (cpu, mem) pairs are all distinct; arrivals deliberately unsorted."""
    p = tmp_path / "t.csv"
    pd.DataFrame({"arrival": [3.0, 1.0, 2.0, 0.0], "duration": [9.0, 9.0, 9.0, 9.0],
                  "cpu": [1.0, 2.0, 3.0, 4.0], "mem": [0.1, 0.2, 0.3, 0.4],
                  "kind": ["a", "b", "c", "d"]}).to_csv(p, index=False)
    return p


def spec(path: Path, **trace) -> dict:
    return {"requests": 500, "arrival": {"process": "tick"},
            "duration": {"dist": "uniform_int", "low": 1, "high": 5},
            "trace": {"path": str(path), "resample": True, **trace}}


def draw(source, seed=0):
    bs = list(source.batches(np.random.default_rng(seed)))
    return (np.concatenate([b.demand for b in bs]), np.concatenate([b.duration for b in bs]),
            np.concatenate([b.arrival for b in bs]), bs)


def test_rows_are_drawn_whole_after_scale_and_cap(table):
    """Every request is one row of the table (cpu and mem paired), scaled then capped; the
    timing comes from the synthetic arrival and duration, not from the trace."""
    src = build_source(spec(table, scale={"cpu": 50, "mem": 500}, cap={"cpu": 100}), TOPO)
    demand, duration, arrival, _ = draw(src)
    rows = {(50.0, 50.0), (100.0, 100.0), (100.0, 150.0), (100.0, 200.0)}
    assert {tuple(x) for x in demand} == rows  # all four rows drawn, never mixed
    assert np.array_equal(arrival, np.arange(1, 501))
    assert set(duration) == {1, 2, 3, 4, 5}
    assert src.mean_demand("cpu") == pytest.approx((50 + 100 * 3) / 4)


def test_seeds_differ_and_repeat(table):
    """A seed gives the same rows every time; another seed gives other rows."""
    src = build_source(spec(table), TOPO)
    a, b, c = draw(src, 1)[0], draw(src, 1)[0], draw(src, 2)[0]
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_limit_is_the_pool_and_carried_columns_follow_their_row(table):
    """``limit`` keeps the first rows (by arrival) as the pool; a carried column stays with
    its row; the bandwidth distribution is drawn on top."""
    src = build_source({**spec(table, limit=2, columns={"kind": "kind"}),
                        "bandwidth": {"dist": "uniform", "low": 0.1, "high": 1.0}}, TOPO)
    demand, _, _, bs = draw(src)
    assert set(demand[:, 0]) == {4.0, 2.0}  # arrivals 0 and 1
    kinds = np.concatenate([b.attrs["kind"] for b in bs])
    assert set(zip(demand[:, 0], kinds, strict=True)) == {(4.0, "d"), (2.0, "b")}
    bw = np.concatenate([b.bandwidth for b in bs])
    assert bw.min() >= 0.1 and bw.max() <= 1.0


def test_offered_load_uses_the_table_mean(table):
    """offered_load derives the mean duration from the exact mean of the resampled rows."""
    s = spec(table)
    s["duration"] = {"dist": "exponential", "offered_load": 0.5}
    src = build_source(s, TOPO)
    assert src.mean_duration == pytest.approx(0.5 * 400 / 2.5)


@pytest.mark.parametrize(("change", "message"), [
    ({"arrival": None}, "workload: a resampled trace (trace.resample: true) needs arrival"),
    ({"duration": None}, "needs duration; the trace's own timing is not used"),
    ({"requests": None}, "workload.requests: required for a resampled trace"),
    ({"demand": {"cpu": 1}}, "workload.demand: a resampled trace gives the demand"),
    ({"trace": {"time_scale": 2}}, "workload.trace.time_scale: not used with resample"),
])
def test_errors_name_the_field(table, change, message):
    """Bad resample configurations fail with one line naming the field."""
    s = spec(table)
    for k, v in change.items():
        if k == "trace":
            s["trace"].update(v)
        elif v is None:
            s.pop(k)
        else:
            s[k] = v
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build_source(s, TOPO)


def test_sweep_value_of_a_mapping_is_its_name():
    """A swept section shows as its name, else as compact sorted JSON; scalars unchanged."""
    assert sweep_value({"name": "azure", "requests": 3}) == "azure"
    assert json.loads(sweep_value({"process": "tick", "interval": 2})) == \
        {"interval": 2, "process": "tick"}
    assert sweep_value(4) == 4 and sweep_value([1, 2]) == [1, 2]


def test_aliased_matrix_values_are_not_shared(tmp_path):
    """A YAML alias used by several points, with a later key setting a field inside it, gives
    each point its own value (the points do not overwrite one another)."""
    p = tmp_path / "x.yaml"
    p.write_text("""
name: alias
topology: {kind: flat, servers: 2}
workload: &w
  name: small
  requests: 5
  arrival: {process: tick}
  demand: {cpu: 1}
  duration: 1
allocators: [first_fit]
matrix:
  "workload,workload.requests": [[*w, 7], [*w, 9]]
""")
    exp = load_experiment(p)
    assert [r.config["workload"]["requests"] for r in exp.runs] == [7, 9]
    assert [r.params for r in exp.runs] == [{"workload": "small", "requests": 7},
                                            {"workload": "small", "requests": 9}]
