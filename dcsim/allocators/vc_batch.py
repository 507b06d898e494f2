"""Helpers for embedding one VC in each of K independent states at once (AHAB's lookahead).

Rows are independent states; every helper works on (K, ...) arrays with per-row N, S, B.

Count sets as bits. OKTOPUS's feasible-count vectors (which of 0..N VMs a subtree can hold)
are kept as one ``uint64`` per node while N ≤ :data:`MAX_BITS_N`: bit x set ⇔ x VMs fit.
The Minkowski sum of two sets (:func:`sum_sets`) is then an OR of shifted copies, one per
element of the second operand, over every node of a level of every row at once. Exact (no
floating point), and far cheaper than per-row FFT convolutions.

Large temporaries are slow to allocate (fresh pages each time), so the helpers on
(K, hosts) arrays work in place where they can.
"""

from __future__ import annotations

import numpy as np

from dcsim.model.vc import UNLIMITED

#: Largest N whose counts 0..N fit one uint64 bit set.
MAX_BITS_N = 63
_ONE = np.uint64(1)
_ALL = np.uint64(0xFFFF_FFFF_FFFF_FFFF)
_EPS = 1e-9
_LOOP_FROM = 1500  # sum_sets: sets from which a loop over shifts beats one broadcast pass


def groupsum(x: np.ndarray, parent: np.ndarray, size: int) -> np.ndarray:
    """Row-wise float sums of x's columns into ``size`` groups (x: (K, m), parent: (m,)).

    The same sums, in the same order, as ``np.bincount(parent, weights=row)`` on each row.
    """
    k = x.shape[0]
    idx = (parent[None, :] + size * np.arange(k)[:, None]).ravel()
    w = x.ravel().astype(np.float64, copy=False)
    return np.bincount(idx, weights=w, minlength=k * size).reshape(k, size)


def slots_rows(free_cpu: np.ndarray, s: np.ndarray) -> np.ndarray:
    """:func:`dcsim.model.vc.vm_slots` per row: (K, hosts) VMs of size s[row] per host."""
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.floor(free_cpu / s[:, None] + 1e-9)
    q = np.where(s[:, None] > 0, q, UNLIMITED)
    return q.astype(np.int64)


def low_bits(m: np.ndarray) -> np.ndarray:
    """The set {0, ..., m − 1} as bits (m ≤ 0: empty; m ≥ 64: all 64)."""
    m = np.asarray(m, dtype=np.int64)
    sh = np.clip(m, 0, 63).astype(np.uint64)
    return np.where(m >= 64, _ALL, (_ONE << sh) - _ONE)


def has_bit(x: np.ndarray, i: np.ndarray) -> np.ndarray:
    """Whether set x contains i (0 ≤ i ≤ 63), elementwise with broadcasting."""
    return ((x >> np.asarray(i).astype(np.uint64)) & _ONE).astype(bool)


def sum_sets(a: np.ndarray, b: np.ndarray, right: bool = False) -> np.ndarray:
    """Elementwise Minkowski sums {x + y : x ∈ a, y ∈ b} of bit sets, sums above 63 dropped.

    Cost grows with b's largest element. ``right``: a is a reflected set (bit 63 − x for
    x), and so is the result.
    """
    top = int(b.max()).bit_length() if b.size else 0  # b's largest element + 1
    shape = np.broadcast_shapes(a.shape, b.shape)
    if np.prod(shape) < _LOOP_FROM:  # few sets: every shift at once
        y = np.arange(top, dtype=np.uint64)
        shifted = a[..., None] >> y if right else a[..., None] << y
        return np.bitwise_or.reduce(shifted * ((b[..., None] >> y) & _ONE), axis=-1)
    out = np.zeros(shape, dtype=np.uint64)  # many: a pass per shift, in place
    pick = np.empty_like(out)
    moved = np.empty_like(out)
    for i in range(top):
        y = np.uint64(i)
        np.bitwise_and(np.right_shift(b, y, out=pick), _ONE, out=pick)
        (np.right_shift if right else np.left_shift)(a, y, out=moved)
        np.bitwise_or(out, np.multiply(moved, pick, out=moved), out=out)
    return out


def high_bit(x: np.ndarray) -> np.ndarray:
    """The largest element of each non-empty bit set (int64), from its float exponent."""
    e = (x.astype(np.float64).view(np.int64) >> 52) - 1023
    if (x >> np.uint64(53)).any():  # rounding to float may carry up to the next power of 2
        e = np.minimum(e, 63)
        e -= (_ONE << e.astype(np.uint64)) > x
    return e


def hose_sets(up: np.ndarray, n: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Bits x ∈ 0..n whose hose reservation min(x, n − x)·b fits ``up`` (+1e-9).

    ``up`` (K, m) residual bandwidth of m links per row; n (≤ 63), b (K,). The product y·b
    grows with y, so the allowed y = min(x, n − x) are 0..c: x ≤ c or x ≥ n − c. c is found
    by division, then corrected by the exact comparison ``y * b <= up + 1e-9`` the one-row
    code makes. In place where it can: large temporaries are slow to allocate.
    """
    nn = n[:, None].astype(np.float64)
    bb = b[:, None]
    u = up + _EPS
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        c = np.divide(u, bb)
    np.floor(c, out=c)
    if not (bb > 0).all():
        c = np.where(bb > 0, c, nn)  # b = 0: every y fits (if y = 0 does)
    np.fmax(c, -1.0, out=c)  # NaN -> -1
    np.fmin(c, nn, out=c)
    np.copyto(c, -1.0, where=~(0.0 <= u))  # not even y = 0 (a hose of 0) fits
    # the division may be off by an ulp either way: one exact step corrects it
    t = np.multiply(c, bb)
    c -= (c >= 0) & ~(t <= u)
    np.multiply(np.add(c, 1.0, out=t), bb, out=t)
    c += (c < nn) & (t <= u)
    cu = np.fmax(c, 0.0).astype(np.uint64)
    nu = n[:, None].astype(np.uint64)
    sets = (_ALL >> (np.uint64(63) - cu)) | ((_ALL >> (np.uint64(63) - nu)) & (_ALL << (nu - cu)))
    sets[c < 0] = 0
    return sets
