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


# ---------------------------------------------------------------- the compiled loop
def run_plain(mode: str, arrival, duration, demand, config: dict, n=3, batch=7):
    """One run of the built-in first_fit, by ``mode``: ``general`` (SimPy runs every
    event), ``fused`` (the fused loop in Python) or ``compiled`` (the kernel,
    dcsim.modes.loss.compiled_loop); what it gave, decision times left out."""
    sink = Rows()
    eng = Engine(star_topology(n), ListSource(arrival, duration, demand, batch=batch),
                 FirstFitAllocator(), np.random.default_rng(0), EngineConfig(**config),
                 sink=sink)
    assert eng._fused
    if mode == "general":
        eng._fused = False
    if mode == "compiled":
        assert eng._compiled is not None and eng._compiled.ready()
    else:
        eng._compiled = None
    try:
        out = eng.run()
    except PluginError as e:
        out = {"error": str(e)}
    out.pop("mean_decision_s", None)
    sink.rows.pop(("requests", "decision_s"), None)
    return {"summary": out, "requests": sink.frame("requests"),
            "timeseries": sink.frame("timeseries"), "log": [],
            "now": eng.env.now, "free": eng.state.free.tolist(),
            "counts": (eng.received, eng.accepted, eng.released),
            "util": {k: v.tolist() for k, v in eng.meter.per_request_util().items()}}


@pytest.fixture
def compiled(monkeypatch):
    """The compiled loop loaded at once (``DCSIM_KERNELS=numba``), calls counted."""
    pytest.importorskip("numba")
    from dcsim.modes.loss import compiled_loop

    monkeypatch.setenv("DCSIM_KERNELS", "numba")
    calls: list = []
    real = compiled_loop.CompiledLoop.run

    def counted(self, **kw):
        out = real(self, **kw)
        calls.append(None if out is None else out[0])
        return out

    monkeypatch.setattr(compiled_loop.CompiledLoop, "run", counted)
    return calls


def test_the_compiled_loop_runs_the_tied_example_as_simpy(compiled):
    """The ties of the first test (a departure before an arrival at one instant, a
    zero-duration request departing after the next arrival at its instant): the kernel
    ran them, and gave the general path's rows."""
    arrival = [0, 1, 2, 2, 3, 3, 5]
    duration = [1, 3, 0, 1, 1, 1, 1]
    demand = [[8, 8], [4, 4], [4, 4], [4, 4], [2, 2], [2, 2], [8, 8]]
    for batch in (1, 3, 7):
        a = run_plain("compiled", arrival, duration, demand, {"sample_every": 0}, n=1,
                      batch=batch)
        assert_same(a, run_plain("general", arrival, duration, demand,
                                 {"sample_every": 0}, n=1, batch=batch))
        assert a["requests"]["accepted"].tolist() == [True, True, True, False, True, True,
                                                      True]
    assert compiled and all(why is not None for why in compiled)


def test_the_compiled_loop_keeps_simpys_clock(compiled):
    """``now + (t - now)``: the arrival at 0.9 is offered at 0.8999999999999999, before the
    departure at 0.9, in the kernel as in SimPy."""
    args = ([0.0, 0.2, 0.9], [0.9, 1.0, 1.0], [[8, 8], [0, 0], [8, 8]], {})
    a = run_plain("compiled", *args, n=1)
    assert_same(a, run_plain("general", *args, n=1))
    assert a["requests"]["accepted"].tolist() == [True, True, False]
    assert compiled


def test_the_compiled_loop_hands_over_to_simpy_when_other_events_are_due(compiled):
    """Periodic samples are SimPy events of their own: the kernel leaves such a batch to
    the fused loop (run returns None), with the same rows."""
    rng = np.random.default_rng(2)
    arrival = np.sort(rng.integers(0, 12, 30))
    args = (arrival, rng.integers(0, 4, 30), rng.integers(0, 6, (30, 2)),
            {"sample_interval": 1.0})
    assert_same(run_plain("compiled", *args), run_plain("general", *args))
    assert compiled and all(why is None for why in compiled)


@settings(max_examples=80, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(
    gaps=st.lists(st.sampled_from([0.0, 0.0, 0.1, 0.2, 0.5, 1.0, 2.0]), min_size=1,
                  max_size=80),
    data=st.data(),
    sample=st.sampled_from([{"sample_every": 0}, {}, {"sample_every": 1},
                            {"sample_every": 4}]),
    warm=st.sampled_from([{}, {"warmup_requests": 4}, {"warmup_time": 3.0}]),
    batch=st.integers(1, 12),
    servers=st.integers(1, 5),
)
def test_the_compiled_loop_is_the_general_path_on_random_streams(compiled, gaps, data,
                                                                 sample, warm, batch,
                                                                 servers):
    """Random streams with ties (equal arrival times, durations that end on arrivals,
    zero durations; times that sum to inexact floats), random demands, servers, batch
    sizes, warm-up and per-request samples: the compiled loop gives the general path's
    and the fused loop's rows, summary, per-request samples, final time, state and
    counts."""
    n = len(gaps)
    arrival = np.cumsum(gaps)
    duration = data.draw(st.lists(st.sampled_from([0.0, 0.1, 0.3, 1.0, 1.5, 2.0, 4.0]),
                                  min_size=n, max_size=n))
    demand = data.draw(st.lists(st.tuples(st.integers(0, 8), st.integers(0, 8)),
                                min_size=n, max_size=n))
    config = {**sample, **warm}
    args = (arrival, duration, demand, config)
    general = run_plain("general", *args, n=servers, batch=batch)
    assert_same(run_plain("compiled", *args, n=servers, batch=batch), general)
    assert_same(run_plain("fused", *args, n=servers, batch=batch), general)
    assert run_plain("compiled", *args, n=servers, batch=batch)["util"] == general["util"]


def test_small_runs_do_not_load_the_kernel(monkeypatch):
    """With ``DCSIM_KERNELS=auto`` the kernel is loaded only once the fused loop has cost
    more than loading it: a small run leaves it unloaded (and owes its requests)."""
    from dcsim.modes.loss import compiled_loop

    monkeypatch.setenv("DCSIM_KERNELS", "auto")
    monkeypatch.setattr(compiled_loop, "OWED", [0.0])
    eng = Engine(star_topology(3), ListSource([0, 1, 2], [1, 1, 1], [[1, 1]] * 3),
                 FirstFitAllocator(), np.random.default_rng(0), EngineConfig())
    eng.run()
    if eng._compiled is not None:  # numba installed
        assert eng._compiled._k is None
        assert compiled_loop.OWED[0] == pytest.approx(3 * compiled_loop.SAVING_PER_REQUEST_S)


def test_without_the_kernels_the_fused_loop_runs(monkeypatch):
    """``DCSIM_KERNELS=numpy``: no compiled loop (the Python fused loop, the same rows)."""
    monkeypatch.setenv("DCSIM_KERNELS", "numpy")
    eng = Engine(star_topology(3), ListSource([0, 1], [1, 1], [[1, 1]] * 2),
                 FirstFitAllocator(), np.random.default_rng(0), EngineConfig())
    assert eng._fused and eng._compiled is None
    assert eng.run()["accepted"] == 2
