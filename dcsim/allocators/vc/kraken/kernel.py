"""KRAKEN's lookahead as one compiled call (numba; :mod:`dcsim.kernels`).

:func:`rollouts` advances every row of AHAB's lookahead (:meth:`Ahab._rollouts`) through
all its steps: at each step it embeds the step's VC in the row's state as
:func:`dcsim.allocators.vc.kraken.kraken_embed_sparse` does for that row, reserves it as
:func:`dcsim.allocators.vc.lookahead.reserve_rows` does and credits the row's reward. Row by row,
with plain loops, the same integer counts and the same float operations as the numpy code
(which scores every centre of every row at once); only for sizes that pass
:func:`dcsim.allocators.vc.kraken.plain_sizes`, which the caller checks.

Imported only when the kernels are on: it needs numba.
"""

from __future__ import annotations

import math

import numpy as np

from dcsim.allocators.kernel_cache import njit
from dcsim.allocators.vc.lookahead_kernel import HOSE, PER_VM, PER_VM_STRICT, reserve
from dcsim.model.vc import UNLIMITED

_BIG = np.iinfo(np.int32).max


@njit(cache=True)
def _count(x, inv, eps):
    """⌊x · inv (+ 1e-9)⌋ as an integer: numpy's multiply, add, floor and int32 cast."""
    q = x * inv
    if eps:
        q += 1e-9
    return np.int64(math.floor(q))


@njit(cache=True)
def _embed(free, lf, n, s, b, mode, eps, H, sizes, parent, uplink, sup, cs, lc, anc, res,
           tk, cls, path, amt, amt2, m_out, touched):
    """Embed VC (n, s, b) in one state (free CU per host, free BU per link): fills
    ``m_out`` at the hosts listed in ``touched[:count]`` and returns count, or -1 if KRAKEN
    finds no embedding. The other arguments are scratch arrays."""
    inv_s = 1.0 / s
    inv_b = 1.0 / b
    n_hosts = sizes[0]
    total = 0
    for h in range(n_hosts):
        if mode == PER_VM_STRICT:
            q = free[h] * inv_s
            q2 = lf[uplink[0, h]] * inv_b
            if q2 < q:
                q = q2
            if eps:
                q += 1e-9
            v = np.int64(math.floor(q))
        else:
            v = _count(free[h], inv_s, True)
            cs[0, h] = min(v, n)  # slots, at most n
            v = min(cs[0, h], _count(lf[uplink[0, h]], inv_b, True))
        if v > n:
            v = n
        sup[0, h] = v
        total += v
    if mode == PER_VM_STRICT and total < n:
        return -1  # the hosts hold fewer than n VMs in all
    j0 = 0 if mode == HOSE else 1
    for k in range(1, H + 1):
        for g in range(sizes[k]):
            cs[k, g] = 0
        for g in range(sizes[k - 1]):
            cs[k, parent[k - 1, g]] += sup[k - 1, g]
        if k < H:
            for g in range(sizes[k]):
                c = _count(lf[uplink[k, g]], inv_b, eps)
                lc[k, g] = c
                sup[k, g] = min(cs[k, g], c)
    if j0 == 0:
        for g in range(sizes[0]):
            lc[0, g] = _count(lf[uplink[0, g]], inv_b, True)
    half = (n + 1) // 2
    best = _BIG
    best_level = -1
    for L in range(j0, H + 1):
        for c in range(sizes[L]):
            own = cs[L, c] if L < H else UNLIMITED
            if own < half:
                continue  # the centre cannot hold n/2: never cheaper (kraken docstring)
            anc[L] = c
            for k in range(L + 1, H + 1):
                anc[k] = parent[k - 1, anc[k - 1]]
            for m in range(j0, H):
                res[m] = lc[m, anc[m]] if m >= L else UNLIMITED
            rest = n
            cost = 0
            for k in range(j0, H + 1):
                t = cs[k, anc[k]] if k >= L else 0
                if k > j0:
                    if k > L:
                        t -= sup[k - 1, anc[k - 1]]
                    lim = res[j0]
                    for m in range(j0 + 1, k):
                        lim = min(lim, res[m])
                    t = min(t, lim)
                t = min(t, rest)
                rest -= t
                cost += t * (2 * k - L)
                if k < H:
                    for m in range(j0, k):
                        res[m] -= t
                tk[k] = t
            if rest == 0 and cost < best:
                best = cost
                best_level = L
                for k in range(H + 1):
                    cls[k] = tk[k] if k >= j0 else 0
                    path[k] = anc[k] if k >= L else -1
    if mode == PER_VM:  # a host holding the whole VC costs 0: the first one wins
        for h in range(n_hosts):
            if cs[0, h] >= n:
                for k in range(H + 1):
                    cls[k] = 0
                    path[k] = -1
                cls[0] = n
                path[0] = h
                best_level = 0
                j0 = 0
                break
    if best_level < 0:
        return -1
    # hand the VMs down: each node's to its children in index order, each up to its sup,
    # the child on the path to the centre taking its own class instead
    for k in range(j0, H):
        if path[k] >= 0:
            sup[k, path[k]] = 0
    amt[0] = cls[H]
    for k in range(H - 1, 0, -1):
        prefix = 0
        last = -1
        for g in range(sizes[k]):
            p = parent[k, g]
            if p != last:
                prefix = 0
                last = p
            cap = sup[k, g]
            x = min(max(amt[p] - prefix, 0), cap)
            if g == path[k]:
                x += cls[k]
            amt2[g] = x
            prefix += cap
        for g in range(sizes[k]):
            amt[g] = amt2[g]
    count = 0
    prefix = 0
    last = -1
    for h in range(n_hosts):
        p = parent[0, h]
        if amt[p] == 0:
            continue  # a group without VMs hands down nothing
        if p != last:
            prefix = 0
            last = p
        cap = sup[0, h]
        x = min(max(amt[p] - prefix, 0), cap)
        prefix += cap
        if x != 0:
            m_out[h] = x
            touched[count] = h
            count += 1
    if j0 == 0 and path[0] >= 0 and cls[0] > 0:  # a host as the centre
        m_out[path[0]] = cls[0]
        touched[count] = path[0]
        count += 1
    return count


