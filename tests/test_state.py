"""ClusterState: reserve/release validate, never leave [0, capacity], and copy() forks."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dcsim.errors import StateError
from dcsim.model import ClusterState, Placement, StateView
from tests.helpers.trees import star_topology


def test_reserve_and_release_round_trip(star):
    """Reserving then releasing a placement restores the exact free capacity."""
    s = ClusterState(star)
    p = Placement.build([0, 3], [[2, 1], [1, 4]], links=[0, 3], bandwidth=[5, 5])
    s.reserve(p)
    assert s.free[0].tolist() == [6, 7] and s.free[3].tolist() == [7, 4]
    assert s.link_free[[0, 3]].tolist() == [5, 5]
    s.release(p)
    assert np.array_equal(s.free, star.server_capacity)
    assert np.array_equal(s.link_free, star.link_capacity)


def test_over_reservation_is_refused_and_changes_nothing(star):
    """A placement that does not fit raises StateError and leaves the state untouched."""
    s = ClusterState(star)
    before = s.free.copy()
    with pytest.raises(StateError, match="not enough free resources"):
        s.reserve(Placement.build([1, 2], [[1, 1], [9, 0]]))
    assert np.array_equal(s.free, before)
    with pytest.raises(StateError, match="bandwidth"):
        s.reserve(Placement.build([1], [[1, 1]], links=[0], bandwidth=[11]))
    assert np.array_equal(s.link_free, star.link_capacity)


def test_double_release_is_detected(star):
    """Releasing the same placement twice would exceed capacity: refused."""
    s = ClusterState(star)
    p = Placement.single(2, np.array([3.0, 3.0]))
    s.reserve(p)
    s.release(p)
    with pytest.raises(StateError, match="released twice"):
        s.release(p)


@pytest.mark.parametrize(
    "placement, reason",
    [
        (Placement.build([99], [[1, 1]]), "out of range"),
        (Placement.build([1, 1], [[1, 1], [1, 1]]), "appears twice"),
        (Placement.build([1], [[-1, 1]]), "negative"),
        (Placement.build([1], [[1, 1]], links=[0, 0], bandwidth=[1, 1]), "appears twice"),
    ],
)
def test_malformed_placements_are_explained(star, placement, reason):
    """check() names what is wrong with a malformed placement."""
    assert reason in ClusterState(star).check(placement)


def test_copy_is_independent(star):
    """A fork can be changed without touching the original, and vice versa."""
    s = ClusterState(star)
    f = s.copy()
    f.reserve(Placement.single(0, np.array([8.0, 8.0])))
    assert s.free[0].tolist() == [8, 8] and f.free[0].tolist() == [0, 0]


def test_view_is_read_only_and_live(star):
    """Allocators cannot write through a view, and the view follows the live state."""
    s = ClusterState(star)
    v = StateView(s)
    with pytest.raises(ValueError):
        v.free[0, 0] = 0
    s.reserve(Placement.single(1, np.array([2.0, 0.0])))
    assert v.free[1, 0] == 6
    fork = v.fork()
    fork.reserve(Placement.single(1, np.array([6.0, 0.0])))
    assert v.free[1, 0] == 6


ops = st.lists(
    st.tuples(
        st.booleans(),
        st.lists(st.integers(0, 5), min_size=1, max_size=3, unique=True),
        st.floats(0, 6, allow_nan=False),
        st.lists(st.integers(0, 5), max_size=3, unique=True),
        st.floats(0, 8, allow_nan=False),
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(ops)
def test_random_operation_sequences_keep_the_invariant(seq):
    """Whatever is attempted, 0 <= free <= capacity and free + held = capacity."""
    topo = star_topology()
    s = ClusterState(topo)
    held: list[Placement] = []
    for is_release, servers, amount, links, bw in seq:
        if is_release and held:
            s.release(held.pop(0))
        else:
            amounts = [[amount, amount / 2]] * len(servers)
            p = Placement.build(servers, amounts, links, [bw] * len(links))
            if s.check(p) is None:
                s.reserve(p)
                held.append(p)
            else:
                with pytest.raises(StateError):
                    s.reserve(p)
        assert (s.free >= 0).all() and (s.free <= topo.server_capacity).all()
        assert (s.link_free >= 0).all() and (s.link_free <= topo.link_capacity).all()
        used = np.zeros_like(s.free)
        lused = np.zeros_like(s.link_free)
        for p in held:
            used[p.servers] += p.amounts
            lused[p.links] += p.bandwidth
        np.testing.assert_allclose(s.free + used, topo.server_capacity, atol=1e-9)
        np.testing.assert_allclose(s.link_free + lused, topo.link_capacity, atol=1e-9)
