"""The engine's per-request fast paths (issue #19) compute exactly what the general code
computes: the Meter's methods unrolled for two resources, and first_fit's inlined check."""

from __future__ import annotations

import importlib.util

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dcsim.allocators.single import FirstFitAllocator, feasible_servers
from dcsim.model import ClusterState, Request, StateView
from dcsim.model.state import EPS
from dcsim.model.topologies import build_topology
from dcsim.modes.loss.metrics import Meter

FLAT = {"kind": "flat", "servers": 6, "server": {"cpu": 8.0, "mem": 16.0}}


def _general(meter: Meter) -> Meter:
    """The same meter without its unrolled closures (the class's loops)."""
    for name in ("held", "departed", "decision_sample"):
        meter.__dict__.pop(name, None)
    return meter


@settings(max_examples=40, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from(["held", "departed", "sample", "open"]),
                              st.floats(0, 8, allow_nan=False),
                              st.floats(0, 16, allow_nan=False),
                              st.floats(0, 5, allow_nan=False)), max_size=40))
def test_unrolled_meter_is_the_general_meter(ops):
    topo = build_topology(FLAT)
    fast, slow = Meter(topo), _general(Meter(topo))
    assert "held" in fast.__dict__ and "held" not in slow.__dict__
    live, rid, now = [], 0, 0.0
    for op, a, b, dt in ops:
        now += dt
        for m in (fast, slow):
            if op == "held":
                m.held(rid, now, now + dt, [a, b])
            elif op == "departed" and live:
                m.departed(live[0])
            elif op == "sample":
                m.decision_sample()
            elif op == "open" and not m.open:
                m.open_window(now)
        if op == "held":
            live.append(rid)
            rid += 1
        elif op == "departed" and live:
            live.pop(0)
    assert fast.used == slow.used and fast._area == slow._area
    assert fast._active_area == slow._active_area and fast.active == slow.active
    assert [list(x) for x in fast._decision_util] == [list(x) for x in slow._decision_util]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), down=st.booleans())
def test_first_fit_inline_check_is_feasible_servers(seed, down):
    topo = build_topology(FLAT)
    state = ClusterState(topo)
    rng = np.random.default_rng(seed)
    # values at the thresholds (demand - EPS) too, and NaN (fits nothing)
    state.free[:] = rng.choice([0.0, 1.0, 2.0, 2.0 - 1e-10, 4.0, 8.0, np.nan, 1.0 - EPS,
                                2.0 - EPS, 3.0 - EPS, 3.0 - 2 * EPS], state.free.shape)
    view = StateView(state)
    if down:
        view.server_up = rng.random(topo.n_servers) < 0.7
    ff = FirstFitAllocator()
    if importlib.util.find_spec("numba") is not None:  # the fast extra: the compiled scan
        ff._load_scan(view)
    numpy_ff = FirstFitAllocator()  # never set up: numpy's compares
    assert (ff._scan is not None) == (importlib.util.find_spec("numba") is not None)
    for _ in range(10):
        req = Request(0, 0.0, 1.0, rng.choice([0.0, 1.0, 2.0, 3.0], 2), 0.0, {})
        ok = feasible_servers(req, view)
        want = int(ok.argmax()) if ok.any() else None
        got = ff.allocate(req, view)
        assert got == want and type(got) is type(want)
        got = numpy_ff.allocate(req, view)
        assert got == want and type(got) is type(want)
    # the numpy path's masks follow the view it is given (another length here)
    three = ClusterState(build_topology({**FLAT, "servers": 3}))
    three.free[:] = [[0.0, 0.0], [8.0, 16.0], [8.0, 16.0]]
    req = Request(1, 0.0, 1.0, np.array([1.0, 1.0]), 0.0, {})
    assert numpy_ff.allocate(req, StateView(three)) == 1


_edge = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                  st.sampled_from([0.0, 1.0, 1.0 + 1e-9, 1.0 + 3e-9, 1e-9, -1e-9, 2e-9]))


@settings(max_examples=300, deadline=None)
@given(pairs=st.lists(st.tuples(_edge, _edge), min_size=1, max_size=4),
       nudge=st.sampled_from([0.0, 1e-10, 9e-10, 1e-9, 2e-9, -2e-9]))
def test_placement_total_check_is_allclose(pairs, nudge):
    """The engine's check that a placement totals the demand (Python floats) decides
    exactly as np.allclose(rtol=1e-9, atol=1e-9), infinities and NaN included."""
    from dcsim.modes.loss.engine import _close

    total = np.array([a for a, _ in pairs])
    demand = np.array([a + nudge if np.isfinite(a) else b for a, b in pairs])
    for t, d in ((total, demand), (total, np.array([b for _, b in pairs]))):
        assert _close(t, d) == np.allclose(t, d, rtol=1e-9, atol=1e-9)


@settings(max_examples=40, deadline=None)
@given(ops=st.lists(st.tuples(st.booleans(), st.integers(0, 5),
                              st.floats(0, 9, allow_nan=False),
                              st.floats(0, 17, allow_nan=False)), max_size=60))
def test_unrolled_server_ops_are_the_general_methods(ops):
    """``ClusterState.server_ops`` with two resources (through memoryviews of the free
    columns) reserves, refuses, clamps and releases exactly as ``take_one``/``give_one``,
    and logs the same servers."""
    from dcsim.model.state import ServerChanges

    topo = build_topology(FLAT)
    fast, slow = ClusterState(topo), ClusterState(topo)
    take, give = fast.server_ops()
    assert take.__closure__ is not None  # the unrolled pair, not the methods
    logs = ServerChanges(fast), ServerChanges(slow)
    for is_take, s, a0, a1 in ops:
        amount = [a0, a1]
        if is_take:
            assert take(s, amount) == slow.take_one(s, amount)
        else:
            give(s, amount)
            slow.give_one(s, amount)
        assert fast.free.tobytes() == slow.free.tobytes()
    assert np.array_equal(logs[0].drain(), logs[1].drain())


def test_new_request_is_the_dataclass_request():
    """``new_request`` builds what ``Request(...)`` builds: the same class, fields and
    equality, frozen and without a ``__dict__``."""
    import dataclasses

    import pytest

    from dcsim.model.request import new_request

    demand = np.array([1.0, 2.0])
    attrs = {"N": 3}
    fast = new_request(7, 0.5, 2.0, demand, 1.5, attrs)
    slow = Request(7, 0.5, 2.0, demand, 1.5, attrs)
    assert type(fast) is Request and fast == slow and repr(fast) == repr(slow)
    assert dataclasses.astuple(fast)[:3] == (7, 0.5, 2.0)
    assert not hasattr(fast, "__dict__")
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.id = 8