@njit(cache=True)
def rollouts(cpu, lf, ns, ss, bs, gain, reward, mode, eps, H, sizes, parent, uplink, group):
    """Every row's lookahead: ``cpu`` (K, hosts) and ``lf`` (K, links) the states (updated
    in place), ``ns``/``ss``/``bs``/``gain`` (steps, K) each step's VC per row and its
    reward, ``reward`` (K,) credited in place."""
    K = cpu.shape[0]
    width = sizes.max()
    sup = np.zeros((H + 1, width), dtype=np.int64)
    cs = np.zeros((H + 1, width), dtype=np.int64)
    lc = np.zeros((H + 1, width), dtype=np.int64)
    anc = np.zeros(H + 1, dtype=np.int64)
    res = np.zeros(H + 1, dtype=np.int64)
    tk = np.zeros(H + 1, dtype=np.int64)
    cls = np.zeros(H + 1, dtype=np.int64)
    path = np.zeros(H + 1, dtype=np.int64)
    amt = np.zeros(width, dtype=np.int64)
    amt2 = np.zeros(width, dtype=np.int64)
    m_out = np.zeros(sizes[0], dtype=np.int64)
    touched = np.zeros(sizes[0], dtype=np.int64)
    mk = np.zeros(width, dtype=np.float64)
    for r in range(K):
        free = cpu[r]
        links = lf[r]
        for j in range(ns.shape[0]):
            n = ns[j, r]
            s = ss[j, r]
            b = bs[j, r]
            count = _embed(free, links, n, s, b, mode, eps, H, sizes, parent, uplink, sup,
                           cs, lc, anc, res, tk, cls, path, amt, amt2, m_out, touched)
            if count >= 0:
                reserve(free, links, n, s, b, mode, H, sizes, group, uplink, m_out, touched,
                        count, mk)
                reward[r] += gain[j, r]
