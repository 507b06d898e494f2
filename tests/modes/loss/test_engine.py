"""The engine: decisions, holding, departures, loss mode, warm-up and time-weighted metrics."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dcsim.allocators import Allocator
from dcsim.allocators.single import BUILTIN_ALLOCATORS, FirstFitAllocator
from dcsim.errors import PluginError
from dcsim.model import Placement
from dcsim.modes.loss import Engine, EngineConfig
from tests.helpers.engine import run
from tests.helpers.sources import ListSource, random_source
from tests.helpers.trees import star_topology


def test_first_fit_placement_trace():
    """First fit fills server 0, then 1; a request that fits nowhere is dropped."""
    topo = star_topology(n=2, cpu=4, mem=4)
    src = ListSource([1, 2, 3, 4], [10, 10, 10, 10], [[3, 1], [2, 1], [2, 1], [4, 4]])
    eng, summary, rec = run(topo, src, FirstFitAllocator())
    assert rec["servers"] == [[0], [1], [1], []]
    assert rec["wait"] == [0, 0, 0, 0]  # loss mode (capacity: reject) never holds a request
    assert rec["accepted"] == [True, True, True, False]
    assert rec["end"][:3] == [11, 12, 13]
    assert summary["accepted"] == 3 and summary["received"] == 4


def test_departure_frees_resources_for_later_arrivals():
    """A request that did not fit at t=2 fits once the holder departs at t=3."""
    topo = star_topology(n=1, cpu=4, mem=4)
    src = ListSource([1, 2, 3.5], [2, 5, 1], [[4, 0], [1, 0], [4, 0]])
    eng, _, rec = run(topo, src, FirstFitAllocator())
    assert rec["accepted"] == [True, False, True]
    assert np.array_equal(eng.state.free, topo.server_capacity)
    assert eng.released == eng.accepted == 2


def test_time_weighted_utilisation_over_measured_window():
    """util is the time-average used fraction from the first measured to the last arrival."""
    topo = star_topology(n=1, cpu=8, mem=8)
    # warm-up request 0 holds 8 cpu on [0, 1]; measured window = [1, 5]
    src = ListSource([0, 1, 5], [1, 2, 1], [[8, 0], [4, 2], [0, 0]])
    _, summary, rec = run(topo, src, FirstFitAllocator(), EngineConfig(warmup_requests=1))
    assert summary["window_start"] == 1 and summary["window_end"] == 5
    assert summary["util_cpu"] == pytest.approx(4 * 2 / (8 * 4))
    assert summary["util_mem"] == pytest.approx(2 * 2 / (8 * 4))
    assert summary["mean_concurrent"] == pytest.approx(2 / 4)
    assert summary["received"] == 2 and rec["measured"] == [False, True, True]


def test_bandwidth_utilisation_per_tier_and_footprint():
    """Links a placement reserves count in the tier utilisation and the footprint."""
    topo = star_topology(n=2, cpu=8, mem=8, link=10)

    class TwoServers(Allocator):
        name = "two"

        def allocate(self, request, view):
            return Placement.build([0, 1], [request.demand / 2] * 2, links=[0, 1], bandwidth=5)

    src = ListSource([0, 4], [2, 1], [[2, 2], [0, 0]])
    _, summary, rec = run(topo, src, TwoServers())
    assert rec["footprint"][0] == 10 and rec["n_servers"][0] == 2
    assert rec["locality"][0] == 2  # two racks of one pod
    # 10 of 20 units for 2 of the 4 time units of the window
    assert summary["util_bw_tier1"] == pytest.approx(10 * 2 / (20 * 4))
    assert summary["mean_footprint"] == pytest.approx(10.0)


class Bad(Allocator):
    name = "bad"

    def __init__(self, choice, **kw):
        super().__init__(**kw)
        self.choice = choice

    def allocate(self, request, view):
        return self.choice


@pytest.mark.parametrize(
    "choice, demand, message",
    [
        (7, [1, 1], "chose server 7, outside"),
        (0, [5, 5], "lacks free resources"),
        ("x", [1, 1], "returned str"),
        (Placement.build([0], [[1, 1]]), [2, 2], "which demands"),
        (Placement.build([0], [[9, 9]]), [9, 9], "not enough free resources"),
    ],
)
def test_invalid_choices_raise_plugin_error_naming_the_allocator(choice, demand, message):
    """The engine validates every choice; a bad one is a PluginError naming the plugin."""
    topo = star_topology(n=2, cpu=4, mem=4)
    with pytest.raises(PluginError, match="'bad'") as e:
        run(topo, ListSource([1], [1], [demand]), Bad(choice))
    assert message in str(e.value)


class Recording(Allocator):
    """Wraps a built-in; checks the conservation invariant at every decision."""

    name = "recording"

    def __init__(self, inner, topo):
        super().__init__()
        self.inner = inner
        self.topo = topo
        self.held: dict[int, Placement] = {}
        self.release_count: dict[int, int] = {}
        self.pending = None

    def setup(self, view):
        self.inner.setup(view)

    def allocate(self, request, view):
        self.check(view)
        choice = self.inner.allocate(request, view)
        if choice is not None:
            p = choice
            if not isinstance(choice, Placement):
                p = Placement.single(choice, request.demand)
            self.held[request.id] = p
        return choice

    def released(self, request, placement, view):
        self.release_count[request.id] = self.release_count.get(request.id, 0) + 1
        del self.held[request.id]
        self.check(view)

    def check(self, view):
        assert (view.free >= 0).all() and (view.free <= view.capacity).all()
        used = np.zeros_like(view.free)
        for p in self.held.values():
            used[p.servers] += p.amounts
        np.testing.assert_allclose(view.free + used, view.capacity, atol=1e-9)


@pytest.mark.parametrize("cls", BUILTIN_ALLOCATORS, ids=lambda c: c.name)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 150), rate=st.floats(0.2, 20))
def test_conservation_under_every_builtin_allocator(cls, seed, n, rate):
    """free + used = capacity at every step; each accepted request is released exactly once."""
    topo = star_topology(n=4, cpu=6, mem=6)
    rng = np.random.default_rng(seed)
    rec = Recording(cls(rng=np.random.default_rng(seed + 1)), topo)
    eng, summary, rows = run(topo, random_source(rng, n, rate=rate), rec)
    accepted = {i for i, a in zip(rows["id"], rows["accepted"], strict=True) if a}
    assert set(rec.release_count) == accepted
    assert all(c == 1 for c in rec.release_count.values())
    assert np.array_equal(eng.state.free, topo.server_capacity)
    assert eng.released == eng.accepted == len(accepted)


def test_same_seed_same_rows():
    """The random allocator with the same generator seed makes the same decisions."""
    topo = star_topology(n=5)
    outs = []
    for _ in range(2):
        src = random_source(np.random.default_rng(3), 300, rate=5)
        from dcsim.allocators.single import RandomAllocator

        _, s, rec = run(topo, src, RandomAllocator(rng=np.random.default_rng(9)))
        rec.pop("decision_s")
        s.pop("mean_decision_s")
        outs.append((s, pd.DataFrame(rec)))
    assert outs[0][0] == outs[1][0]
    pd.testing.assert_frame_equal(outs[0][1], outs[1][1])


def test_workload_attrs_become_request_columns():
    """Extra per-request columns from the workload (e.g. N, S, B) appear in the records."""
    topo = star_topology(n=2)
    src = ListSource([1, 2], [1, 1], [[1, 1], [1, 1]], attrs={"N": [3, 4]})
    _, _, rec = run(topo, src, FirstFitAllocator())
    assert rec["N"] == [3, 4]


@pytest.mark.parametrize("ties", [False, True], ids=["float", "integer-times"])
@pytest.mark.parametrize("config", [
    {}, {"warmup_requests": 50, "sample_every": 3}, {"warmup_time": 40.0, "sample_every": 1},
    {"sample_interval": 5.0}, {"sample_interval": 1.0, "warmup_requests": 20}])
def test_the_fused_path_gives_the_rows_of_the_general_one(config, ties):
    """The engine's fused path (engine_fused, whose loop runs its departures in place)
    gives what its general path (``_offer``, ``_arrive``, ``_settle``, every event run by
    SimPy) gives: same summary, same request and time-series rows, and ``released`` gets
    the same placements at the same times; within the fused path, a server index as a
    numpy integer (handed to ``_settle``, its departure a SimPy ``Timeout`` among the
    loop's own) gives what the same ``int`` does. With ``ties``, times and durations are
    whole numbers, so arrivals, departures and periodic samples share instants. The
    summary's measured counts (totalled per batch) are those of the rows, warm-up or not.
    ``tests/modes/loss/test_fused_loop.py`` adds stepwise decisions, Placements, None and
    bad indices mid-run, and a property test on tied streams."""
    from dcsim.allocators.single import BestFitAllocator
    from dcsim.modes.loss import EngineConfig
    from tests.helpers.sources import random_source
    from tests.helpers.trees import star_topology

    class Rows:
        def __init__(self):
            self.rows = {}

        def __call__(self, kind, cols):
            for k, v in cols.items():
                self.rows.setdefault((kind, k), []).extend(list(v))

    def run(as_numpy: bool, fused: bool = True):
        released = []

        class Alloc(BestFitAllocator):
            def allocate(self, request, view):
                c = super().allocate(request, view)
                return np.int64(c) if (as_numpy and c is not None) else c

            def released(self, request, placement, view):
                released.append((request.id, placement.servers.tolist(),
                                 placement.amounts.tolist(), view.now))

        sink = Rows()
        topo = star_topology(6)
        src = random_source(np.random.default_rng(3), 400)
        if ties:
            src.arrival, src.duration = np.floor(src.arrival), np.floor(src.duration)
        eng = Engine(topo, src, Alloc(),
                     np.random.default_rng(0), EngineConfig(**config), sink=sink)
        assert eng._fused
        eng._fused = fused
        out = eng.run()
        out.pop("mean_decision_s")
        sink.rows.pop(("requests", "decision_s"))
        return out, sink.rows, released

    import pandas as pd

    fused, general = run(False), run(False, fused=False)
    for other in (general, run(True)):
        assert fused[0] == other[0]
        for kind in ("requests", "timeseries"):
            frames = [pd.DataFrame({k: v for (t, k), v in r[1].items() if t == kind})
                      for r in (fused, other)]
            pd.testing.assert_frame_equal(*frames)
        assert fused[2] == other[2]
    rows = pd.DataFrame({k: v for (t, k), v in fused[1].items() if t == "requests"})
    assert not rows["accepted"].all() and len(fused[2]) > 100
    measured = rows[rows["measured"]]
    warm = bool(config.get("warmup_requests") or config.get("warmup_time"))
    assert 0 < len(measured) <= 400 and (len(measured) < 400) == warm
    assert fused[0]["received"] == len(measured)
    assert fused[0]["accepted"] == int(measured["accepted"].sum())


def test_periodic_samples_run_until_the_last_arrival():
    """``metrics.sample_interval``: a sample at 0, then every interval (the core's periodic
    process), the last one not after the last arrival's time plus one interval."""
    from dcsim.allocators.single import FirstFitAllocator
    from dcsim.modes.loss import EngineConfig
    from tests.helpers.sources import ListSource
    from tests.helpers.trees import star_topology

    rows = []
    src = ListSource([0.5, 1.0, 3.2, 7.9], [1.0, 5.0, 1.0, 1.0], [[1, 1]] * 4)
    eng = Engine(star_topology(2), src, FirstFitAllocator(), np.random.default_rng(0),
                 EngineConfig(sample_interval=2.5),
                 sink=lambda kind, cols: rows.append(cols) if kind == "timeseries" else None)
    eng.run()
    ts = rows[0]
    assert ts["time"] == [0.0, 2.5, 5.0, 7.5]
    assert ts["received"] == [0, 2, 3, 3] and ts["active"] == [0.0, 1.0, 1.0, 0.0]
