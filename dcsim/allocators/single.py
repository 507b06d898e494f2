"""Single-server baselines: random, first fit, best fit. Registered like any plugin."""

from __future__ import annotations

from typing import Literal

import numpy as np

from dcsim.allocators.base import Allocator, Choice
from dcsim.allocators.jit import kernels_on
from dcsim.hookspecs import hookimpl
from dcsim.model import Request, StateView
from dcsim.model.state import EPS


def feasible_servers(request: Request, view: StateView) -> np.ndarray:
    """Boolean mask of servers whose free resources cover the whole demand."""
    return view.fits(request.demand)


class RandomAllocator(Allocator):
    """Uniformly random among the servers that can hold the whole request."""

    name = "random"
    description = "uniform over servers that fit the request"

    def allocate(self, request: Request, view: StateView) -> Choice:
        idx = np.flatnonzero(feasible_servers(request, view))
        if idx.size == 0:
            return None
        return int(idx[self.rng.integers(idx.size)])


class FirstFitAllocator(Allocator):
    """The lowest-indexed server that can hold the whole request."""

    name = "first_fit"
    description = "lowest-indexed server that fits the request"

    #: the compiled scan of two free columns (:mod:`dcsim.allocators.single_kernel`), set by
    #: :meth:`setup` when the kernels are on; None: numpy compares every server
    _scan = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # the two thresholds as 0-d arrays, rewritten at each call: numpy compares an array
        # with a 0-d array faster than with a Python float (same values, same result)
        self._thresholds = (np.empty(()), np.empty(()))

    def setup(self, view: StateView) -> None:
        cols = view._columns
        if len(cols) == 2 and kernels_on():
            from dcsim.allocators.single_kernel import first_fit_two

            first_fit_two(cols[0], cols[1], 0.0, 0.0)  # loaded (or compiled) now, for these
            self._scan = first_fit_two  # (read-only) columns

    def allocate(self, request: Request, view: StateView) -> Choice:
        cols = view._columns  # view.fits, inlined: this runs once per request
        if len(cols) != 2 or view.server_up is not None:
            ok = feasible_servers(request, view)
            i = int(ok.argmax())
            return i if ok[i] else None
        d0, d1 = request.demand.tolist()
        if self._scan is not None:  # stops at the first fit
            i = self._scan(cols[0], cols[1], d0 - EPS, d1 - EPS)
            return i if i >= 0 else None
        t0, t1 = self._thresholds
        t0[()] = d0 - EPS
        t1[()] = d1 - EPS
        ok = cols[0] >= t0
        ok &= cols[1] >= t1
        i = int(ok.argmax())
        return i if ok.item(i) else None


class BestFitAllocator(Allocator):
    """The fitting server left with the least free capacity (ties: lowest index).

    Leftover capacity is normalised per resource by server capacity and combined by
    ``score``: ``sum`` (default) or ``max`` over resources.
    """

    name = "best_fit"
    description = "fitting server with the least normalised leftover capacity"

    class Options(Allocator.Options):
        score: Literal["sum", "max"] = "sum"

    def allocate(self, request: Request, view: StateView) -> Choice:
        ok = view.fits(request.demand)
        if not ok.any():
            return None
        norm = (view.free - request.demand) * view.inv_capacity
        score = norm.sum(axis=1) if self.options.score == "sum" else norm.max(axis=1)
        score[~ok] = np.inf
        return int(score.argmin())


BUILTIN_ALLOCATORS = (RandomAllocator, FirstFitAllocator, BestFitAllocator)


@hookimpl
def register_allocators(register):
    for cls in BUILTIN_ALLOCATORS:
        register(cls)
