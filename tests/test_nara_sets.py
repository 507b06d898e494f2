"""The Nara authors' trace-derived request sets (truncate, zero_to, redraw_above,
bandwidth_low on a trace table) and Table 2's per-request utilisation (util_*_last50)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from dcsim.allocators.single import FirstFitAllocator
from dcsim.errors import ConfigError
from dcsim.model.topologies import build_topology
from dcsim.modes.loss import Engine
from dcsim.modes.loss.metrics import last50_mean
from dcsim.workload import TraceSource
from dcsim.workload.spec import build_source
from tests.helpers.sources import ListSource
from tests.helpers.trees import star_topology

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENTS = ROOT / "experiments"
SLICES = ROOT / "traces"
ALPHA = build_topology({"kind": "fabric", "preset": "alpha"})


def rows(src: TraceSource) -> np.ndarray:
    return np.concatenate([b.demand for b in src.batches(np.random.default_rng(0))])


def resampled(path: Path, n: int = 2000, seed: int = 0, **trace):
    s = {"requests": n, "arrival": {"process": "tick"},
         "duration": {"dist": "uniform_int", "low": 1, "high": 5},
         "trace": {"path": str(path), "resample": True, **trace}}
    src = build_source(s, ALPHA)
    bs = list(src.batches(np.random.default_rng(seed)))
    return src, np.concatenate([b.demand for b in bs]), np.concatenate([b.bandwidth for b in bs])


# ---------------------------------------------------------------------- the row rules
@pytest.fixture
def vmtypes(tmp_path) -> Path:
    """A hand-made vmType table: fractions of a machine, no timing columns."""
    p = tmp_path / "types.csv"
    pd.DataFrame({"vmTypeId": [0, 1, 2, 3, 4],
                  "core": [0.001, 0.0196, 0.1, 0.25, 0.5],
                  "memory": [0.0005, 0.004, 0.15, 0.199, 0.1],
                  "nic": [0.0, 0.01, 0.05, 0.02, 0.1]}).to_csv(p, index=False)
    return p


def test_azure_rule_scale_int_zero_to_one_then_redraw(vmtypes):
    """x 10 x 50 (= x 500), int(), 0 -> 1, and a row over 100 in cpu or mem never drawn:
    core 0.001 -> int(0.5) = 0 -> 1; 0.0196 -> int(9.8) = 9; memory 0.199 -> int(99.5) = 99;
    core 0.25 -> 125 (> 100: redrawn), core 0.5 -> 250 (redrawn)."""
    src = TraceSource(vmtypes, columns={"cpu": "core", "mem": "memory"},
                      scale={"cpu": 500, "mem": 500}, truncate=["cpu", "mem"],
                      zero_to={"cpu": 1, "mem": 1}, redraw_above={"cpu": 100, "mem": 100},
                      timing=False)
    got = rows(src)
    assert got.tolist() == [[1.0, 1.0], [9.0, 2.0], [50.0, 75.0]]
    assert src.redrawn == 2
    # the same through a resampled workload (the table has no arrival/duration columns)
    src, demand, _ = resampled(vmtypes, columns={"cpu": "core", "mem": "memory"},
                               scale={"cpu": 500, "mem": 500}, truncate=["cpu", "mem"],
                               zero_to={"cpu": 1, "mem": 1},
                               redraw_above={"cpu": 100, "mem": 100})
    assert {tuple(r) for r in demand} == {(1.0, 1.0), (9.0, 2.0), (50.0, 75.0)}
    assert len(src.rows) == 3 and src.rows.redrawn == 2
    # redrawing is drawing again: each kept row about 1/3 of the requests
    counts = pd.Series([tuple(r) for r in demand]).value_counts(normalize=True)
    assert counts.between(0.28, 0.39).all()


def test_truncate_is_toward_zero_and_zero_to_only_replaces_exact_zeros(tmp_path):
    """int() drops the fraction (2.9 -> 2); zero_to leaves 0.4 alone unless truncated."""
    p = tmp_path / "t.csv"
    pd.DataFrame({"arrival": [0, 1, 2], "duration": [1, 1, 1], "cpu": [2.9, 0.4, 0.0],
                  "mem": [0.4, 0.0, 7.0]}).to_csv(p, index=False)
    assert rows(TraceSource(p, truncate=["cpu"], zero_to={"mem": 1})).tolist() == [
        [2.0, 0.4], [0.0, 1.0], [0.0, 7.0]]
    assert rows(TraceSource(p, zero_to={"cpu": 1})).tolist() == [
        [2.9, 0.4], [0.4, 0.0], [1.0, 7.0]]
    # redraw_above applies after cap (a capped column never exceeds its cap)
    src = TraceSource(p, cap={"cpu": 1}, redraw_above={"cpu": 1, "mem": 5})
    assert rows(src).tolist() == [[1.0, 0.4], [0.4, 0.0]] and src.redrawn == 1
    with pytest.raises(ConfigError, match="redraw_above.gpu: not a mapped column"):
        TraceSource(p, redraw_above={"gpu": 1})
    with pytest.raises(ConfigError, match="truncate.x: not a mapped column"):
        TraceSource(p, truncate=["x"])


def test_alibaba_rule_on_a_hand_made_container_meta(tmp_path):
    """cpu = int(cpu_request / 800 x 50), mem = int(mem_size x 5), redrawn while either is
    over 100; no 0 -> 1 (mem_size 0.1 gives mem 0, kept)."""
    p = tmp_path / "cm.csv"
    p.write_text("c_1,m_1,0,app_1,started,400,400,1.56\n"
                 "c_2,m_2,0,app_2,started,3200,3200,3.13\n"     # cpu 200: redrawn
                 "c_3,m_3,5,app_3,started,1600,1600,0.1\n"
                 "c_4,m_4,9,app_4,stopped,800,800,25.0\n")      # mem 125: redrawn
    src, demand, _ = resampled(p, format="alibaba2018_containers",
                               columns={"cpu": "cpu_request", "mem": "mem_size"},
                               scale={"cpu": 0.0625, "mem": 5}, truncate=["cpu", "mem"],
                               redraw_above={"cpu": 100, "mem": 100})
    assert {tuple(r) for r in demand} == {(25.0, 7.0), (100.0, 0.0)}
    assert src.rows.redrawn == 2


def test_bandwidth_low_draws_up_to_the_rows_bandwidth(vmtypes):
    """Azure on delta as the paper's run: U(0.1, nic x 10), nic x 10 == 0 -> 0.01; either
    order of the bounds, like Python's random.uniform."""
    src, demand, bw = resampled(vmtypes, n=4000, columns={"cpu": "core", "mem": "memory",
                                                           "bandwidth": "nic"},
                                scale={"cpu": 500, "mem": 500, "bandwidth": 10},
                                truncate=["cpu", "mem"], zero_to={"cpu": 1, "mem": 1,
                                                                  "bandwidth": 0.01},
                                redraw_above={"cpu": 100, "mem": 100}, bandwidth_low=0.1)
    hi = {(1.0, 1.0): 0.01, (9.0, 2.0): 0.1, (50.0, 75.0): 0.5}
    for row, h in hi.items():
        b = bw[(demand == row).all(axis=1)]
        lo_, hi_ = min(0.1, h), max(0.1, h)
        assert b.min() >= lo_ - 1e-12 and b.max() <= hi_ + 1e-12
    wide = bw[(demand == (50.0, 75.0)).all(axis=1)]
    assert wide.mean() == pytest.approx(0.3, abs=0.02)
    with pytest.raises(ConfigError, match="bandwidth_low: draws the bandwidth"):
        build_source({"requests": 5, "arrival": {"process": "tick"},
                      "duration": {"dist": "uniform_int", "low": 1, "high": 5},
                      "bandwidth": {"dist": "uniform", "low": 0.1, "high": 1.0},
                      "trace": {"path": str(vmtypes), "resample": True, "bandwidth_low": 0.1}},
                     ALPHA)


