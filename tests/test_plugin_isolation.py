"""What a plugin is given it cannot change: the request it is asked to place (its demand,
duration and attributes are read-only to it), while the workload keeps its own arrays
writable."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from dcsim.allocators.single import FirstFitAllocator
from dcsim.modes.loss import Engine
from tests.helpers.sources import ListSource
from tests.helpers.trees import star_topology


def _write_demand(request):
    request.demand[:] = 0


def _divide_demand(request):
    d = request.demand
    d /= 2


def _shorten(request):
    request.duration = 0.0


def _drop_attr(request):
    request.attrs["N"] = 0


class Hostile(FirstFitAllocator):
    """First fit that first tries to change the request it was given."""

    name = "hostile_test"

    def __init__(self, action):
        super().__init__()
        self.action = action
        self.refused = 0

    def allocate(self, request, view):
        try:
            self.action(request)
        except (ValueError, TypeError, dataclasses.FrozenInstanceError):
            self.refused += 1
        return super().allocate(request, view)


@pytest.mark.parametrize("action", [_write_demand, _divide_demand, _shorten, _drop_attr])
def test_a_plugin_cannot_change_the_request_it_is_given(action):
    """Writing the demand (in place or through an alias), reassigning a field or editing
    the attributes raises, and the run's records are what the workload asked for."""
    topo = star_topology(n=2, cpu=8, mem=8)
    src = ListSource([1, 2, 3], [5, 5, 5], [[3, 1], [2, 2], [4, 1]], attrs={"N": [1, 2, 3]})
    alloc = Hostile(action)
    rows: dict[str, list] = {}

    def sink(kind, cols):
        if kind == "requests":
            for k, v in cols.items():
                rows.setdefault(k, []).extend(v.tolist() if isinstance(v, np.ndarray) else v)

    Engine(topo, src, alloc, np.random.default_rng(0), None, sink).run()
    assert alloc.refused == 3
    assert rows["cpu"] == [3, 2, 4] and rows["mem"] == [1, 2, 1]
    assert rows["N"] == [1, 2, 3]
    assert [e - s for s, e in zip(rows["arrival"], rows["end"], strict=True)] == [5, 5, 5]


def test_the_workload_keeps_its_own_arrays_writable():
    """Only the engine's view is read-only: the source's arrays are untouched."""
    topo = star_topology(n=1, cpu=8, mem=8)
    src = ListSource([1], [1], [[1, 1]], batch=1)
    Engine(topo, src, FirstFitAllocator(), np.random.default_rng(0)).run()
    assert src.demand.flags.writeable
