"""OKTOPUS's lookahead as one compiled call (numba; :mod:`dcsim.kernels`).

:func:`rollouts` advances every row of AHAB's lookahead through all its steps, embedding
each step's VC as :func:`dcsim.allocators.vc.oktopus.oktopus_embed` does (a single host, else
the first subtree, lowest level then lowest index, whose children's feasible counts sum
to N; then the greedy split down the tree) and reserving it as
:func:`dcsim.allocators.vc.lookahead.reserve_rows` does. A node's feasible counts 0..N are one
``uint64`` bit set (N ≤ 63), summed exactly (an interval {0..a} plus {0..c} is {0..a+c};
other sets by shifts). Only for integral states (whole free CU and BU, sizes powers of two
from 1), where every tolerance comparison of the one-row code is an exact floor; the
caller checks that, and N ≤ 63.

Imported only when the kernels are on: it needs numba.
"""

from __future__ import annotations

import math

import numpy as np

from dcsim.allocators.kernel_cache import njit
from dcsim.allocators.vc.lookahead_kernel import PER_VM, PER_VM_STRICT, reserve

_EPS = 1e-9
_ONE = np.uint64(1)
_ZERO = np.uint64(0)
_ALL = np.uint64(0xFFFF_FFFF_FFFF_FFFF)


@njit(cache=True)
def _upto(a):
    """The set {0..a} (empty for a < 0; a ≤ 63)."""
    if a < 0:
        return _ZERO
    if a >= 63:
        return _ALL
    return (_ONE << np.uint64(a + 1)) - _ONE


@njit(cache=True)
def _hose_set(c, n):
    """{x ≤ n : min(x, n − x) ≤ c}: the counts whose hose fits c VMs' worth (c whole)."""
    if c < 0:
        return _ZERO
    if 2 * c >= n:
        return _upto(n)
    return _upto(c) | (_upto(n) & ~_upto(n - c - 1))


@njit(cache=True)
def _bits(t, a):
    """A set as bits: ``t`` ≥ 0 the interval {0..t}, −1 empty, −2 the bits ``a``."""
    return a if t == -2 else _upto(t)


@njit(cache=True)
def _norm(a):
    """The (t, bits) form of bit set ``a``: an interval or empty as t, else t = −2."""
    if a == _ZERO:
        return -1, _ZERO
    if (a & (a + _ONE)) == _ZERO:  # {0..t}: a + 1 = 2**(t + 1), exactly a float
        return (63 if a == _ALL else math.frexp(float(a + _ONE))[1] - 2), a
    return -2, a


@njit(cache=True)
def _sum(ta, a, tb, b, n):
    """{x + y ≤ n : x ∈ A, y ∈ B} (the Minkowski sum, sums above n dropped), sets in the
    (t, bits) form of :func:`_bits`."""
    if ta == -1 or tb == -1:
        return -1, _ZERO
    if ta >= 0 and tb >= 0:  # {0..p} + {0..q} = {0..p + q}
        return min(ta + tb, n), _ZERO
    a = _bits(ta, a)
    b = _bits(tb, b)
    out = _ZERO
    y = 0
    while b != _ZERO and y <= n:
        if b & _ONE:
            out |= a << np.uint64(y)
        b >>= _ONE
        y += 1
    return _norm(out & _upto(n))


@njit(cache=True)
def _hose_cut(t, a, c, n):
    """Set (t, a) ∩ {x ≤ n : min(x, n − x) ≤ c}, the counts whose hose fits c VMs' worth."""
    if t == -1 or 2 * c >= n:
        return t, a
    if c < 0:
        return -1, _ZERO
    if t >= 0 and t < n - c:  # {0..t} ∩ ({0..c} ∪ {n − c..n})
        return min(t, c), _ZERO
    return _norm(_bits(t, a) & _hose_set(c, n))


@njit(cache=True)
def _has(a, x):
    return x >= 0 and (a >> np.uint64(x)) & _ONE == _ONE


