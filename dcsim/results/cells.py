"""Numbers as every table dcsim prints shows them: ``dcsim run``'s headline table and
``dcsim report``'s tables and page (one formatter for both).

**One number format per cell.** A cell ``mean ± half-width`` shows the half-width of the
95 % interval rounded to 2 significant digits and the mean rounded to the same decimal
place, both in one notation: fixed (``0.9861 ± 0.0057``, ``2410 ± 150``) while the larger
of the two is between 0.001 and 100,000, else scientific with one exponent written on both
(``5.710e+06 ± 0.090e+06``), so each number still reads back with ``float()``. A clipped
interval (``mean [low, high] †``) takes its digits from the half-width of the interval it
shows. A mean without an interval (one seed, or the same value in every seed) keeps 3
decimals (3 significant digits when large): there is no interval to choose them from.
The files meant for programs (``stats.csv``, ``paired.csv``) hold the values unrounded.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

import numpy as np

#: a cell whose values are all equal
IDENTICAL = "identical in every seed"
#: the mark of a cell whose interval was clipped to the metric's range
CLIP_MARK = "†"

#: significant digits of a half-width
SIGNIFICANT = 2
#: fixed notation for magnitudes in [low, high); scientific outside
FIXED = (1e-3, 1e5)


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
    """A table cell from a row of :func:`~dcsim.results.stats.interval_stats`
    (:func:`~dcsim.report.describe`, :func:`~dcsim.report.paired`): ``mean ± half-width``
    (:func:`interval_text`); ``mean (identical in every seed)`` when every seed gave the
    same value; ``mean [low, high] †`` when the printed interval would leave the metric's
    range; the mean alone (``digits``
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


def number(v: float, digits: int = 3) -> str:
    """A value as a cell shows it: ``digits`` decimals, or significant digits when large."""
    return f"{v:.{digits}g}" if abs(v) >= 10 ** digits else f"{v:.{digits}f}"
