"""NALB/NULB's weighted k shortest paths compiled (numba; :mod:`dcsim.kernels`):
:func:`dcsim.allocators.multi.paths._yen` on the CSR adjacency, step for step — the same
spur searches, the same bidirectional Dijkstra with its heaps keyed by (distance, push
count), the same candidate heap keyed by (length, push count), the same floating-point
sums — so the same paths in the same order, ties included (``tests/allocators/multi/
test_weighted_paths.py`` compares the three: networkx, the Python search, this one).

A route is kept as predecessors instead of lists: every predecessor is set from a node
whose distance is final, so the chain behind it never changes and the route it spells is
the list networkx would hold. Imported only when the kernels are on: it needs numba.
"""

from __future__ import annotations

import heapq

import numpy as np
from numba.typed import List

from dcsim.allocators.kernel_cache import njit


@njit(cache=True)
def _link_of(ptr, nbr, link, u, v):
    for j in range(ptr[u], ptr[u + 1]):
        if nbr[j] == v:
            return link[j]
    return -1


@njit(cache=True)
def _chain(pred, x, out):
    """``out`` extended with x, pred[x], pred[pred[x]], ... (to the search's start)."""
    while x >= 0:
        out.append(x)
        x = pred[x]


@njit(cache=True)
def _dijkstra(ptr, nbr, link, leaf, weight, src, dst, s, t, ignore_node, n_ignored,
              ignore_link, n_ignored_links):
    """networkx's ``_bidirectional_dijkstra`` from ``s`` to ``t``: (found, length, node
    path)."""
    empty = np.zeros(0, dtype=np.int64)
    if n_ignored > 0 and (ignore_node[s] or ignore_node[t]):
        return False, 0.0, empty
    if s == t:
        one = np.zeros(1, dtype=np.int64)
        one[0] = s
        return True, 0.0, one
    n = ptr.shape[0] - 1
    done = np.zeros((2, n), dtype=np.bool_)
    dist = np.zeros((2, n), dtype=np.float64)
    seen = np.zeros((2, n), dtype=np.bool_)
    near = np.zeros((2, n), dtype=np.float64)
    pred = np.full((2, n), -1, dtype=np.int64)
    seen[0, s] = True
    seen[1, t] = True
    count = 0
    f0 = [(0.0, count, s)]
    count += 1
    f1 = [(0.0, count, t)]
    count += 1
    has_final = False
    final_dist = 0.0
    final_x = -1
    final_p0 = -1
    final_p1 = -1
    way = 1
    while len(f0) > 0 and len(f1) > 0:
        way = 1 - way
        if way == 0:
            d, _, v = heapq.heappop(f0)
        else:
            d, _, v = heapq.heappop(f1)
        if done[way, v]:
            continue
        done[way, v] = True
        dist[way, v] = d
        if done[1 - way, v]:
            out = List.empty_list(np.int64)
            if final_x >= 0:
                back = List.empty_list(np.int64)
                _chain(pred[0], final_p0, back)
                for j in range(len(back) - 1, -1, -1):
                    out.append(back[j])
                out.append(final_x)
                _chain(pred[1], final_p1, out)
            path = np.empty(len(out), dtype=np.int64)
            for j in range(len(out)):
                path[j] = out[j]
            return True, final_dist, path
        for j in range(ptr[v], ptr[v + 1]):
            x = nbr[j]
            lk = link[j]
            if n_ignored > 0 and ignore_node[x]:
                continue
            if n_ignored_links > 0 and ignore_link[lk]:
                continue
            if (leaf[x] and x != src and x != dst) or (leaf[v] and v != src and v != dst):
                continue
            w = weight[lk]
            if not np.isfinite(w):
                continue
            vx = d + w
            if done[way, x]:
                if vx < dist[way, x]:
                    raise ValueError("contradictory paths found: negative weights?")
            elif not seen[way, x] or vx < near[way, x]:
                seen[way, x] = True
                near[way, x] = vx
                if way == 0:
                    heapq.heappush(f0, (vx, count, x))
                else:
                    heapq.heappush(f1, (vx, count, x))
                count += 1
                pred[way, x] = v
                if seen[0, x] and seen[1, x]:
                    total = near[0, x] + near[1, x]
                    if not has_final or final_dist > total:
                        has_final = True
                        final_dist = total
                        final_x = x
                        final_p0 = pred[0, x]
                        final_p1 = pred[1, x]
    return False, 0.0, empty


