"""The Nara step's reusable per-request arrays (:class:`PartialBuffers`, issue #37).

An allocator's requests take ``chosen`` and ``reserved`` from one pool and zero what they set
when decided, instead of a fresh cluster-sized array each. Checked here: every array taken
from the pool is all zero; the pool is really reused; every request row is the one fresh
arrays give, for each allocator, both reservations, requests that fail after reserving
paths included; a request whose chooser raised keeps its arrays and the next one takes
fresh ones.
"""

from __future__ import annotations

import numpy as np
import pytest

from dcsim.allocators.multi.baselines import NARA_ALLOCATORS
from dcsim.allocators.multi.step import Partial, PartialBuffers
from dcsim.model import ClusterState, StateView
from dcsim.model.topologies import build_topology
from tests.helpers.engine import run
from tests.helpers.multi import make, request
from tests.helpers.sources import ListSource


class CheckedBuffers(PartialBuffers):
    """A pool that checks each array it hands out is all zero, and counts reuses."""

    __slots__ = ("reused",)

    def __init__(self):
        super().__init__()
        self.reused = 0

    def chosen(self, n):
        self.reused += self._chosen is not None and self._chosen.shape[0] == n
        a = super().chosen(n)
        assert not a.any()
        return a

    def reserved(self, n):
        self.reused += self._reserved is not None and self._reserved.shape[0] == n
        a = super().reserved(n)
        assert not a.any()
        return a


class FreshBuffers(PartialBuffers):
    """No pool: fresh arrays every time (as before the pool)."""

    def give_back(self, chosen, reserved):
        pass


def with_buffers(cls, buffers_cls):
    def allocate(self, req, view):
        if getattr(self, "_partial_buffers", None) is None:
            self._partial_buffers = buffers_cls()
        return cls.allocate(self, req, view)
    return type(cls.__name__, (cls,), {"allocate": allocate})


def source(n: int, seed: int) -> ListSource:
    rng = np.random.default_rng(seed)
    return ListSource(np.sort(rng.uniform(0, 40, n)), rng.uniform(1, 30, n),
                      rng.integers(1, 25, (n, 2)).astype(float),
                      rng.choice([0.0, 0.3, 1.0, 3.0], n))


@pytest.mark.parametrize("reservation", ["union", "per_pair_channel"])
@pytest.mark.parametrize("cls", NARA_ALLOCATORS, ids=lambda c: c.name)
def test_rows_with_the_pool_are_those_of_fresh_arrays(cls, reservation):
    topo = build_topology({"kind": "fabric", "preset": "alpha"})
    rows = {}
    for kind in (CheckedBuffers, FreshBuffers):
        sub = with_buffers(cls, kind)
        alloc = sub(sub.Options(reservation=reservation))
        _, summary, rows[kind] = run(topo, source(300, 5), alloc)
        rows[kind].pop("decision_s")  # (a timing)
        if kind is CheckedBuffers:
            assert alloc._partial_buffers.reused > 200
            assert 0 < summary["accepted"] < summary["received"]
    assert repr(rows[CheckedBuffers]) == repr(rows[FreshBuffers])  # (NaN where rejected)


@pytest.mark.parametrize("reservation", ["union", "per_pair_channel"])
def test_release_zeros_what_the_request_set(reservation):
    topo = build_topology({"kind": "fabric", "preset": "alpha"})
    view = StateView(ClusterState(topo))
    pool = PartialBuffers()
    part = Partial(request([12, 12], 0.5), view, reservation, True, buffers=pool)
    chosen, reserved = part.chosen, part.reserved
    part.accept_path(np.array([3, 7, 9]))
    part.accept_path(np.array([7, 20]))
    part.add(0)
    part.add(5)
    assert chosen.any() and reserved.any()
    part.release()
    assert not chosen.any() and not reserved.any()
    part.release()  # a second release does nothing
    again = Partial(request([1, 1], 0.5), view, reservation, True, buffers=pool)
    assert again.chosen is chosen and again.reserved is reserved
    other = Partial(request([1, 1], 0.5), view, reservation, True, buffers=pool)
    assert other.chosen is not chosen and other.reserved is not reserved  # the pool is empty


def test_a_request_whose_chooser_raised_keeps_its_arrays():
    topo = build_topology({"kind": "fabric", "preset": "alpha"})
    view = StateView(ClusterState(topo))
    cls = NARA_ALLOCATORS[0]
    alloc = make(cls, topo, view)
    alloc.allocate(request([12, 12], 0.5), view)
    pool = alloc._partial_buffers
    kept = pool._chosen
    assert kept is not None and not kept.any()
    real = alloc.choose
    calls = []

    def failing(partial, v):
        calls.append(partial)
        if len(calls) == 2:
            raise RuntimeError("chooser failed")
        return real(partial, v)

    alloc.choose = failing
    with pytest.raises(RuntimeError):
        alloc.allocate(request([12, 12], 0.5), view)
    assert calls[0].chosen is kept and kept.any()  # not given back, not zeroed
    assert pool._chosen is None
    alloc.choose = real
    placed = alloc.allocate(request([12, 12], 0.5), view)
    fresh = make(cls, topo, view).allocate(request([12, 12], 0.5), view)
    assert placed.servers.tolist() == fresh.servers.tolist()
    assert pool._chosen is not None and pool._chosen is not kept and not pool._chosen.any()
