"""VC-TETRIS's lookahead as one compiled call (numba; :mod:`dcsim.kernels`).

:func:`rollouts` advances every row of AHAB's lookahead through all its steps, embedding
each step's VC as :func:`dcsim.allocators.vc.tetris.tetris_embed` does (single hosts, then
the groups of each level by free fraction, the greedy by ρ one VM at a time, the hose
check) with the same float operations, and reserving it as
:func:`dcsim.allocators.vc.lookahead.reserve_rows` does. Only for integral states
(:func:`dcsim.allocators.vc.lookahead.integral_lookahead`), where the batch code's sums in any
order are exact; the caller checks that.

Imported only when the kernels are on: it needs numba.
"""

from __future__ import annotations

import math

import numpy as np

from dcsim.allocators.kernel_cache import njit
from dcsim.allocators.vc.lookahead_kernel import HOSE, PER_VM, PER_VM_STRICT, host_vms, reserve

#: ``zero_bandwidth`` values (:data:`dcsim.allocators.vc.tetris.reference.ZERO_BANDWIDTH`)
LEAST, MOST, INFEASIBLE, IF_STRANDED = 0, 1, 2, 3
_EPS = 1e-9


@njit(cache=True)
def _key(fr, up, m1, n, s, b, mode, zb):
    """The greedy's key for a host's m1-th VM (free CU ``fr``, uplink BU ``up``): ρ as
    :func:`~dcsim.allocators.vc.tetris.reference.tetris_rho`, a feasible −inf as −1e300, an
    infeasible VM −inf (:func:`~dcsim.allocators.vc.tetris.reference.greedy`'s table)."""
    c_after = fr - m1 * s
    b_after = up - host_vms(m1, n, mode) * b
    if not (c_after >= -_EPS and b_after >= -_EPS):
        return -np.inf
    zero_b = b_after <= _EPS
    if zero_b and b > 0 and (zb == INFEASIBLE or (zb == IF_STRANDED and c_after > _EPS)):
        return -np.inf
    if zero_b:
        if b > 0 and c_after > _EPS:
            rho = np.inf if zb == MOST else -np.inf
        else:
            rho = np.inf
    else:
        rho = c_after / b_after
    return max(rho, -1e300)


@njit(cache=True)
def _run(fr, up, n, s, b, mode, zb):
    """How many VMs a host takes before its first infeasible one, at most n (the greedy
    never puts more on it; it places all n in a group iff its hosts' runs total n). In
    closed form for integral states (whole fr and up, sizes powers of two from 1: every
    residual is whole, so ``x ≥ −1e-9`` is ``x ≥ 0``), as the batch code's ``host_runs``;
    one VM at a time where ``zero_bandwidth`` blocks some."""
    if zb == INFEASIBLE or zb == IF_STRANDED:
        run = 0
        while run < n and _key(fr, up, run + 1, n, s, b, mode, zb) != -np.inf:
            run += 1
        return run
    cpu = min(max(math.floor(fr * (1.0 / s)), 0.0), n)
    bw = min(max(math.floor(up * (1.0 / b)), 0.0), n)
    if mode == HOSE and bw >= n // 2 or mode == PER_VM and bw >= n - 1:
        bw = n if up >= -_EPS else 0  # then only the whole VC's 0 may not fit
    return np.int64(min(cpu, bw))


@njit(cache=True)
def _greedy(free, lf, lo, hi, n, s, b, mode, zb, uplink, m, heap_k, heap_h):
    """The greedy's VMs per host (``m[lo:hi]``) for a group whose runs total n: each VM
    on the host with the largest key, ties to the lowest index (numpy's argmax), found
    with a binary heap of the hosts' next keys."""
    size = 0
    for h in range(lo, hi):
        m[h] = 0
        k = _key(free[h], lf[uplink[0, h]], 1, n, s, b, mode, zb)
        if k != -np.inf:
            size = _push(heap_k, heap_h, size, k, h)
    for _ in range(n):
        h = heap_h[0]
        size = _pop(heap_k, heap_h, size)
        m[h] += 1
        k = _key(free[h], lf[uplink[0, h]], m[h] + 1, n, s, b, mode, zb)
        if k != -np.inf and m[h] < n:
            size = _push(heap_k, heap_h, size, k, h)


@njit(cache=True)
def _before(ka, ha, kb, hb):
    return ka > kb or (ka == kb and ha < hb)


@njit(cache=True)
def _push(heap_k, heap_h, size, k, h):
    i = size
    while i > 0:
        p = (i - 1) // 2
        if not _before(k, h, heap_k[p], heap_h[p]):
            break
        heap_k[i] = heap_k[p]
        heap_h[i] = heap_h[p]
        i = p
    heap_k[i] = k
    heap_h[i] = h
    return size + 1


@njit(cache=True)
def _pop(heap_k, heap_h, size):
    size -= 1
    k, h = heap_k[size], heap_h[size]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= size:
            break
        if c + 1 < size and _before(heap_k[c + 1], heap_h[c + 1], heap_k[c], heap_h[c]):
            c += 1
        if not _before(heap_k[c], heap_h[c], k, h):
            break
        heap_k[i] = heap_k[c]
        heap_h[i] = heap_h[c]
        i = c
    if size > 0:
        heap_k[i] = k
        heap_h[i] = h
    return size


