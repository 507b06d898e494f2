"""VC-TETRIS's lookahead as one compiled call (numba; :mod:`dcsim.allocators.jit`).

:func:`rollouts` advances every row of AHAB's lookahead through all its steps, embedding
each step's VC as :func:`dcsim.allocators.vc_tetris.tetris_embed` does (single hosts, then
the groups of each level by free fraction, the greedy by ρ one VM at a time, the hose
check) with the same float operations, and reserving it as
:func:`dcsim.allocators.ahab.reserve_rows` does. Only for integral states
(:func:`dcsim.allocators.vc_batch.integral_lookahead`), where the batch code's sums in any
order are exact; the caller checks that.

Imported only when the kernels are on: it needs numba.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from dcsim.allocators.rollout_jit import HOSE, PER_VM, PER_VM_STRICT, reserve

#: ``zero_bandwidth`` values (:data:`dcsim.allocators.vc_tetris_score.ZERO_BANDWIDTH`)
LEAST, MOST, INFEASIBLE, IF_STRANDED = 0, 1, 2, 3
_EPS = 1e-9


@njit(cache=True)
def _key(fr, up, m1, n, s, b, mode, zb):
    """The greedy's key for a host's m1-th VM (free CU ``fr``, uplink BU ``up``): ρ as
    :func:`~dcsim.allocators.vc_tetris_score.tetris_rho`, a feasible −inf as −1e300, an
    infeasible VM −inf (:func:`~dcsim.allocators.vc_tetris_score._greedy`'s table)."""
    c_after = fr - m1 * s
    if mode == HOSE:
        v = min(m1, n - m1)
    elif mode == PER_VM:
        v = m1 if m1 < n else 0
    else:
        v = m1
    b_after = up - v * b
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
def _runs_reach(free, lf, lo, hi, n, s, b, mode, zb, uplink):
    """Whether hosts lo..hi-1 take n VMs in all before each host's first infeasible VM
    (the greedy never puts more on a host; it places all n iff they do)."""
    total = 0
    for h in range(lo, hi):
        up = lf[uplink[0, h]]
        for m1 in range(1, n + 1):
            if _key(free[h], up, m1, n, s, b, mode, zb) == -np.inf:
                break
            total += 1
            if total >= n:
                return True
    return False


@njit(cache=True)
def _embed(free, lf, n, s, b, mode, zb, H, sizes, uplink, group, host_start, cap_g, slots,
           m, key, frac, m_out, touched):
    """Embed VC (n, s, b) in one state: fills ``m_out`` at ``touched[:count]`` and returns
    count, or -1 if TETRIS finds no embedding. The other arguments are scratch arrays."""
    n_hosts = sizes[0]
    total = 0.0
    for h in range(n_hosts):
        total += free[h]
    if total + _EPS < n * s:
        return -1
    best = -1
    for h in range(n_hosts):  # single hosts, most free CU first
        slots[h] = np.int64(math.floor(free[h] / s + 1e-9))
        if slots[h] >= n and (mode != PER_VM_STRICT or n * b <= lf[uplink[0, h]] + _EPS):
            if best < 0 or free[h] > free[best]:
                best = h
    if best >= 0:
        m_out[best] = n
        touched[0] = best
        return 1
    for i in range(lf.shape[0]):
        if not (lf[i] + _EPS >= 0):
            return -1  # a link overdrawn fails every group's hose check
    for k in range(1, H + 1):
        size = sizes[k]
        for g in range(size):
            fg = 0.0
            room = 0
            for h in range(host_start[k, g], host_start[k, g + 1]):
                fg += free[h]
                room += min(slots[h], n)
            frac[g] = fg / cap_g[k, g] if cap_g[k, g] > 0 else 0.0
            if room < n:  # cannot hold N VMs: the greedy would fail anyway
                frac[g] = -np.inf
        while True:  # the groups by free fraction (ties: lowest index)
            g = np.argmax(frac[:size])
            if frac[g] == -np.inf:
                break
            frac[g] = -np.inf
            lo, hi = host_start[k, g], host_start[k, g + 1]
            # the greedy places all N iff the hosts' runs of feasible VMs total N
            if not _runs_reach(free, lf, lo, hi, n, s, b, mode, zb, uplink):
                continue
            for h in range(lo, hi):
                m[h] = 0
                key[h] = _key(free[h], lf[uplink[0, h]], 1, n, s, b, mode, zb)
            for _ in range(n):
                at = lo
                for h in range(lo + 1, hi):
                    if key[h] > key[at]:
                        at = h
                m[at] += 1
                key[at] = _key(free[at], lf[uplink[0, at]], m[at] + 1, n, s, b, mode, zb)
            ok = True  # the hose check: host links, then the links inside the group
            for h in range(lo, hi):
                if m[h] > 0:
                    if mode == HOSE:
                        v = min(m[h], n - m[h])
                    elif mode == PER_VM:
                        v = m[h] if m[h] < n else 0
                    else:
                        v = m[h]
                    if not (v * b <= lf[uplink[0, h]] + _EPS):
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
def rollouts(cpu, lf, ns, ss, bs, gain, reward, mode, zb, H, sizes, uplink, group,
             host_start, cap_g):
    """Every row's lookahead, as :func:`dcsim.allocators.kraken_jit.rollouts`;
    ``cap_g`` (H + 1, widest level): each group's CU capacity, summed as numpy does."""
    K = cpu.shape[0]
    n_hosts = sizes[0]
    width = sizes.max()
    slots = np.zeros(n_hosts, dtype=np.int64)
    m = np.zeros(n_hosts, dtype=np.int64)
    key = np.zeros(n_hosts, dtype=np.float64)
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
            count = _embed(free, links, n, s, b, mode, zb, H, sizes, uplink, group,
                           host_start, cap_g, slots, m, key, frac, m_out, touched)
            if count >= 0:
                reserve(free, links, n, s, b, mode, H, sizes, group, uplink, m_out, touched,
                        count, mk)
                reward[r] += gain[j, r]
