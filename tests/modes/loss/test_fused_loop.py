"""The fused loss path's own loop (``engine_fused``: departures run in place between
arrivals, in SimPy's order) against the engine's general path, which lets SimPy run every
event: the same rows, summaries, releases and events, at ties of every kind (issue #37)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dcsim.allocators.single import FirstFitAllocator
from dcsim.errors import PluginError
from dcsim.model import Placement
from dcsim.modes.loss import Engine, EngineConfig
from tests.helpers.sources import ListSource
from tests.helpers.trees import star_topology


class Mixed(FirstFitAllocator):
    """first_fit, but by request id (``plan``): a numpy integer, a Placement, None, a
    stepwise decision that waits on SimPy events (zero-delay timeouts) first, or a bad
    choice. ``released`` logs each release with the time and schedules a zero- or
    one-unit timeout whose callback logs again: events of a plugin's own among the
    engine's, from inside a departure."""

    name = "mixed"

    def __init__(self, plan: dict[int, str] | None = None, echo: bool = True):
        super().__init__()
        self.plan = plan or {}
        self.echo = echo
        self.env = None  # set once the engine exists
        self.log: list = []

    def allocate(self, request, view):
        how = self.plan.get(request.id, "int")
        c = super().allocate(request, view)
        if how == "numpy":
            return None if c is None else np.int64(c)
        if how == "placement":
            return None if c is None else Placement.single(c, request.demand)
        if how == "none":
            return None
        if how == "outside":
            return 10**6
        if how == "stepwise":
            return self._steps(request, view)
        return c

    def _steps(self, request, view):
        self.log.append(("step", request.id, self.env.now))
        yield self.env.timeout(0)
        yield self.env.timeout(0)
        self.log.append(("decide", request.id, self.env.now))
        return super().allocate(request, view)

    def released(self, request, placement, view):
        self.log.append(("released", request.id, placement.servers.tolist(), view.now,
                         self.env.now))
        if self.echo:
            delay = request.id % 2
            self.env.timeout(delay).callbacks.append(
                lambda _e, rid=request.id: self.log.append(("echo", rid, self.env.now)))


class Rows:
    def __init__(self):
        self.rows: dict = {}

    def __call__(self, kind, cols):
        for k, v in cols.items():
            self.rows.setdefault((kind, k), []).extend(list(v))

    def frame(self, kind):
        return pd.DataFrame({k: v for (t, k), v in self.rows.items() if t == kind})


def run(fused: bool, arrival, duration, demand, config: dict, plan=None, n=3, batch=7,
        echo=True):
    """One run on ``n`` servers of 8 cpu/8 mem; what it gave, decision times left out."""
    sink = Rows()
    alloc = Mixed(plan, echo)
    eng = Engine(star_topology(n), ListSource(arrival, duration, demand, batch=batch), alloc,
                 np.random.default_rng(0), EngineConfig(**config), sink=sink)
    assert eng._fused
    eng._fused = fused
    alloc.env = eng.env
    try:
        out = eng.run()
    except PluginError as e:
        out = {"error": str(e)}
    out.pop("mean_decision_s", None)
    sink.rows.pop(("requests", "decision_s"), None)
    return {"summary": out, "requests": sink.frame("requests"),
            "timeseries": sink.frame("timeseries"), "log": alloc.log,
            "now": eng.env.now, "free": eng.state.free.tolist(),
            "counts": (eng.received, eng.accepted, eng.released)}


def assert_same(a, b):
    assert a["summary"] == b["summary"] or _nan_equal(a["summary"], b["summary"])
    for kind in ("requests", "timeseries"):
        pd.testing.assert_frame_equal(a[kind], b[kind])
    assert a["log"] == b["log"]
    assert (a["now"], a["free"], a["counts"]) == (b["now"], b["free"], b["counts"])


def _nan_equal(x: dict, y: dict) -> bool:
    return x.keys() == y.keys() and all(
        v == y[k] or (v != v and y[k] != y[k]) for k, v in x.items())


def both(*args, **kw):
    fused, general = run(True, *args, **kw), run(False, *args, **kw)
    assert_same(fused, general)
    return fused


