"""``capacity: wait`` (hold a request until the cluster's total fits) and ``acceptance_last20``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from dcsim.allocators import Allocator
from dcsim.allocators.multi.baselines import Tetris
from dcsim.allocators.single import FirstFitAllocator, RandomAllocator
from dcsim.cli import main
from dcsim.model.topologies import build_topology
from dcsim.modes.loss import EngineConfig
from dcsim.modes.loss.metrics import acceptance_last20
from tests.helpers.engine import run
from tests.helpers.sources import ListSource, random_source
from tests.helpers.trees import star_topology

WAIT = EngineConfig(capacity="wait")


class Spy(Allocator):
    """Wraps an allocator; records what the cluster had in total when each decision was made."""

    name = "spy"

    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.calls: list[dict] = []

    def setup(self, view):
        self.inner.setup(view)

    def released(self, request, placement, view):
        self.inner.released(request, placement, view)

    def allocate(self, request, view):
        choice = self.inner.allocate(request, view)
        self.calls.append({"id": request.id, "now": view.now, "arrival": request.arrival,
                           "total_free": view.free.sum(axis=0).copy(),
                           "demand": request.demand.copy(), "rejected": choice is None})
        return choice


def nara_source(n: int, seed: int, capacity: float = 50) -> ListSource:
    """Nara's uniform set on α: one arrival per tick, cpu, mem ~ U{1..50}, bw ~ U(0.1, 1)."""
    rng = np.random.default_rng(seed)
    demand = rng.integers(1, int(capacity) + 1, size=(n, 2)).astype(float)
    return ListSource(np.arange(1.0, n + 1), rng.integers(1, 31, n).astype(float), demand,
                      bandwidth=rng.uniform(0.1, 1.0, n))


def total_free_at(rows: pd.DataFrame, capacity: np.ndarray, t: float, rid: int) -> np.ndarray:
    """Total free resources when request ``rid`` arrives at ``t``, rebuilt from the rows."""
    held = rows[rows["accepted"] & (rows["id"] < rid) & (rows["start"] <= t) & (rows["end"] > t)]
    return capacity - held[["cpu", "mem"]].to_numpy().sum(axis=0)


@pytest.mark.parametrize("kind", ["first_fit", "tetris"])
def test_no_rejection_for_lack_of_total_capacity(kind):
    """Under wait, whenever the allocator rejects, the cluster's total free covered the demand."""
    if kind == "tetris":
        topo = build_topology({"kind": "fabric", "preset": "alpha"})
        # seed 2: in loss mode some rejections are for lack of total capacity (with seed 1
        # Tetris fails so many requests on the network that the cluster never fills)
        src, inner = nara_source(300, seed=2), Tetris()
    else:
        topo = star_topology(n=4, cpu=6, mem=6)
        src = random_source(np.random.default_rng(5), 400, rate=3, hold=4, max_demand=6)
        inner = FirstFitAllocator()
    spy = Spy(inner)
    _, summary, _ = run(topo, src, spy, WAIT)
    rejected = [c for c in spy.calls if c["rejected"]]
    assert rejected, "the workload must make the allocator reject something"
    for c in rejected:
        assert (c["total_free"] >= c["demand"] - 1e-9).all(), c
    assert 0 < summary["acceptance_ratio"] < 1

    # the same stream in loss mode does reject for lack of total capacity
    topo_spy = Spy(type(inner)())
    run(topo, src, topo_spy)
    assert any((c["total_free"] < c["demand"]).any() for c in topo_spy.calls if c["rejected"])


def test_waits_only_when_the_total_did_not_fit():
    """A request waits exactly when the total free at its arrival is below its demand; it
    starts at a departure, and at its decision the total fits."""
    topo = star_topology(n=3, cpu=6, mem=6)
    src = random_source(np.random.default_rng(11), 300, rate=4, hold=3, max_demand=6)
    spy = Spy(FirstFitAllocator())
    _, _, rec = run(topo, src, spy, WAIT)
    rows = pd.DataFrame(rec)
    cap = topo.total_capacity()
    waited = rows[rows["wait"] > 0]
    assert len(waited) > 10
    ends = set(rows["end"].dropna())
    for r in rows.itertuples():
        short = (total_free_at(rows, cap, r.arrival, r.id) < np.array([r.cpu, r.mem]) - 1e-9).any()
        assert (r.wait > 0) == short, r
        if r.wait > 0:
            assert r.arrival + r.wait in ends  # time fast-forwarded to a departure
    for c in spy.calls:
        assert c["now"] == pytest.approx(c["arrival"] + rows["wait"][c["id"]])
        assert (c["total_free"] >= c["demand"] - 1e-9).all()


