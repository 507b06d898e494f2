"""The report's numbers (issue #48, parts 5 and 6): one number format per cell, with its
digits from the interval, and the multiple-comparison corrections of the paired
differences (Holm by hand, and its properties)."""

from __future__ import annotations

import math
from decimal import Decimal

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dcsim.report import paired
from dcsim.report.numbers import (
    FIXED,
    adjust,
    bonferroni,
    bracket_text,
    cell,
    decimal_place,
    holm,
    interval_text,
    p_values,
)
from tests.helpers.cells import parts


# ------------------------------------------------------------------------------ by hand
@pytest.mark.parametrize("mean, half, text", [
    # the cells: one notation, one exponent, 2 significant digits of the half-width
    (5.71e6, 89580.347, "5.710e+06 ± 0.090e+06"),
    (-1.1e7, 414840.991, "-1.100e+07 ± 0.041e+07"),
    (0.9861, 0.0057, "0.9861 ± 0.0057"),
    (0.6, 0.24841377118, "0.60 ± 0.25"),
    (2410.0, 154.0, "2410 ± 150"),          # rounded to tens: no digit that is noise
    (0.5, 0.0996, "0.50 ± 0.10"),           # 0.0996 rounds to 0.10: still 2 digits
    (52340.0, 120.5, "52340 ± 120"),
    (1e-7, 3e-8, "1.00e-07 ± 0.30e-07"),
    (-0.0001, 0.02, "0.000 ± 0.020"),       # never "-0.000"
    (-3.2e-5, 4e-4, "-0.3e-04 ± 4.0e-04"),
])
def test_interval_cells_by_hand(mean, half, text):
    assert interval_text(mean, half) == text


def test_decimal_place():
    assert decimal_place(0.00567) == -4 and decimal_place(154) == 1
    assert decimal_place(0.0996) == -2 and decimal_place(1.0) == -1
    assert decimal_place(9.96) == 0   # 10: the 2 digits are "10"


def test_cells_of_a_row():
    row = {"mean": 0.55, "half_width": stats.t.ppf(0.975, 1) * 0.35, "ci_low": 0.0,
           "ci_high": 1.0, "clipped": True, "identical": False}
    # a clipped interval takes its digits from the interval it shows, (1 − 0) / 2
    assert cell(row) == "0.55 [0.00, 1.00] †"
    assert bracket_text(0.583, 0.042, 1.0) == "0.58 [0.04, 1.00]"
    # identical in every seed, one seed, none: the mean alone, 3 decimals
    assert cell({"mean": -0.004, "half_width": 0.0, "identical": True}) == \
        "-0.004 (identical in every seed)"
    assert cell({"mean": 0.3, "half_width": float("nan")}) == "0.300"
    assert cell({"mean": float("nan"), "half_width": float("nan")}) == "—"
    # the star of a significant difference stays, after the correction when there is one
    sig = {"mean": 0.0146, "half_width": 0.00796, "ci_low": 0.0067, "ci_high": 0.0226,
           "excludes_zero": True, "significant": False}
    assert cell(sig, flag=True) == "0.0146 ± 0.0080"
    assert cell({**sig, "significant": True}, flag=True) == "0.0146 ± 0.0080 *"
    assert cell({k: v for k, v in sig.items() if k != "significant"}, flag=True) \
        == "0.0146 ± 0.0080 *"
    # clipped by less than its last digit: the interval shows nothing outside the range
    assert cell({"mean": 0.9, "half_width": 0.0412, "ci_low": 0.8588, "ci_high": 0.9412,
                 "clipped": True}) == "0.900 ± 0.041"


# ------------------------------------------------------------------------------ properties
means = st.floats(min_value=-1e12, max_value=1e12, allow_nan=False)
halves = st.floats(min_value=1e-12, max_value=1e12, allow_nan=False)


@settings(max_examples=400, deadline=None)
@given(means, halves)
def test_one_number_format_per_cell(mean, half):
    text = interval_text(mean, half)
    (m, m_dec, m_exp), (h, h_dec, h_exp) = parts(text)
    # one notation: the same exponent (or none) and the same decimals on both
    assert m_exp == h_exp and m_dec == h_dec, text
    q = decimal_place(half)
    # the half-width has 2 significant digits: 10..99 units of its last place
    units = h.scaleb(-q)
    assert units == units.to_integral_value() and 10 <= units <= 99, (text, q)
    # both end at that place: the mean is rounded to the half-width's decimal place
    step = Decimal(1).scaleb(q)
    assert (m / step) == (m / step).to_integral_value(), (text, q)
    # read back, each is within half a unit of its last place of the value
    tol = 0.5 * 10.0 ** q * (1 + 1e-9)
    assert abs(float(m) - mean) <= tol + 1e-9 * abs(mean), text
    assert abs(float(h) - half) <= tol, text
    # fixed notation exactly when the larger rounded magnitude is in FIXED
    largest = max(abs(float(m)), float(h))
    assert (m_exp == "") == (FIXED[0] <= largest < FIXED[1]), text


@settings(max_examples=200, deadline=None)
@given(st.floats(min_value=0, max_value=1), st.floats(min_value=0, max_value=1),
       st.floats(min_value=0, max_value=1))