@njit(cache=True)
def _same(a, b):
    if a.shape[0] != b.shape[0]:
        return False
    for j in range(a.shape[0]):
        if a[j] != b[j]:
            return False
    return True


@njit(cache=True)
def yen_links(ptr, nbr, link, leaf, weight, src, dst, k):
    """The first ``k`` paths from node ``src`` to node ``dst`` as link indices: a flat
    array and the offsets of each path in it (``offsets[i]:offsets[i + 1]``); ``weight``
    has one entry per link (not finite: the link is not used)."""
    n = ptr.shape[0] - 1
    ignore_node = np.zeros(n, dtype=np.bool_)
    ignore_link = np.zeros(weight.shape[0], dtype=np.bool_)
    ok, length, path = _dijkstra(ptr, nbr, link, leaf, weight, src, dst, src, dst,
                                 ignore_node, 0, ignore_link, 0)
    found = List()
    flat = List.empty_list(np.int64)
    offsets = List.empty_list(np.int64)
    offsets.append(0)
    if not ok:
        return np.zeros(0, dtype=np.int64), np.zeros(1, dtype=np.int64)
    store = List()
    store.append(path)
    alive = List()
    alive.append(True)
    pushes = 0
    heap = [(length, pushes, 0)]
    pushes += 1
    while len(heap) > 0:
        _, _, idx = heapq.heappop(heap)
        alive[idx] = False
        p = store[idx]
        found.append(p)
        for j in range(p.shape[0] - 1):
            flat.append(_link_of(ptr, nbr, link, p[j], p[j + 1]))
        offsets.append(len(flat))
        if len(found) == k:
            break
        ignore_node[:] = False
        n_ignored = 0
        for i in range(1, p.shape[0]):
            root = p[:i]
            root_length = 0.0
            for j in range(i - 1):
                root_length = root_length + weight[_link_of(ptr, nbr, link, root[j],
                                                            root[j + 1])]
            ignore_link[:] = False
            n_links = 0
            for q in found:
                if q.shape[0] > i and _same(q[:i], root):
                    lk = _link_of(ptr, nbr, link, q[i - 1], q[i])
                    if not ignore_link[lk]:
                        ignore_link[lk] = True
                        n_links += 1
            ok, spur_length, spur = _dijkstra(ptr, nbr, link, leaf, weight, src, dst,
                                              root[i - 1], dst, ignore_node, n_ignored,
                                              ignore_link, n_links)
            if ok:
                cand = np.empty(i - 1 + spur.shape[0], dtype=np.int64)
                cand[:i - 1] = root[:i - 1]
                cand[i - 1:] = spur
                twice = False
                for c in range(len(store)):
                    if alive[c] and _same(store[c], cand):
                        twice = True
                        break
                if not twice:
                    store.append(cand)
                    alive.append(True)
                    heapq.heappush(heap, (root_length + spur_length, pushes, len(store) - 1))
                    pushes += 1
            if not ignore_node[root[i - 1]]:
                ignore_node[root[i - 1]] = True
                n_ignored += 1
    out = np.empty(len(flat), dtype=np.int64)
    for j in range(len(flat)):
        out[j] = flat[j]
    offs = np.empty(len(offsets), dtype=np.int64)
    for j in range(len(offsets)):
        offs[j] = offsets[j]
    return out, offs