# ---------------------------------------------------------------------- the committed sets
def table1_set(name: str, topo: str = "alpha") -> dict:
    d = yaml.safe_load((EXPERIMENTS / "nara_table1.yaml").read_text())
    (rows_,) = d["matrix"].values()
    (w,) = [r[0] for r in rows_ if r[0]["name"] == name and r[1] == topo]
    return w


def test_azure_set_equals_the_authors_expression_on_every_row():
    """Every row of the machine-16 vmType slice gives what the authors' Python gives
    (int(core * 10 * 50), 0 -> 1, kept iff both <= 100)."""
    w = table1_set("azure")
    src = build_source(w, ALPHA, base_dir=EXPERIMENTS)
    raw = pd.read_csv(SLICES / "azure2020_vmtypes_machine16.csv")

    def authors(x: float) -> int:
        v = int(x * 10 * 50)
        return v + 1 if v == 0 else v

    want = [(authors(c), authors(m)) for c, m in zip(raw["cpu"], raw["mem"], strict=True)]
    want = [r for r in want if r[0] <= 100 and r[1] <= 100]
    assert [tuple(r) for r in src.rows.demand] == want
    assert len(want) == 174 and src.rows.redrawn == 281 - 174


def test_alibaba_set_equals_the_authors_expression_on_every_row():
    """Every line of the container_meta slice: (int(cpu_request / 800 * 50),
    int(mem_size * 5)), kept iff both <= 100."""
    w = table1_set("alibaba")
    src = build_source(w, ALPHA, base_dir=EXPERIMENTS)
    raw = pd.read_csv(SLICES / "alibaba2018_container_meta_slice.csv")
    want = [(int(c / 800 * 50), int(m * 5))
            for c, m in zip(raw["cpu_request"], raw["mem_size"], strict=True)]
    want = [r for r in want if r[0] <= 100 and r[1] <= 100]
    assert [tuple(r) for r in src.rows.demand] == want
    assert len(src.rows) + src.rows.redrawn == len(raw) == 5000