def test_arrivals_keep_their_order_and_count_and_shift_by_the_waits():
    """Every workload request arrives once, in order; each arrival is pushed back by the sum
    of the earlier waits, so the gaps between arrivals are the workload's."""
    topo = star_topology(n=3, cpu=6, mem=6)
    src = random_source(np.random.default_rng(2), 250, rate=4, hold=3, max_demand=6)
    _, summary, rec = run(topo, src, FirstFitAllocator(), WAIT)
    rows = pd.DataFrame(rec)
    assert rows["id"].tolist() == list(range(250)) and summary["received"] == 250
    shift = np.concatenate([[0.0], np.cumsum(rows["wait"].to_numpy())[:-1]])
    np.testing.assert_allclose(rows["arrival"], src.arrival + shift, rtol=1e-12)
    assert rows["arrival"].is_monotonic_increasing
    acc = rows[rows["accepted"]]
    np.testing.assert_allclose(acc["start"], acc["arrival"] + acc["wait"])
    np.testing.assert_allclose(acc["end"], acc["start"] + acc["duration"])


def test_hand_built_trace_with_warmup_and_utilisation():
    """One 4-cpu server. r0 holds it on [0, 5]; r1 (t=1) waits until 5 and holds [5, 6.5];
    r2 (workload t=2, shifted to 6) waits for r1's departure at 6.5; r3 (t=3 -> 7.5) waits
    until 8.5. With warmup.time 5, r1 (arrived at 1) is warm-up; the window is [6, 8.5]."""
    topo = star_topology(n=1, cpu=4, mem=4)
    src = ListSource([0, 1, 2, 3], [5, 1.5, 2, 1], [[4, 0], [2, 0], [4, 0], [1, 0]])
    _, summary, rec = run(topo, src, FirstFitAllocator(),
                          EngineConfig(capacity="wait", warmup_time=5))
    assert rec["arrival"] == [0, 1, 6, 7.5]
    assert rec["wait"] == [0, 4, 0.5, 1]
    assert rec["start"] == [0, 5, 6.5, 8.5]
    assert rec["measured"] == [False, False, True, True]
    assert summary["received"] == summary["accepted"] == 2
    assert (summary["window_start"], summary["window_end"]) == (6, 8.5)
    # r1: 2 cpu on [6, 6.5]; r2: 4 cpu on [6.5, 8.5]; r3 starts at the window's end
    assert summary["util_cpu"] == pytest.approx((2 * 0.5 + 4 * 2) / (4 * 2.5))
    assert summary["sim_time"] == 9.5


def test_oversize_request_is_rejected_at_once():
    """A request larger than the whole cluster is offered at its arrival, without waiting."""
    topo = star_topology(n=2, cpu=4, mem=4)
    src = ListSource([1, 2, 3], [10, 1, 1], [[4, 4], [9, 1], [1, 1]])
    spy = Spy(FirstFitAllocator())
    _, _, rec = run(topo, src, spy, WAIT)
    assert rec["accepted"] == [True, False, True]
    assert rec["wait"] == [0, 0, 0] and rec["arrival"] == [1, 2, 3]
    assert spy.calls[1]["now"] == 2


def test_same_seed_same_rows_under_wait():
    """The random allocator under wait gives the same rows for the same seeds."""
    topo = star_topology(n=4, cpu=6, mem=6)
    outs = []
    for _ in range(2):
        src = random_source(np.random.default_rng(3), 300, rate=5, max_demand=6)
        _, s, rec = run(topo, src, RandomAllocator(rng=np.random.default_rng(9)), WAIT)
        rec.pop("decision_s")
        s.pop("mean_decision_s")
        outs.append((s, pd.DataFrame(rec)))
    assert outs[0][1]["wait"].gt(0).any()
    assert outs[0][0] == outs[1][0]
    pd.testing.assert_frame_equal(outs[0][1], outs[1][1])


def test_reject_is_the_default_and_never_waits():
    """capacity='reject' gives the rows of the default config, with wait 0 throughout."""
    topo = star_topology(n=3, cpu=6, mem=6)
    outs = []
    for cfg in (None, EngineConfig(capacity="reject")):
        src = random_source(np.random.default_rng(4), 200, rate=4, max_demand=6)
        _, s, rec = run(topo, src, FirstFitAllocator(), cfg)
        rec.pop("decision_s")
        s.pop("mean_decision_s")
        outs.append((s, pd.DataFrame(rec)))
    assert outs[0][0] == outs[1][0]
    pd.testing.assert_frame_equal(outs[0][1], outs[1][1])
    rows = outs[0][1]
    assert (rows["wait"] == 0).all() and not rows["accepted"].all()
    np.testing.assert_array_equal(rows["arrival"], src.arrival)


def test_engine_config_refuses_an_unknown_mode():
    """EngineConfig checks the mode itself, for callers that bypass the YAML."""
    with pytest.raises(ValueError, match="capacity"):
        EngineConfig(capacity="hold")


