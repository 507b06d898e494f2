"""first_fit's scan compiled (numba; :mod:`dcsim.kernels`): the first server whose
two free columns reach both thresholds, stopping there instead of comparing every server.
The same comparisons as the numpy code (``column >= threshold``, False for NaN), so the
same index.

Imported only when the kernels are on: it needs numba.
"""

from __future__ import annotations

from dcsim.allocators.kernel_cache import njit


@njit(cache=True)
def first_fit_two(c0, c1, t0, t1):
    """The lowest i with ``c0[i] >= t0`` and ``c1[i] >= t1``, or -1."""
    for i in range(c0.shape[0]):
        if c0[i] >= t0 and c1[i] >= t1:
            return i
    return -1
