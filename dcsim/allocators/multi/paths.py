"""Candidate paths ranked by link weight, for the allocators of :mod:`dcsim.allocators.multi.step`.

:func:`weighted_k_paths` is networkx's k shortest simple paths by a per-link weight that
follows the state (so nothing is cached); :func:`link_weights` and :func:`link_weight` are
the weights an allocator's ``path_weight`` option names.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
from math import inf, isfinite
from typing import Literal

import networkx as nx
import numpy as np

from dcsim.model.paths import PathService


def weighted_k_paths(paths: PathService, a: int, b: int, k: int,
                     weight: np.ndarray | Callable[[int], float]) -> list[np.ndarray]:
    """Up to ``k`` shortest simple paths between servers ``a`` and ``b`` by link ``weight``.

    ``weight`` has one entry per link, or is a function of the link index (computing only
    the links the search visits); a NaN or infinite weight removes the link. Not cached
    (the weights follow the state). Paths of equal weight come in a fixed, deterministic
    order.
    """
    if a == b or paths.is_flat:
        return [np.zeros(0, dtype=np.int64)]
    topo = paths.topology
    li = topo.link_indices()
    w = weight.tolist().__getitem__ if isinstance(weight, np.ndarray) else weight
    lo, hi = min(a, b), max(a, b)
    src = paths.nodes[paths.server_node[lo]]
    dst = paths.nodes[paths.server_node[hi]]
    # A server with one link (every server of a Fabric) can only end a simple path, never
    # lie inside one: hiding the other such servers prunes the search to the switches
    # without changing any path or its weight. Among paths of equal weight the order may
    # differ from networkx's on the full graph (it breaks ties by push count); it is
    # deterministic.
    leaves = paths.leaf_servers()
    if src in leaves and dst in leaves:
        hub = next(iter(topo.graph.adj[src]))
        if hub in topo.graph.adj[dst]:
            # two servers whose one link goes to the same switch (a rack's servers): the
            # only simple path between them is through it, if both links are usable
            up, down = li[(src, hub)], li[(hub, dst)]
            if isfinite(w(up)) and isfinite(w(down)):
                return [np.array([up, down], dtype=np.int64)]
            return []

    def edge_weight(u, v, _d):
        if (v in leaves and v != src and v != dst) or (u in leaves and u != src and u != dst):
            return None
        x = w(li[(u, v)])
        return x if isfinite(x) else None
    out = []
    try:
        for p in nx.shortest_simple_paths(topo.graph, src, dst, weight=edge_weight):
            out.append(np.fromiter((li[e] for e in pairwise(p)), dtype=np.int64,
                                   count=len(p) - 1))
            if len(out) == k:
                break
    except nx.NetworkXNoPath:
        pass
    return out


#: How multi-server allocators rank candidate paths (see :meth:`MultiServerAllocator.paths`).
PathWeight = Literal["hops", "inverse_free", "free"]


def link_weights(kind: PathWeight, link_free: np.ndarray, link_capacity: np.ndarray
                 ) -> np.ndarray:
    """Per-link weights for :func:`weighted_k_paths`.

    ``inverse_free``: capacity / free, 1 on an empty link (so on an idle network the paths
    are the hop-count ones) and growing as the link fills; a link with nothing free is
    skipped. ``free``: the free bandwidth itself, the NALB authors' weight, which makes the
    *fullest* links the shortest.
    """
    if kind == "free":
        return np.maximum(np.asarray(link_free, dtype=np.float64), 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.asarray(link_capacity, dtype=np.float64) / link_free
    w[~(link_free > 0)] = np.inf
    return w


def link_weight(kind: PathWeight, link_free: np.ndarray, link_capacity: np.ndarray
                ) -> Callable[[int], float]:
    """:func:`link_weights` as a function of one link index (the same floats), for a search
    that visits a few links of a large network."""
    free_at, cap_at = link_free.item, link_capacity.item
    if kind == "free":
        def weight(i: int) -> float:
            x = free_at(i)
            return x if x > 0.0 else 0.0
    else:
        def weight(i: int) -> float:
            x = free_at(i)
            return cap_at(i) / x if x > 0.0 else inf
    return weight
