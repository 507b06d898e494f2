"""Multi-server allocators in a test: a request, a set-up allocator, the Nara authors' options."""

from __future__ import annotations

import numpy as np

from dcsim.allocators.multi.baselines import NALB, NULB, Tetris
from dcsim.model import Request


def request(demand, bandwidth=0.0, rid=0) -> Request:
    return Request(rid, 0.0, 1.0, np.asarray(demand, dtype=float), float(bandwidth))


def make(cls, topo, view, seed=0, **options):
    alloc = cls(cls.Options(**options), rng=np.random.default_rng(seed), topology=topo)
    alloc.setup(view)
    return alloc


_SCORE_OPTIONS = {"demand": ["remaining", "full"],
                  "bandwidth_term": ["none", "own_link", "authors_misaligned", "own_raw",
                                     "authors_raw"],
                  "ties": ["index", "name"]}
AUTHOR_OPTIONS = {
    Tetris: {**_SCORE_OPTIONS, "anchor": ["first", "previous", "carried"]},
    NALB: {**_SCORE_OPTIONS, "anchor": ["none", "carried"], "search": ["bfs", "authors"],
           "path_weight": ["inverse_free", "free", "hops"]},
}
AUTHOR_OPTIONS[NULB] = AUTHOR_OPTIONS[NALB]