def test_ties_between_arrivals_and_departures_follow_simpy():
    """One server of 8: a departure at t=1 comes before the arrival at t=1 (which then
    fits); a request of zero duration at t=2 departs after the next arrival at t=2 (which
    does not fit); two departures at t=4 go in the order they were scheduled."""
    arrival = [0, 1, 2, 2, 3, 3, 5]
    duration = [1, 3, 0, 1, 1, 1, 1]
    demand = [[8, 8], [4, 4], [4, 4], [4, 4], [2, 2], [2, 2], [8, 8]]
    out = both(arrival, duration, demand, {}, n=1)
    assert out["requests"]["accepted"].tolist() == [True, True, True, False, True, True,
                                                    True]
    released = [e[1] for e in out["log"] if e[0] == "released"]
    assert released == [0, 2, 1, 4, 5, 6]


def test_an_arrival_fires_where_simpy_puts_it():
    """SimPy wakes the arrival process at ``now + (t - now)``, which need not be ``t``:
    after an arrival at 0.2, the one at 0.9 is offered at 0.8999999999999999, before a
    departure at exactly 0.9, so it does not fit; the fused loop keeps that time."""
    assert 0.2 + (0.9 - 0.2) < 0.9
    out = both([0.0, 0.2, 0.9], [0.9, 1.0, 1.0], [[8, 8], [0, 0], [8, 8]], {}, n=1)
    assert out["requests"]["accepted"].tolist() == [True, True, False]


@pytest.mark.parametrize("config", [
    {}, {"warmup_requests": 5, "sample_every": 3}, {"warmup_time": 4.0, "sample_every": 1},
    {"sample_interval": 1.0}, {"sample_interval": 2.0, "warmup_requests": 3}])
@pytest.mark.parametrize("plan", [
    {}, {3: "stepwise", 4: "placement", 6: "none", 7: "numpy", 9: "stepwise"},
    {1: "stepwise", 2: "stepwise", 11: "placement"}], ids=["int", "mixed", "steps"])
def test_integer_stream_with_every_kind_of_choice(config, plan):
    """Integer times (ties everywhere), every kind of choice, warm-up and both kinds of
    sampling: the fused loop gives what the general path gives."""
    rng = np.random.default_rng(5)
    n = 40
    arrival = np.sort(rng.integers(0, 12, n))
    duration = rng.integers(0, 4, n)
    demand = rng.integers(0, 6, (n, 2))
    out = both(arrival, duration, demand, config, plan=plan)
    assert out["requests"]["accepted"].sum() > 10


@pytest.mark.parametrize("at", [0, 5, 12])
@pytest.mark.parametrize("bad", ["outside"])
def test_a_bad_choice_mid_run_fails_alike(at, bad):
    """A bad server index, first or mid-run: the same PluginError, at the same request."""
    rng = np.random.default_rng(1)
    arrival = np.sort(rng.integers(0, 6, 20))
    out = both(arrival, rng.integers(0, 3, 20), rng.integers(1, 4, (20, 2)), {},
               plan={at: bad})
    assert "outside" in out["summary"]["error"]
    assert out["counts"][0] == at + 1


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    gaps=st.lists(st.integers(0, 2), min_size=1, max_size=60),
    data=st.data(),
    sample=st.sampled_from([{}, {"sample_every": 1}, {"sample_every": 4},
                            {"sample_interval": 1.0}, {"sample_interval": 3.0}]),
    warm=st.sampled_from([{}, {"warmup_requests": 4}, {"warmup_time": 3.0}]),
    batch=st.integers(1, 9),
    echo=st.booleans(),
)
def test_the_fused_loop_is_the_general_path_on_tied_streams(gaps, data, sample, warm,
                                                            batch, echo):
    """Random streams on integer times (many arrivals, departures and samples at one
    instant), with random choices of every kind: the same records, summary, releases,
    plugin events, final time and state on both paths."""
    n = len(gaps)
    arrival = np.cumsum(gaps)
    duration = data.draw(st.lists(st.integers(0, 4), min_size=n, max_size=n))
    demand = data.draw(st.lists(st.tuples(st.integers(0, 8), st.integers(0, 8)),
                                min_size=n, max_size=n))
    kinds = st.sampled_from(["int", "int", "numpy", "placement", "none", "stepwise"])
    plan = dict(enumerate(data.draw(st.lists(kinds, min_size=n, max_size=n))))
    both(arrival, duration, demand, {**sample, **warm}, plan=plan, batch=batch, echo=echo)
