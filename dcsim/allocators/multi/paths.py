"""Candidate paths ranked by link weight, for the allocators of :mod:`dcsim.allocators.multi.step`.

:func:`weighted_k_paths` is networkx's k shortest simple paths by a per-link weight that
follows the state (so nothing is cached), ported to node indices; :func:`link_weights` and
:func:`link_weight` are the weights an allocator's ``path_weight`` option names.
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import heappop, heappush
from itertools import count, pairwise
from math import inf, isfinite
from typing import Literal

import numpy as np

from dcsim.model.paths import PathService


def weighted_k_paths(paths: PathService, a: int, b: int, k: int,
                     weight: np.ndarray | Callable[[int], float], kernel: bool = False
                     ) -> list[np.ndarray]:
    """Up to ``k`` shortest simple paths between servers ``a`` and ``b`` by link ``weight``.

    ``weight`` has one entry per link, or is a function of the link index (computing only
    the links the search visits); a NaN or infinite weight removes the link. Not cached
    (the weights follow the state). The paths, their order and their ties are those of
    :func:`networkx.shortest_simple_paths` with the same weights (Yen's algorithm over
    networkx's bidirectional Dijkstra), found by :func:`_yen` on node indices (a test
    compares the two on every shipped topology and on random graphs with ties). With
    ``kernel`` and ``weight`` an array, the search is the compiled one
    (:mod:`dcsim.allocators.multi.paths_kernel`, numba): the same paths.
    """
    if a == b or paths.is_flat:
        return [np.zeros(0, dtype=np.int64)]
    w = weight.tolist().__getitem__ if isinstance(weight, np.ndarray) else weight
    lo, hi = min(a, b), max(a, b)
    adj, link_to, leaf = paths.neighbour_lists()
    src, dst = int(paths.server_node[lo]), int(paths.server_node[hi])
    # A server with one link (every server of a Fabric) can only end a simple path, never
    # lie inside one: the search skips the other such servers, which changes no path or its
    # weight. Among paths of equal weight the order may differ from networkx's on the full
    # graph (it breaks ties by push count); it is deterministic.
    if leaf[src] and leaf[dst]:
        (hub, up), = adj[src]
        down = link_to[hub].get(dst)
        if down is not None:
            # two servers whose one link goes to the same switch (a rack's servers): the
            # only simple path between them is through it, if both links are usable
            if isfinite(w(up)) and isfinite(w(down)):
                return [np.array([up, down], dtype=np.int64)]
            return []
    if kernel and isinstance(weight, np.ndarray):
        from dcsim.allocators.multi.paths_kernel import yen_links

        ptr, nbr, link = paths.adjacency()
        flat, offsets = yen_links(ptr, nbr, link, paths.leaf_mask(),
                                  np.ascontiguousarray(weight, dtype=np.float64), src, dst, k)
        return [flat[offsets[i]:offsets[i + 1]] for i in range(len(offsets) - 1)]
    return [np.fromiter((link_to[u][v] for u, v in pairwise(p)), dtype=np.int64,
                        count=len(p) - 1)
            for p in _yen(adj, link_to, leaf, src, dst, k, w)]


def _yen(adj: list[list[tuple[int, int]]], link_to: list[dict[int, int]], leaf: list[bool],
         src: int, dst: int, k: int, w: Callable[[int], float]) -> list[list[int]]:
    """The first ``k`` node paths of ``networkx.shortest_simple_paths(G, src, dst,
    weight=...)``, step for step: the same spur searches in the same order, the same
    candidate heap keyed by (length, push count), the same floating-point sums, so the same
    paths come in the same order, ties included. A link is usable when its weight is finite
    and it touches no one-link server other than ``src`` and ``dst``."""

    def usable(u: int, v: int, link: int) -> float | None:
        if (leaf[v] and v != src and v != dst) or (leaf[u] and u != src and u != dst):
            return None
        x = w(link)
        return x if isfinite(x) else None

    def length(path: list[int]) -> float:
        total: float = 0
        for u, v in pairwise(path):
            total = total + w(link_to[u][v])
        return total

    def dijkstra(s: int, t: int, ignore_nodes: set[int], ignore_edges: set[tuple[int, int]]
                 ) -> tuple[float, list[int]] | None:
        """networkx's ``_bidirectional_dijkstra`` on node indices (None: no path)."""
        if ignore_nodes and (s in ignore_nodes or t in ignore_nodes):
            return None
        if s == t:
            return 0, [s]
        dists: list[dict[int, float]] = [{}, {}]
        routes: list[dict[int, list[int]]] = [{s: [s]}, {t: [t]}]
        fringe: list[list[tuple[float, int, int]]] = [[], []]
        seen: list[dict[int, float]] = [{s: 0}, {t: 0}]
        c = count()
        heappush(fringe[0], (0, next(c), s))
        heappush(fringe[1], (0, next(c), t))
        final: list[int] = []
        final_dist: float = 0
        way = 1
        while fringe[0] and fringe[1]:
            way = 1 - way
            dist, _, v = heappop(fringe[way])
            done = dists[way]
            if v in done:
                continue
            done[v] = dist
            if v in dists[1 - way]:
                return final_dist, final
            near, route = seen[way], routes[way]
            for x, link in adj[v]:
                if ignore_nodes and x in ignore_nodes:
                    continue
                if ignore_edges and ((v, x) in ignore_edges or (x, v) in ignore_edges):
                    continue
                weight = usable(v, x, link)
                if weight is None:
                    continue
                vx = dist + weight
                if x in done:
                    if vx < done[x]:
                        raise ValueError("contradictory paths found: negative weights?")
                elif x not in near or vx < near[x]:
                    near[x] = vx
                    heappush(fringe[way], (vx, next(c), x))
                    route[x] = route[v] + [x]
                    if x in seen[0] and x in seen[1]:
                        total = seen[0][x] + seen[1][x]
                        if final == [] or final_dist > total:
                            final_dist = total
                            back = routes[1][x][:]
                            back.reverse()
                            final = routes[0][x] + back[1:]
        return None

    first = dijkstra(src, dst, set(), set())
    if first is None:
        return []
    found: list[list[int]] = []
    buffered: set[tuple[int, ...]] = set()
    candidates: list[tuple[float, int, list[int]]] = []
    pushes = count()

    def push(cost: float, path: list[int]) -> None:
        key = tuple(path)
        if key not in buffered:
            heappush(candidates, (cost, next(pushes), path))
            buffered.add(key)

    push(*first)
    while candidates:
        _, _, path = heappop(candidates)
        buffered.remove(tuple(path))
        found.append(path)
        if len(found) == k:
            break
        ignore_nodes: set[int] = set()
        ignore_edges: set[tuple[int, int]] = set()
        for i in range(1, len(path)):
            root = path[:i]
            root_length = length(root)
            for p in found:
                if p[:i] == root:
                    ignore_edges.add((p[i - 1], p[i]))
            spur = dijkstra(root[-1], dst, ignore_nodes, ignore_edges)
            if spur is not None:
                push(root_length + spur[0], root[:-1] + spur[1])
            ignore_nodes.add(root[-1])
    return found


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
