"""OKTOPUS's count sets as bits. Its feasible-count vectors (which of 0..N VMs a subtree can
hold) are kept as one ``uint64`` per node while N ≤ :data:`MAX_BITS_N`: bit x set ⇔ x VMs
fit. The Minkowski sum of two sets (:func:`sum_sets`) is then an OR of shifted copies, one
per element of the second operand, over every node of a level of every row at once. Exact
(no floating point), and far cheaper than per-row FFT convolutions."""

from __future__ import annotations

import numpy as np

from dcsim.allocators.vc.lookahead import hose_limit

#: Largest N whose counts 0..N fit one uint64 bit set.
MAX_BITS_N = 63
_ONE = np.uint64(1)
_53 = np.uint64(53)
_ALL = np.uint64(0xFFFF_FFFF_FFFF_FFFF)
_LOOP_FROM = 1500  # sum_sets: sets from which a loop over shifts beats one broadcast pass
_SHIFTS = np.arange(64, dtype=np.uint64)


def sum_sets(a: np.ndarray, b: np.ndarray, right: bool = False) -> np.ndarray:
    """Elementwise Minkowski sums {x + y : x ∈ a, y ∈ b} of bit sets, sums above 63 dropped.

    Cost grows with b's largest element. ``right``: a is a reflected set (bit 63 − x for
    x), and so is the result.
    """
    top = int(b.max()).bit_length() if b.size else 0  # b's largest element + 1
    # the broadcast shape, without np.broadcast_shapes' overhead when the shapes agree
    shape = a.shape if a.shape == b.shape else np.broadcast_shapes(a.shape, b.shape)
    if max(a.size, b.size) < _LOOP_FROM:  # few sets: every shift at once
        y = _SHIFTS[:top]
        shifted = a[..., None] >> y if right else a[..., None] << y
        return np.bitwise_or.reduce(shifted * ((b[..., None] >> y) & _ONE), axis=-1)
    out = np.zeros(shape, dtype=np.uint64)  # many: a pass per shift, in place
    pick = np.empty_like(out)
    moved = np.empty_like(out)
    shift = np.right_shift if right else np.left_shift
    for y in _SHIFTS[:top]:
        np.bitwise_and(np.right_shift(b, y, out=pick), _ONE, out=pick)
        shift(a, y, out=moved)
        np.bitwise_or(out, np.multiply(moved, pick, out=moved), out=out)
    return out


def high_bit(x: np.ndarray) -> np.ndarray:
    """The largest element of each non-empty bit set (int64), from its float exponent."""
    e = (x.astype(np.float64).view(np.int64) >> 52) - 1023
    if (x >> _53).any():  # rounding to float may carry up to the next power of 2
        e = np.minimum(e, 63)
        e -= (_ONE << e.astype(np.uint64)) > x
    return e


def _popcount_swar(x: np.ndarray) -> np.ndarray:
    """Set bits per uint64 (uint8) by the classic SWAR sums, for numpy without bitwise_count."""
    x = x - ((x >> _ONE) & np.uint64(0x5555_5555_5555_5555))
    m2 = np.uint64(0x3333_3333_3333_3333)
    x = (x & m2) + ((x >> np.uint64(2)) & m2)
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F_0F0F_0F0F_0F0F)
    return ((x * np.uint64(0x0101_0101_0101_0101)) >> np.uint64(56)).astype(np.uint8)


def hose_bits(c: np.ndarray, n: np.ndarray, cap: np.ndarray | None = None) -> np.ndarray:
    """Bit sets {x ≤ cap : x ≤ c or x ≥ n − c} from int64 hose limits c (−1..n, see
    :func:`hose_limit`), n (K, 1) and an optional int64 cap (default n; at most 63).

    Shift amounts of 64 or more give 0 in numpy (defined since numpy 1.18), so c = −1 or a
    negative cap need no special case: ``_ALL >> (63 − m)`` is {0..m}, empty for m < 0.
    """
    if cap is None:
        cap = n
        low = c
    else:
        low = np.minimum(c, cap)
    sets = _ALL >> (63 - low).view(np.uint64)  # 0..min(c, cap)
    sets |= (_ALL >> (63 - cap).view(np.uint64)) & (_ALL << (n - c).view(np.uint64))
    return sets  # ... or n − c..cap


def hose_sets(up: np.ndarray, n: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Bits x ∈ 0..n whose hose reservation min(x, n − x)·b fits ``up`` (+1e-9).

    ``up`` (K, m) residual bandwidth of m links per row; n (≤ 63), b (K,). The allowed
    y = min(x, n − x) are 0..c (:func:`hose_limit`): x ≤ c or x ≥ n − c.
    """
    c = hose_limit(up, n, b).astype(np.int64)
    return hose_bits(c, n[:, None].astype(np.int64))


#: Number of elements of each bit set (uint8): numpy's popcount ufunc where it has one.
popcount = getattr(np, "bitwise_count", _popcount_swar)
