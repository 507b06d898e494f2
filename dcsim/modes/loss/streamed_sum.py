"""numpy's sum of a float64 array, computed from the values read a block at a time.

``np.add.reduce`` of a contiguous float64 array sums pairwise: an array of more than 128
values is split at ``n2 = n // 2`` rounded down to a multiple of 8 and the two halves' sums
are added (``pairwise_sum`` in numpy's ``loops_utils.h.src``). Splitting the same way down
to blocks of at most :data:`LEAF` values, and summing each block with numpy, adds the same
numbers in the same order: the result is the same float, bit for bit, while only one
block is ever in memory. A run's means over millions of per-request values (the Nara
papers' acceptance and utilisation, the last 20 % and 50 % of requests) use it so that
their memory does not grow with the run (issue #47, item 9), with the values an in-memory
``array.mean()`` gives. ``tests/modes/loss/test_streamed_sum.py`` checks the identity on random
lengths and values, so a numpy that sums differently is caught.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

#: the most values read and summed at once (512 KiB of float64)
LEAF = 1 << 16


def streamed_sum(n: int, read: Callable[[int], np.ndarray], leaf: int | None = None) -> float:
    """``float(np.add.reduce(a))`` of the ``n`` float64 values that successive calls
    ``read(k)`` return, ``k`` values at a time in order (each call gets the next ``k``
    values, ``k <= leaf``, and the calls together ask for exactly ``n``). ``leaf`` is at
    least 128 (numpy sums up to 128 values in one unsplit loop); :data:`LEAF` by default."""
    leaf = LEAF if leaf is None else leaf
    if leaf < 128:
        raise ValueError(f"leaf must be at least 128 (numpy's block), got {leaf}")

    def pairwise(k: int) -> float:
        if k <= leaf:
            block = read(k)
            if block.shape != (k,) or block.dtype != np.float64:
                raise ValueError(f"read({k}) returned {block.dtype} of shape {block.shape}")
            return float(np.add.reduce(block))
        k2 = k // 2
        k2 -= k2 % 8
        return pairwise(k2) + pairwise(k - k2)

    return pairwise(n) if n > 0 else 0.0


def streamed_mean(n: int, read: Callable[[int], np.ndarray], leaf: int | None = None) -> float:
    """``float(a.mean())`` of the same values (NaN when ``n == 0``, without a warning)."""
    return streamed_sum(n, read, leaf) / n if n > 0 else math.nan
