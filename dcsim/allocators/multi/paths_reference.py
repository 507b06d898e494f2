"""The weighted k shortest paths as dcsim found them with networkx, kept as the reference
that :func:`dcsim.allocators.multi.paths.weighted_k_paths` (Python and compiled) is tested
and benchmarked against (``tests/allocators/multi/test_weighted_paths.py``,
``benchmarks/bench_weighted_paths.py``); no allocator calls it."""

from __future__ import annotations

from itertools import pairwise
from math import isfinite

import networkx as nx
import numpy as np

from dcsim.model.paths import PathService


def networkx_k_paths(paths: PathService, a: int, b: int, k: int, weight,
                     kernel: bool = False) -> list[np.ndarray]:
    """``networkx.shortest_simple_paths`` between servers ``a`` and ``b`` by link ``weight``
    (an array, or a function of the link index; not finite: unusable), one-link servers
    other than the two hidden, as link-index arrays; ``kernel`` is ignored (the signature
    of ``weighted_k_paths``)."""
    if a == b or paths.is_flat:
        return [np.zeros(0, dtype=np.int64)]
    topo = paths.topology
    li = topo.link_indices()
    w = weight.tolist().__getitem__ if isinstance(weight, np.ndarray) else weight
    lo, hi = min(a, b), max(a, b)
    src, dst = paths.nodes[paths.server_node[lo]], paths.nodes[paths.server_node[hi]]
    leaves = paths.leaf_servers()
    if src in leaves and dst in leaves:
        hub = next(iter(topo.graph.adj[src]))
        if hub in topo.graph.adj[dst]:
            up, down = li[(src, hub)], li[(hub, dst)]
            return ([np.array([up, down], dtype=np.int64)]
                    if isfinite(w(up)) and isfinite(w(down)) else [])

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
