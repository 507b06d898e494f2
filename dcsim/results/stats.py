"""Summaries over seeds for reports: the mean and its 95 % Student-t interval."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats


def mean_ci(values: pd.Series, level: float = 0.95) -> tuple[float, float, int]:
    """(mean, half-width of the Student-t interval, n) over the non-missing values.

    The half-width is NaN with fewer than two values; the mean is NaN with none.
    """
    v = pd.Series(values).dropna().to_numpy(dtype=np.float64)
    if len(v) < 2:
        return (float(v.mean()) if len(v) else np.nan), np.nan, len(v)
    half = stats.t.ppf(0.5 + level / 2, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v))
    return float(v.mean()), float(half), len(v)


def ci_cell(values, digits: int = 2) -> str:
    """A table cell: ``mean ± half-width`` of the 95 % interval, the mean alone with one
    value, ``—`` with none."""
    m, h, n = mean_ci(pd.Series(values))
    if n == 0:
        return "—"
    return f"{m:.{digits}f}" if np.isnan(h) else f"{m:.{digits}f} ± {h:.{digits}f}"