def test_a_bracket_shares_one_format(a, b, c):
    low, mean, high = sorted([a, b, c])
    if not high - low > 1e-9:
        return
    got = parts(bracket_text(mean, low, high))
    assert len({(d, e) for _v, d, e in got}) == 1
    q = decimal_place((high - low) / 2)
    for (v, _d, _e), x in zip(got, (mean, low, high), strict=True):
        assert abs(float(v) - x) <= 0.5 * 10.0 ** q * (1 + 1e-9) + 1e-15


# ------------------------------------------------------------------------------ Holm
def test_holm_by_hand():
    p = [0.01, 0.04, 0.03, 0.005]
    # sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1: 0.02, 0.03, 0.06, 0.04 -> running
    # maximum 0.02, 0.03, 0.06, 0.06
    assert holm(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert list(holm(p) < 0.05) == [True, False, False, True]
    assert bonferroni(p) == pytest.approx([0.04, 0.16, 0.12, 0.02])
    # Holm rejects what Bonferroni does and more: 0.012 and 0.02 of three
    p = [0.012, 0.02, 0.5]
    assert holm(p) == pytest.approx([0.036, 0.04, 0.5])
    assert list(holm(p) < 0.05) == [True, True, False]
    assert list(bonferroni(p) < 0.05) == [True, False, False]
    # no test (NaN) is not one of the family
    assert list(holm([0.02, np.nan, 0.04])[[0, 2]]) == pytest.approx([0.04, 0.04])
    assert np.isnan(holm([0.02, np.nan, 0.04])[1])
    assert adjust([0.3], "none") == pytest.approx([0.3]) and len(holm([])) == 0
    with pytest.raises(ValueError, match="the corrections are none, holm, bonferroni"):
        adjust([0.1], "sidak")


pvalues = st.lists(st.floats(min_value=0, max_value=1), min_size=1, max_size=12)


@settings(max_examples=300, deadline=None)
@given(pvalues)
def test_holms_properties(p):
    a, b = holm(p), bonferroni(p)
    p = np.asarray(p)
    assert np.all(a >= p - 1e-15) and np.all(a <= 1.0)       # never below the raw p
    assert np.all(a <= b + 1e-15)                             # never above Bonferroni's
    order = np.argsort(p, kind="stable")                      # monotone in the raw p
    assert np.all(np.diff(a[order]) >= -1e-15)
    # step-down: rejected at 0.05 exactly the smallest k with p_(i) <= 0.05 / (m - i + 1)
    m, k = len(p), 0
    while k < m and p[order[k]] <= 0.05 / (m - k) * (1 - 1e-12):
        k += 1
    assert set(np.flatnonzero(a < 0.05)) >= set(order[:k])


@settings(max_examples=200, deadline=None)
@given(pvalues, st.integers(min_value=0, max_value=11), st.floats(min_value=0, max_value=1))
def test_holm_is_monotone_in_each_p_value(p, i, factor):
    """Lowering one p-value lowers no adjusted value, so it takes away no rejection."""
    i %= len(p)
    lower = list(p)
    lower[i] *= factor
    assert np.all(holm(lower) <= holm(p) + 1e-15)


# ------------------------------------------------------------------------------ paired
def summary() -> pd.DataFrame:
    """Three allocators against base at two points, 4 seeds: up clearly above (p ~ 1e-4),
    near above (p ~ 0.044), flat around 0."""
    rows = []
    diff = {"up": [0.05, 0.06, 0.055, 0.052], "near": [0.01, 0.03, 0.008, 0.02],
            "flat": [0.01, -0.01, 0.02, -0.015]}
    for load in (1, 2):
        for s in range(4):
            base = 0.5 + 0.1 * s
            rows.append({"allocator": "base", "seed": s, "load": load, "m": base})
            for a, d in diff.items():
                rows.append({"allocator": a, "seed": s, "load": load, "m": base + d[s]})
    return pd.DataFrame(rows)


def test_paired_p_values_are_the_t_tests_and_holm_is_per_point():
    p = paired(summary(), "m", "base", ["load"], bounds=None, correction="holm")
    for a in ("up", "near", "flat"):
        r = p[(p["allocator"] == a) & (p["load"] == 1)].iloc[0]
        d = summary().pipe(lambda f: f[f["load"] == 1])
        x = d[d["allocator"] == a]["m"].to_numpy() - d[d["allocator"] == "base"]["m"].to_numpy()
        assert r["p_value"] == pytest.approx(stats.ttest_1samp(x, 0).pvalue, rel=1e-9)
        # the interval and the uncorrected test agree
        assert bool(r["excludes_zero"]) == (r["p_value"] < 0.05)
    at1 = p[p["load"] == 1].set_index("allocator")
    assert list(at1["p_adjusted"]) == pytest.approx(list(holm(at1["p_value"])))
    assert at1.loc["near", "p_value"] < 0.05 and at1.loc["near", "excludes_zero"]
    assert at1.loc["near", "p_adjusted"] > 0.05 and not at1.loc["near", "significant"]
    assert at1.loc["up", "significant"] and not at1.loc["flat", "significant"]
    # without a correction, significant is excludes_zero
    p0 = paired(summary(), "m", "base", ["load"], bounds=None)
    assert (p0["significant"] == p0["excludes_zero"]).all()
    assert (p0["p_adjusted"] == p0["p_value"]).all()


def test_p_values_of_what_has_no_test_are_missing():
    p = p_values([0.1, 0.1, 0.1, 0.1], [0.05, float("nan"), 0.0, 0.05], [3, 1, 3, 3],
                 [False, False, False, True])
    assert not math.isnan(p[0]) and np.isnan(p[1:]).all()