@njit(cache=True)
def _embed(free, lf, n, s, b, mode, zb, H, sizes, parent, uplink, group, host_start, cap_g,
           fsum, room, runs, m, heap_k, heap_h, frac, m_out, touched):
    """Embed VC (n, s, b) in one state: fills ``m_out`` at ``touched[:count]`` and returns
    count, or -1 if TETRIS finds no embedding. The other arguments are scratch arrays."""
    n_hosts = sizes[0]
    inv_s = 1.0 / s  # a power of two (integral states): x * inv_s is x / s exactly
    total = 0.0
    best = -1
    for h in range(n_hosts):  # single hosts (N slots), most free CU first
        total += free[h]
        # ⌊x + 1e-9⌋ ≥ n iff x + 1e-9 ≥ n, n whole
        if free[h] * inv_s + 1e-9 >= n and (
                mode != PER_VM_STRICT or n * b <= lf[uplink[0, h]] + _EPS):
            if best < 0 or free[h] > free[best]:
                best = h
    if total + _EPS < n * s:
        return -1
    if best >= 0:
        m_out[best] = n
        touched[0] = best
        return 1
    # per group: free CU, the hosts' min(slots, N) and their runs (whole numbers: exact)
    inv_b = 1.0 / b
    closed = zb != INFEASIBLE and zb != IF_STRANDED
    for g in range(sizes[1]):
        fg = 0.0
        rm = 0.0
        rn = 0.0
        for h in range(host_start[1, g], host_start[1, g + 1]):
            fr = free[h]
            up = lf[uplink[0, h]]
            fg += fr
            q = math.floor(fr * inv_s)  # slots: ⌊fr / s + 1e-9⌋ on integral states
            rm += min(q, n)
            if closed:  # _run in closed form
                bw = min(max(math.floor(up * inv_b), 0.0), n)
                if mode == HOSE and bw >= n // 2 or mode == PER_VM and bw >= n - 1:
                    bw = n if up >= -_EPS else 0.0
                rn += min(min(max(q, 0.0), n), bw)
            else:
                rn += _run(fr, up, n, s, b, mode, zb)
        fsum[1, g] = fg
        room[1, g] = rm
        runs[1, g] = rn
    for k in range(2, H + 1):
        for g in range(sizes[k]):
            fsum[k, g] = 0.0
            room[k, g] = 0.0
            runs[k, g] = 0.0
        for g in range(sizes[k - 1]):
            p = parent[k - 1, g]
            fsum[k, p] += fsum[k - 1, g]
            room[k, p] += room[k - 1, g]
            runs[k, p] += runs[k - 1, g]
    for i in range(lf.shape[0]):
        if not (lf[i] + _EPS >= 0):
            return -1  # a link overdrawn fails every group's hose check
    for k in range(1, H + 1):
        size = sizes[k]
        for g in range(size):
            frac[g] = fsum[k, g] / cap_g[k, g] if cap_g[k, g] > 0 else 0.0
            if room[k, g] < n or runs[k, g] < n:  # the one-row filter; or the greedy
                frac[g] = -np.inf  # would fail (its runs total less than N)
        while True:  # the groups by free fraction (ties: lowest index)
            g = np.argmax(frac[:size])
            if frac[g] == -np.inf:
                break
            frac[g] = -np.inf
            lo, hi = host_start[k, g], host_start[k, g + 1]
            _greedy(free, lf, lo, hi, n, s, b, mode, zb, uplink, m, heap_k, heap_h)
            ok = True  # the hose check: host links, then the links inside the group
            for h in range(lo, hi):
                if m[h] > 0 and not (host_vms(m[h], n, mode) * b <= lf[uplink[0, h]] + _EPS):
                    ok = False
            for j in range(1, k):
                h = lo
                while h < hi and ok:
                    sub = group[j, h]
                    mj = 0
                    while h < hi and group[j, h] == sub:
                        mj += m[h]
                        h += 1
                    if mj > 0 and not (min(mj, n - mj) * b <= lf[uplink[j, sub]] + _EPS):
                        ok = False
            if ok:
                count = 0
                for h in range(lo, hi):
                    if m[h] > 0:
                        m_out[h] = m[h]
                        touched[count] = h
                        count += 1
                return count
    return -1


@njit(cache=True)
def rollouts(cpu, lf, ns, ss, bs, gain, reward, mode, zb, H, sizes, parent, uplink, group,
             host_start, cap_g):
    """Every row's lookahead, as :func:`dcsim.allocators.vc.kraken.kernel.rollouts`;
    ``cap_g`` (H + 1, widest level): each group's CU capacity, summed as numpy does."""
    K = cpu.shape[0]
    n_hosts = sizes[0]
    width = sizes.max()
    fsum = np.zeros((H + 1, width), dtype=np.float64)
    room = np.zeros((H + 1, width), dtype=np.float64)
    m = np.zeros(n_hosts, dtype=np.int64)
    runs = np.zeros((H + 1, width), dtype=np.float64)
    heap_k = np.zeros(n_hosts, dtype=np.float64)
    heap_h = np.zeros(n_hosts, dtype=np.int64)
    frac = np.zeros(width, dtype=np.float64)
    m_out = np.zeros(n_hosts, dtype=np.int64)
    touched = np.zeros(n_hosts, dtype=np.int64)
    mk = np.zeros(width, dtype=np.float64)
    for r in range(K):
        free = cpu[r]
        links = lf[r]
        for j in range(ns.shape[0]):
            n = ns[j, r]
            s = ss[j, r]
            b = bs[j, r]
            count = _embed(free, links, n, s, b, mode, zb, H, sizes, parent, uplink, group,
                           host_start, cap_g, fsum, room, runs, m, heap_k, heap_h, frac,
                           m_out, touched)
            if count >= 0:
                reserve(free, links, n, s, b, mode, H, sizes, group, uplink, m_out, touched,
                        count, mk)
                reward[r] += gain[j, r]