@njit(cache=True)
def _embed(free, lf, n, s, b, mode, interval, H, sizes, uplink, child_start, top, feas, amt,
           suffix, m_out, touched):
    """Embed VC (n, s, b) in one state: fills ``m_out`` at ``touched[:count]`` and returns
    count, or -1 if OKTOPUS finds no embedding. ``top`` and ``feas`` (each node's feasible
    counts in the form of :func:`_bits`) and ``amt`` (H + 1, widest level), and ``suffix``
    (widest level + 1) are scratch."""
    n_hosts = sizes[0]
    inv_s = 1.0 / s
    inv_b = 1.0 / b
    total = 0
    for h in range(n_hosts):  # level 0; a single host with N slots is taken first
        slots = min(math.floor(free[h] * inv_s), n)  # ⌊free / s + 1e-9⌋: exact here
        up = lf[uplink[0, h]]
        if slots >= n and (mode != PER_VM_STRICT or n * b <= up + _EPS):
            m_out[h] = n
            touched[0] = h
            return 1
        total += slots
        c = math.floor(up * inv_b)  # x·b ≤ up + 1e-9 iff x ≤ ⌊up / b⌋ (whole up, b)
        if slots < 0:
            top[0, h] = -1
        elif interval or mode == PER_VM_STRICT:
            top[0, h] = max(min(c, slots), -1)
        elif mode == PER_VM:  # x < n VMs reserve x·b; all n (more than the slots) nothing
            top[0, h] = max(min(c, slots), -1)
        else:
            top[0, h], feas[0, h] = _hose_cut(slots, _ZERO, c, n)
    if total < n:
        return -1
    hit = -1
    level = 0
    for k in range(1, H + 1):
        for g in range(sizes[k]):
            t, a = 0, _ZERO  # {0}
            for ch in range(child_start[k, g], child_start[k, g + 1]):
                t, a = _sum(t, a, top[k - 1, ch], feas[k - 1, ch], n)
            if hit < 0 and (t >= n or (t == -2 and _has(a, n))):
                hit = g
            if k < H:
                top[k, g], feas[k, g] = _hose_cut(t, a, math.floor(lf[uplink[k, g]] * inv_b),
                                                  n)
        if hit >= 0:
            level = k
            break
    if hit < 0:
        return -1
    # the greedy split: each child, in index order, the most it can take that leaves the
    # rest feasible for the children after it
    for k in range(level + 1):
        for g in range(sizes[k]):
            amt[k, g] = 0
    amt[level, hit] = n
    lo, hi = hit, hit + 1  # the level's nodes that may hold VMs (contiguous)
    for k in range(level, 0, -1):
        for g in range(lo, hi):
            rem = amt[k, g]
            if rem == 0:
                continue
            first, last = child_start[k, g], child_start[k, g + 1]
            ts, a = 0, _ZERO  # what the children after each one take together
            suffix[last - first] = _upto(0)
            for ch in range(last - 1, first - 1, -1):
                ts, a = _sum(top[k - 1, ch], feas[k - 1, ch], ts, a, n)
                suffix[ch - first] = _bits(ts, a)
            for ch in range(first, last):
                x = rem
                own = _bits(top[k - 1, ch], feas[k - 1, ch])
                while x > 0 and not (_has(own, x) and _has(suffix[ch - first + 1], rem - x)):
                    x -= 1
                amt[k - 1, ch] = x
                rem -= x
        lo, hi = child_start[k, lo], child_start[k, hi]
    count = 0
    for h in range(lo, hi):
        if amt[0, h] > 0:
            m_out[h] = amt[0, h]
            touched[count] = h
            count += 1
    return count


@njit(cache=True)
def rollouts(cpu, lf, ns, ss, bs, gain, reward, mode, interval, H, sizes, parent, uplink,
             group, child_start):
    """Every row's lookahead, as :func:`dcsim.allocators.vc.kraken.kernel.rollouts`;
    ``child_start`` (H + 1, widest level + 1): where each level-k group's children start
    among level k − 1 (contiguous), then their number."""
    K = cpu.shape[0]
    n_hosts = sizes[0]
    width = sizes.max()
    top = np.zeros((H + 1, width), dtype=np.int64)
    feas = np.zeros((H + 1, width), dtype=np.uint64)
    amt = np.zeros((H + 1, width), dtype=np.int64)
    suffix = np.zeros(width + 1, dtype=np.uint64)
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
            count = _embed(free, links, n, s, b, mode, interval, H, sizes, uplink,
                           child_start, top, feas, amt, suffix, m_out, touched)
            if count >= 0:
                reserve(free, links, n, s, b, mode, H, sizes, group, uplink, m_out, touched,
                        count, mk)
                reward[r] += gain[j, r]
