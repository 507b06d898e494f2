"""Numbers as the report's tables show them, and the corrections for multiple comparisons.

**One number format per cell.** A cell ``mean ± half-width`` shows the half-width of the
95 % interval rounded to 2 significant digits and the mean rounded to the same decimal
place, both in one notation: fixed (``0.9861 ± 0.0057``, ``2410 ± 150``) while the larger
of the two is between 0.001 and 100,000, else scientific with one exponent written on both
(``5.710e+06 ± 0.090e+06``), so each number still reads back with ``float()``. A clipped
interval (``mean [low, high] †``) takes its digits from the half-width of the interval it
shows. A mean without an interval (one seed, or the same value in every seed) keeps 3
decimals (3 significant digits when large): there is no interval to choose them from.
The files meant for programs (``stats.csv``, ``paired.csv``) hold the values unrounded.

**Corrections** (:func:`adjust`): the p-values of a family of tests adjusted by Holm's
step-down procedure or by Bonferroni's; a test is significant when its adjusted p-value is
below 0.05. ``dcsim report --correction`` applies them to the paired differences, one
family per metric and sweep point: the allocators' differences against the baseline there.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

import numpy as np
from scipy import stats

from dcsim.results.stats import CLIP_MARK, IDENTICAL, number

#: significant digits of a half-width
SIGNIFICANT = 2
#: fixed notation for magnitudes in [low, high); scientific outside
FIXED = (1e-3, 1e5)
#: the corrections ``--correction`` offers
CORRECTIONS = ("none", "holm", "bonferroni")
#: the significance level of a test (the two-sided 95 % interval's)
ALPHA = 0.05


# ------------------------------------------------------------------------------ numbers
def decimal_place(half: float, sig: int = SIGNIFICANT) -> int:
    """The power of ten of the last digit kept when ``half`` (> 0) is rounded to ``sig``
    significant digits: -3 for 0.00567 (0.0057), 1 for 154 (150), -2 for 0.0996 (0.10)."""
    exponent = int(f"{half:.{sig - 1}e}".split("e")[1])  # after rounding: 0.0996 -> 1.0e-01
    return exponent - (sig - 1)


def _quantize(v: float, q: int) -> Decimal:
    """``v`` (its exact binary value) rounded half to even at 10**q, as ``format`` rounds."""
    return Decimal(v).quantize(Decimal(1).scaleb(q), rounding=ROUND_HALF_EVEN)


def _text(d: Decimal) -> str:
    s = f"{d:f}"
    return s[1:] if s.startswith("-") and d == 0 else s   # never "-0.00"


def render(values: Sequence[float], q: int) -> list[str]:
    """``values`` rounded to the decimal place ``q`` (the last digit kept is 10**q), all in
    one notation: fixed while the largest rounded magnitude is in :data:`FIXED`, else
    scientific with that magnitude's exponent on each (``5.710e+06``, ``0.090e+06``)."""
    rounded = [_quantize(float(v), q) for v in values]
    largest = max(abs(d) for d in rounded)
    if largest == 0 or Decimal(repr(FIXED[0])) <= largest < Decimal(repr(FIXED[1])):
        return [_text(d.quantize(Decimal(1)) if q > 0 else d) for d in rounded]
    e = largest.adjusted()   # the exponent of the rounded largest: 9.9996e5 at 10**2 is 1e6
    step = Decimal(1).scaleb(q - e)
    return [f"{_text(d.scaleb(-e).quantize(step))}e{e:+03d}" for d in rounded]


def interval_text(mean: float, half: float, sig: int = SIGNIFICANT) -> str:
    """``mean ± half`` (``half`` > 0) in one notation, the half-width to ``sig``
    significant digits and the mean to the same decimal place."""
    m, h = render([mean, half], decimal_place(half, sig))
    return f"{m} ± {h}"


def bracket_text(mean: float, low: float, high: float, sig: int = SIGNIFICANT) -> str:
    """``mean [low, high]`` with the digits of the interval's half-width ``(high − low)/2``
    to ``sig`` significant digits (3 decimals when it is empty)."""
    half = (high - low) / 2
    if not half > 0:
        return f"{number(mean)} [{number(low)}, {number(high)}]"
    m, lo, hi = render([mean, low, high], decimal_place(half, sig))
    return f"{m} [{lo}, {hi}]"


def shows_outside(row: Mapping[str, Any], sig: int = SIGNIFICANT) -> bool:
    """Whether ``row``'s interval (clipped to the metric's range), printed as ``mean ±
    half-width``, would show values outside that range (clipped by less than its last
    digit, it shows none)."""
    if not row.get("clipped", False):
        return False
    m, h = float(row["mean"]), float(row["half_width"])
    q = decimal_place(h, sig)
    up, top, down, bottom = render([m + h, float(row["ci_high"]), m - h,
                                    float(row["ci_low"])], q)
    return up != top or down != bottom


def significant(row: Mapping[str, Any]) -> bool:
    """The star of a paired row: ``significant`` (after the chosen correction), else
    ``excludes_zero``."""
    v = row.get("significant", row.get("excludes_zero", False))
    return bool(v) if v is not None and not (isinstance(v, float) and math.isnan(v)) \
        else False


def cell(row: Mapping[str, Any], digits: int = 3, flag: bool = False) -> str:
    """A table cell from a row of :func:`~dcsim.report.describe` or
    :func:`~dcsim.report.paired`: ``mean ± half-width`` (:func:`interval_text`); ``mean
    (identical in every seed)`` when every seed gave the same value; ``mean [low, high] †``
    when the printed interval would leave the metric's range; the mean alone (``digits``
    decimals) with one seed, ``—`` with none. ``flag``: `` *`` when the row is significant
    (:func:`significant`)."""
    m, h = row["mean"], row["half_width"]
    if not isinstance(m, float | np.floating) or math.isnan(m):
        return "—"
    if row.get("identical", False):
        return f"{number(m, digits)} ({IDENTICAL})"
    if h is None or math.isnan(h):
        return number(m, digits)
    if not h > 0:   # not identical, yet no spread to show
        text = f"{number(m, digits)} ± {number(h, digits)}"
    elif shows_outside(row):
        text = f"{bracket_text(m, float(row['ci_low']), float(row['ci_high']))} {CLIP_MARK}"
    else:
        text = interval_text(m, h)
    if flag and significant(row):
        text += " *"
    return text


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
