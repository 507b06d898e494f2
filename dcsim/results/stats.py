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


#: the metrics a finished `dcsim run` shows first, in this order, when its summary has them
HEADLINE = ("acceptance_ratio", "util_cpu", "util_mem", "mean_footprint", "mean_slowdown",
            "fr_after", "mean_fragment_rate", "migrations")


def headline_table(summary: pd.DataFrame, by: list[str], limit: int = 4) -> str:
    """A plain-text table of ``summary``: one row per combination of ``by`` (the allocator
    and the swept parameters, in their order of appearance), the mean ± 95 % interval over
    seeds of up to ``limit`` headline metrics, and the seed count."""
    metrics = [m for m in HEADLINE if m in summary.columns
               and pd.api.types.is_numeric_dtype(summary[m])
               and (summary[m].fillna(0) != 0).any()][:limit]  # nothing to say: left out
    by = [b for b in by if b in summary.columns]
    if not metrics or not by:
        return ""
    rows = [[*by, *metrics, "seeds"]]
    for key, g in summary.groupby(by, sort=False, observed=True):
        key = key if isinstance(key, tuple) else (key,)
        cells = [ci_cell(g[m], digits=3) for m in metrics]
        rows.append([*(str(k) for k in key), *cells, str(len(g))])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i < len(by) else c.rjust(w)
                       for i, (c, w) in enumerate(zip(r, widths, strict=True))).rstrip()
             for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