# ---------------------------------------------------------------------- Table 2's metric
def test_last50_mean_takes_the_second_half():
    """The authors' range(int(5 n / 10), n): the last ceil(n / 2) samples."""
    assert last50_mean(np.array([0.0, 1.0, 2.0, 3.0, 4.0])) == pytest.approx(3.0)
    assert last50_mean(np.array([1.0, 3.0])) == 3.0
    assert np.isnan(last50_mean(np.zeros(0)))


def test_per_request_utilisation_hand_worked():
    """One server of 10 cpu / 10 mem, first fit, loss mode:

    t=0 r0 (4, 2) for 2; t=1 r1 (2, 2) for 10; t=2 r0 departs, r2 (8, 0) for 10;
    t=3 r3 (1, 1) does not fit; t=4 r4 (0, 1) for 1.
    Used at each decision: r0 (0, 0), r1 (.4, .2), r2 (.2, .2), r3 (1, .2), r4 (1, .2);
    after r4 (1, .3). Request i's sample is the next decision's (the last one's: after it):
    cpu (.4, .2, 1, 1, 1), mem (.2, .2, .2, .2, .3); the last 50 % = samples 2..4.
    """
    topo = star_topology(n=1, cpu=10, mem=10)
    src = ListSource([0, 1, 2, 3, 4], [2, 10, 10, 10, 1],
                     [[4, 2], [2, 2], [8, 0], [1, 1], [0, 1]])
    eng = Engine(topo, src, FirstFitAllocator(), np.random.default_rng(0))
    s = eng.run()
    per = eng.meter.per_request_util()
    np.testing.assert_allclose(per["cpu"], [0.4, 0.2, 1.0, 1.0, 1.0])
    np.testing.assert_allclose(per["mem"], [0.2, 0.2, 0.2, 0.2, 0.3], rtol=1e-6)
    assert s["util_cpu_last50"] == pytest.approx(1.0)
    assert s["util_mem_last50"] == pytest.approx((0.2 + 0.2 + 0.3) / 3, rel=1e-6)
    assert s["accepted"] == 4


def test_per_request_utilisation_counts_only_measured_requests():
    """With a warm-up of 2 requests the samples start at the third request's."""
    from dcsim.modes.loss import EngineConfig

    topo = star_topology(n=1, cpu=10, mem=10)
    src = ListSource([0, 1, 2, 3, 4], [2, 10, 10, 10, 1],
                     [[4, 2], [2, 2], [8, 0], [1, 1], [0, 1]])
    eng = Engine(topo, src, FirstFitAllocator(), np.random.default_rng(0),
                 EngineConfig(warmup_requests=2))
    s = eng.run()
    np.testing.assert_allclose(eng.meter.per_request_util()["cpu"], [1.0, 1.0, 1.0])
    assert s["util_cpu_last50"] == pytest.approx(1.0)
