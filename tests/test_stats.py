"""The mean and 95 % interval the report scripts print."""

from __future__ import annotations

import math

import pandas as pd

from dcsim.results.stats import mean_ci


def test_mean_ci_is_the_student_t_interval():
    # values 1, 2, 3: mean 2, sd 1, t(0.975, 2) = 4.302653; half = 4.302653 / sqrt(3)
    m, h, n = mean_ci(pd.Series([1.0, 2.0, None, 3.0]))
    assert (m, n) == (2.0, 3)
    assert math.isclose(h, 4.302652729749464 / math.sqrt(3), rel_tol=1e-12)


def test_mean_ci_with_too_few_values():
    m, h, n = mean_ci(pd.Series([0.5]))
    assert (m, n) == (0.5, 1) and math.isnan(h)
    m, h, n = mean_ci(pd.Series([], dtype=float))
    assert n == 0 and math.isnan(m) and math.isnan(h)


def test_ci_cell_formats_mean_and_half_width():
    from dcsim.results.stats import ci_cell

    assert ci_cell([]) == "—"
    assert ci_cell([0.5]) == "0.50"
    m, h, _ = mean_ci(pd.Series([1.0, 2.0, 3.0]))
    assert ci_cell([1.0, 2.0, 3.0], 3) == f"{m:.3f} ± {h:.3f}"
