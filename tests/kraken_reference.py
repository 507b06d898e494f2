"""The batched KRAKEN as it was before issue #19 made it sparse: a dense, level-by-level
reference that tests compare the fast version against (same embeddings, row by row)."""

from __future__ import annotations

import numpy as np

from dcsim.allocators.vc.lookahead import vm_counts
from dcsim.model.vc import UNLIMITED, TreeLevels


def _split_rows(levels: TreeLevels, k: int, amount: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """Give each level-(k+1) amount to its level-k children in index order, each up to cap.

    Rows are independent states: amount (K, size[k+1]), cap (K, size[k]). Children are
    contiguous and ordered by parent (:class:`TreeLevels` checks it).
    """
    before = np.cumsum(cap, axis=1, dtype=cap.dtype)
    before -= cap
    before -= before[:, levels.first_child[k]]
    out = amount[:, levels.parent[k]]
    out -= before
    np.maximum(out, 0, out=out)
    return np.minimum(out, cap, out=out)


def kraken_embed_batch_reference(levels: TreeLevels, free_cpu: np.ndarray, link_free: np.ndarray,
                       n: np.ndarray, s: np.ndarray, b: np.ndarray, host_link: str = "hose"):
    """Embed K VCs, one per row of K independent states, in one vectorised pass.

    ``free_cpu`` (K, hosts), ``link_free`` (K, links), ``n``/``s``/``b`` (K,). Returns VM
    counts (K, hosts) and a feasibility mask (K,); the same embeddings as
    :func:`~dcsim.allocators.vc.kraken.kraken_embed` row by row (tested), for lookahead over
    many sampled futures.
    Counts are int32 internally (every value is at most a few thousand VMs).
    """
    H = levels.height
    K = free_cpu.shape[0]
    n = n.astype(np.int32)
    rows = np.arange(K)
    nn = n[:, None]
    # int32 halves the memory traffic of the (K, hosts) passes below (counts are < 2**30)
    slots = vm_counts(free_cpu, s, nn).astype(np.int32)
    lcap = vm_counts(link_free, b, UNLIMITED).astype(np.int32)
    sup = [np.minimum(slots, lcap[:, levels.uplink[0]])]
    childsum = [slots]
    for k in range(1, H + 1):
        cs = np.add.reduceat(sup[k - 1], levels.starts[k - 1], axis=1)
        childsum.append(cs)
        if k < H:
            sup.append(np.minimum(cs, lcap[:, levels.uplink[k]]))
    big = np.iinfo(np.int32).max
    best_cost = np.full(K, big, dtype=np.int32)
    best_j = np.full(K, -1, dtype=np.int64)
    best_g = np.zeros(K, dtype=np.int64)
    best_takes = np.zeros((K, H + 1), dtype=np.int32)
    half = (nn + 1) // 2
    for j in range(H + 1):
        if j == 0 and host_link != "hose":
            if host_link == "per_vm_strict":
                continue  # a host holding the whole VC reserves N·B: a rack centre says so
            # per_vm: a host is a centre only for the whole VC (which reserves nothing)
            cand = np.flatnonzero((slots >= nn).any(axis=0))
            if cand.size == 0:
                continue
            cost = np.where(slots[:, cand] >= nn, 0, big).astype(np.int32)
            takes = [np.minimum(nn, slots[:, cand])] + [np.zeros_like(cost)] * H
            _keep_best(cost, cand, takes, 0, rows, best_cost, best_j, best_g, best_takes)
            continue
        # A centre of gravity below the root has >= N/2 of the VMs in its subtree: other
        # centres cannot be strictly cheaper, so only candidates that can hold N/2 are kept.
        if j < H:
            cand = np.flatnonzero((childsum[j] >= half).any(axis=0))
            if cand.size == 0:
                continue
        else:
            cand = np.arange(1)
        up = [None if u is None else u[cand] for u in levels.up[j]]
        take0 = np.minimum(nn, childsum[j][:, cand])
        rest = nn - take0
        cost = take0 * j
        res = [lcap[:, levels.uplink[m][up[m]]] for m in range(j, H)]
        takes = [take0]
        for k in range(j + 1, H + 1):
            avail = childsum[k][:, up[k]]
            avail -= sup[k - 1][:, up[k - 1]]
            lim = res[0]
            for r in res[1 : k - j]:
                lim = np.minimum(lim, r)
            t = np.minimum(rest, avail, out=avail)
            np.minimum(t, lim, out=t)
            for i in range(k - j):
                res[i] = res[i] - t
            rest -= t
            cost += t * (2 * k - j)
            takes.append(t)
        cost[rest != 0] = big
        _keep_best(cost, cand, takes, j, rows, best_cost, best_j, best_g, best_takes)
    ok = (best_j >= 0) & (slots.sum(axis=1) >= n)
    jb = np.where(ok, best_j, H)
    amount = np.zeros((K, levels.size[H]), dtype=np.int32)
    amount[:, 0] = np.where(ok, best_takes[rows, H - jb], 0)
    for k in range(H, 0, -1):
        lvl = k - 1
        on_path = ok & (lvl >= jb)
        pr = np.flatnonzero(on_path)
        # the centre's ancestor at this level (the centre itself at its own level)
        jr = jb[pr]
        path = np.empty(pr.size, dtype=np.int64)
        for j in range(lvl + 1):
            sel = jr == j
            path[sel] = levels.up[j][lvl][best_g[pr[sel]]]
        cap = sup[lvl].copy()
        cap[pr, path] = 0
        amount = _split_rows(levels, lvl, amount, cap)
        amount[pr, path] += best_takes[pr, lvl - jr]
    return amount.astype(np.int64), ok


def _keep_best(cost, cand, takes, j, rows, best_cost, best_j, best_g, best_takes) -> None:
    """Keep, per row, the cheapest of the level-j centres ``cand`` if it beats the best so
    far (strictly: ties stay with the lower level, then the lower index)."""
    gi = cost.argmin(axis=1)
    c = cost[rows, gi]
    better = c < best_cost
    if better.any():
        rb, gb = np.flatnonzero(better), gi[better]
        best_cost[rb] = c[rb]
        best_j[rb] = j
        best_g[rb] = cand[gb]
        for i, t in enumerate(takes):
            best_takes[rb, i] = t[rb, gb]


