"""Single-server baselines: random, first fit, best fit. Registered like any plugin."""

from __future__ import annotations

from typing import Literal

import numpy as np

from dcsim.allocators.base import Allocator, Choice
from dcsim.hookspecs import hookimpl
from dcsim.kernels import kernel_choice, kernels_on
from dcsim.model import Request, StateView
from dcsim.model.state import EPS

#: the seconds first_fit's numpy comparison has cost this process more than the compiled
#: scan would have, estimated per request (:meth:`FirstFitAllocator.saving`; process-wide:
#: the loading cost is paid once per process). A list's item, not a class attribute:
#: writing a class attribute at every request invalidates Python's attribute caches for
#: the class (0.37 us a call)
OWED = [0.0]
_ge = np.greater_equal  # first_fit's ufuncs, called with their output array
_and = np.logical_and


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

    #: the compiled scan of two free columns (:mod:`dcsim.allocators.single_kernel`), once
    #: loaded; None: numpy compares every server
    _scan = None
    #: with ``DCSIM_KERNELS=auto``, first_fit loads its compiled scan once the numpy
    #: comparison has cost the process this many seconds more than the scan would have
    #: (``numba`` loads it at once, ``numpy`` never). Loading it costs 0.3-1.0 s and
    #: ~100 MB, even from the cache; :meth:`saving` estimates what it saves a request, so
    #: the scan comes after ~2 x 10^5 requests on 64 servers and after ~3 x 10^4 on 40k
    #: (benchmarks/bench_first_fit_scan.py). The rows are the same either way (the same
    #: comparisons, the same index).
    SCAN_AFTER_S = 0.36
    #: the scan's saving per request: a fixed part (numpy's calls; 64 servers: ~1.8 us in
    #: all) and a part per server (numpy compares every server, the scan stops at the
    #: first fit), measured on this project's 2-core machine
    SAVING_FIXED_S = 1.8e-6
    SAVING_PER_SERVER_S = 0.25e-9

    @classmethod
    def saving(cls, servers: int) -> float:
        """What the compiled scan saves a request on ``servers`` servers (estimated)."""
        return cls.SAVING_FIXED_S + cls.SAVING_PER_SERVER_S * servers

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # the two thresholds as 0-d arrays, rewritten at each call: numpy compares an array
        # with a 0-d array faster than with a Python float (same values, same result)
        self._thresholds = (np.empty(()), np.empty(()))
        # the two columns' masks, written in place (numpy allocates none per call); made
        # for the view's columns (``_cols``) they have the length of
        self._cols: list | None = None
        self._masks = (np.empty(0, dtype=bool), np.empty(0, dtype=bool))
        self._auto = False  # True: count what it costs, load the scan past SCAN_AFTER_S
        self._saving = 0.0  # saving(servers) of the view set up

    def setup(self, view: StateView) -> None:
        if len(view.columns) != 2 or not kernels_on():
            return
        if kernel_choice() == "numba" or OWED[0] >= self.SCAN_AFTER_S:
            self._load_scan(view)
        else:
            self._auto = True
            self._saving = self.saving(len(view.columns[0]))

    def _load_scan(self, view: StateView) -> None:
        from dcsim.allocators.single_kernel import first_fit_two

        cols = view.columns
        first_fit_two(cols[0], cols[1], 0.0, 0.0)  # loaded (or compiled) now, for these
        self._scan = first_fit_two  # (read-only) columns
        self._auto = False

    def allocate(self, request: Request, view: StateView) -> Choice:
        cols = view.columns  # view.fits, inlined: this runs once per request
        if len(cols) != 2 or view.server_up is not None:
            ok = feasible_servers(request, view)
            i = int(ok.argmax())
            return i if ok[i] else None
        d0, d1 = request.demand.tolist()
        if self._auto:
            OWED[0] += self._saving
            if OWED[0] >= self.SCAN_AFTER_S:
                self._load_scan(view)
        if self._scan is not None:  # stops at the first fit
            i = self._scan(cols[0], cols[1], d0 - EPS, d1 - EPS)
            return i if i >= 0 else None
        t0, t1 = self._thresholds
        t0[()] = d0 - EPS
        t1[()] = d1 - EPS
        if cols is not self._cols:  # another view: masks of its length
            self._cols = cols
            self._masks = (np.empty(len(cols[0]), dtype=bool),
                           np.empty(len(cols[0]), dtype=bool))
        ok, ok1 = self._masks
        _ge(cols[0], t0, ok)  # ok = cols[0] >= t0, in place
        _ge(cols[1], t1, ok1)
        _and(ok, ok1, ok)
        i = ok.tobytes().find(1)  # the first True (a bool is the byte 0 or 1), or -1
        return i if i >= 0 else None


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
