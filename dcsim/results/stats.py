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