# ---------------------------------------------------------------------- acceptance_last20
def test_acceptance_last20_by_hand():
    """10 requests: the last 2 running ratios are 6/9 and 6/10."""
    flags = np.array([1, 0, 1, 1, 0, 0, 1, 1, 1, 0], dtype=bool)
    assert acceptance_last20(flags) == pytest.approx((6 / 9 + 6 / 10) / 2)


@pytest.mark.parametrize("n, m", [(1, 1), (4, 1), (5, 1), (6, 2), (15, 3), (128, 26)])
def test_acceptance_last20_averages_ceil_n_over_5_ratios(n, m):
    """The tail is ceil(n / 5) requests (15 -> 3, though 0.2 * 15 > 3 in floats)."""
    flags = np.zeros(n, dtype=bool)
    flags[0] = True  # running ratios 1/k
    expected = np.mean([1 / k for k in range(n - m + 1, n + 1)])
    assert acceptance_last20(flags) == pytest.approx(expected)


def test_acceptance_last20_empty_is_nan():
    """No measured request, no value."""
    assert np.isnan(acceptance_last20(np.zeros(0, dtype=bool)))


def test_summary_acceptance_last20_counts_measured_requests_only():
    """Warm-up requests are left out: the running ratio starts at the first measured one."""
    topo = star_topology(n=1, cpu=4, mem=4)
    # each request holds the whole server for 1.5 ticks: every other one is rejected
    n = 23
    src = ListSource(np.arange(n, dtype=float), [1.5] * n, [[4, 4]] * n, batch=5)
    _, summary, rec = run(topo, src, FirstFitAllocator(), EngineConfig(warmup_requests=3))
    flags = np.array(rec["accepted"])[3:]
    assert flags.tolist()[:4] == [False, True, False, True]
    assert summary["acceptance_last20"] == pytest.approx(acceptance_last20(flags))
    assert summary["acceptance_last20"] == pytest.approx(
        np.mean([flags[:k].sum() / k for k in (17, 18, 19, 20)]))


# ---------------------------------------------------------------------- end to end
SMALL = {
    "name": "capacity_wait",
    "seed": 2,
    "topology": {"kind": "flat", "servers": 4, "server": {"cpu": 8, "mem": 8}},
    "workload": {
        "requests": 300,
        "arrival": {"process": "tick"},
        "demand": {"cpu": {"dist": "uniform_int", "low": 1, "high": 8},
                   "mem": {"dist": "uniform_int", "low": 1, "high": 8}},
        "duration": {"dist": "uniform_int", "low": 1, "high": 15},
    },
    "warmup": {"requests": 20},
    "capacity": "wait",
    "allocators": ["first_fit"],
}


def _run_cli(tmp_path, cfg, *extra):
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return CliRunner().invoke(main, ["run", str(path), "--out", str(tmp_path / "out"), *extra])


def test_cli_run_with_capacity_wait_and_a_sweep_over_the_mode(tmp_path):
    """`capacity: wait` end to end, swept against reject: a `capacity` column, waits only
    under wait, acceptance_last20 in the summary and the mode in experiment.yaml."""
    cfg = dict(SMALL, matrix={"capacity": ["reject", "wait"]})
    result = _run_cli(tmp_path, cfg)
    assert result.exit_code == 0, result.output
    out = tmp_path / "out"
    s = pd.read_parquet(out / "summary.parquet").set_index("capacity")
    assert s["acceptance_last20"].between(0, 1).all() and (s["received"] == 280).all()
    assert s.loc["wait", "acceptance_ratio"] > s.loc["reject", "acceptance_ratio"]
    r = pd.read_parquet(out / "requests")
    assert len(r) == 600
    assert (r.loc[r["capacity"] == "reject", "wait"] == 0).all()
    assert (r.loc[r["capacity"] == "wait", "wait"] > 0).any()
    resolved = yaml.safe_load((out / "experiment.yaml").read_text())
    assert resolved["capacity"] == "wait"


def test_cli_reject_rows_equal_rows_without_the_option(tmp_path):
    """`capacity: reject` written out gives the same rows as leaving the option out."""
    frames = []
    for i, cfg in enumerate([{k: v for k, v in SMALL.items() if k != "capacity"},
                             dict(SMALL, capacity="reject")]):
        d = tmp_path / str(i)
        d.mkdir()
        assert _run_cli(d, cfg).exit_code == 0
        df = pd.read_parquet(d / "out" / "requests").drop(columns=["decision_s"])
        frames.append(df.sort_values("id").reset_index(drop=True))
    pd.testing.assert_frame_equal(frames[0], frames[1])


@pytest.mark.parametrize("value", ["hold", 1, None])
def test_cli_bad_capacity_is_one_clear_error(tmp_path, value):
    """A value other than reject or wait is one error line naming the field."""
    result = _run_cli(tmp_path, dict(SMALL, capacity=value))
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "capacity" in lines[0] and "'reject' or 'wait'" in lines[0]
