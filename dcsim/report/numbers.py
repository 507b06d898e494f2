"""Numbers as the report's tables show them, and the corrections for multiple comparisons.

The cell format is :mod:`dcsim.results.cells`' (``dcsim run``'s table uses it too).

**Corrections** (:func:`adjust`): the p-values of a family of tests adjusted by Holm's
step-down procedure or by Bonferroni's; a test is significant when its adjusted p-value is
below 0.05. ``dcsim report --correction`` applies them to the paired differences, one
family per metric and sweep point: the allocators' differences against the baseline there.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats

from dcsim.results.cells import (  # noqa: F401  (the report's names for them)
    FIXED,
    SIGNIFICANT,
    bracket_text,
    cell,
    decimal_place,
    interval_text,
    render,
    shows_outside,
    significant,
)

#: the corrections ``--correction`` offers
CORRECTIONS = ("none", "holm", "bonferroni")
#: the significance level of a test (the two-sided 95 % interval's)
ALPHA = 0.05


# ------------------------------------------------------------------------------ tests
def p_values(mean, half, n, identical=None, level: float = 0.95) -> np.ndarray:
    """The two-sided p-value of Student's one-sample t-test of mean 0, from the mean, the
    half-width of its ``level`` interval and the count (the half-width is ``t · sd/√n``);
    NaN with fewer than 2 values, no spread, or ``identical`` (zero spread is no test)."""
    mean, half = np.asarray(mean, float), np.asarray(half, float)
    n = np.asarray(n, float)
    ok = (n >= 2) & np.isfinite(half) & (half > 0) & np.isfinite(mean)
    if identical is not None:
        ok &= ~np.asarray(identical, bool)
    df = np.maximum(n - 1, 1)
    se = np.where(ok, half, 1.0) / stats.t.ppf(0.5 + level / 2, df)
    p = 2 * stats.t.sf(np.abs(np.where(ok, mean, 0.0)) / se, df)
    return np.where(ok, p, np.nan)


def holm(p: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values: sorted ascending, the i-th smallest of m becomes
    ``max over j ≤ i of min(1, (m − j + 1) · p_(j))``; rejecting where the adjusted value
    is below α is Holm's procedure at level α. NaN (no test) stays NaN and is not one of
    the m."""
    p = np.asarray(p, float)
    out = np.full(p.shape, np.nan)
    idx = np.flatnonzero(~np.isnan(p))
    m = idx.size
    if not m:
        return out
    order = idx[np.argsort(p[idx], kind="stable")]
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    out[order] = np.maximum.accumulate(scaled)
    return out


def bonferroni(p: Sequence[float]) -> np.ndarray:
    """Bonferroni's adjusted p-values: ``min(1, m · p)`` over the m tests (NaN: no test)."""
    p = np.asarray(p, float)
    m = int((~np.isnan(p)).sum())
    return np.minimum(1.0, m * p)


def adjust(p: Sequence[float], method: str = "none") -> np.ndarray:
    """The p-values of one family adjusted by ``method`` (:data:`CORRECTIONS`)."""
    if method == "none":
        return np.asarray(p, float).copy()
    if method == "holm":
        return holm(p)
    if method == "bonferroni":
        return bonferroni(p)
    raise ValueError(f"no correction {method!r}; the corrections are {', '.join(CORRECTIONS)}")
