"""Heavy-tailed distributions (issue #38, item 4): pareto, weibull, gamma (scipy's shape and
scale) and lognormal by mean and cv, drawn with numpy and checked against scipy.stats."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dcsim.errors import ConfigError
from dcsim.workload.distributions import parse_distribution

N = 400_000


def scipy_rv(spec: dict):
    """The scipy.stats frozen law a spec means (scipy's parametrisation, loc 0)."""
    kind = spec["dist"]
    if kind == "pareto":
        return stats.pareto(b=spec["shape"], scale=spec["scale"])
    if kind == "weibull":
        return stats.weibull_min(c=spec["shape"], scale=spec["scale"])
    if kind == "gamma":
        return stats.gamma(a=spec["shape"], scale=spec["scale"])
    sigma = math.sqrt(math.log1p(spec["cv"] ** 2))
    return stats.lognorm(s=sigma, scale=spec["mean"] * math.exp(-sigma**2 / 2))


SPECS = [
    {"dist": "pareto", "shape": 4.5, "scale": 2.0},
    {"dist": "pareto", "shape": 2.5, "scale": 3.0},  # finite variance, infinite 4th moment
    {"dist": "pareto", "shape": 1.5, "scale": 1.0},  # infinite variance
    {"dist": "pareto", "shape": 0.9, "scale": 1.0},  # infinite mean
    {"dist": "weibull", "shape": 0.5, "scale": 3.0},
    {"dist": "weibull", "shape": 2.0, "scale": 10.0},
    {"dist": "gamma", "shape": 0.3, "scale": 10.0},
    {"dist": "gamma", "shape": 3.0, "scale": 0.5},
    {"dist": "lognormal", "mean": 5.0, "cv": 1.5},
    {"dist": "lognormal", "mean": 0.2, "cv": 0.3},
]


def _id(spec: dict) -> str:
    return "-".join(str(v) for v in spec.values())


@pytest.mark.parametrize("spec", SPECS, ids=_id)
def test_moments_match_scipy(spec):
    """The sample mean and variance of 400k draws (seed 11) match scipy's, and mean() equals
    scipy's mean. Tolerances: 5 standard errors, the mean's SE sqrt(var / n) and the variance's
    sqrt((mu4 - var**2) / n) = var sqrt((excess kurtosis + 2) / n) from scipy's own moments;
    a moment whose estimator has no finite SE (variance or fourth moment infinite) is not
    compared (the KS test below still checks the law)."""
    rv = scipy_rv(spec)
    d = parse_distribution(spec, "x")
    mean, var, _, kurt = (float(m) for m in rv.stats(moments="mvsk"))
    if math.isfinite(mean):
        assert d.mean() == pytest.approx(mean, rel=1e-12)
    else:
        assert d.mean() == math.inf
    x = d.sample(np.random.default_rng(11), N)
    assert x.dtype == np.float64 and x.shape == (N,)
    if math.isfinite(var):
        assert abs(x.mean() - mean) <= 5 * math.sqrt(var / N)
    if math.isfinite(kurt):
        assert abs(x.var() - var) <= 5 * var * math.sqrt((kurt + 2) / N)


@pytest.mark.parametrize("spec", SPECS, ids=_id)
def test_draws_follow_scipys_law(spec):
    """Kolmogorov-Smirnov against scipy's cdf (seed 5, 20k draws): p above 0.001."""
    x = parse_distribution(spec, "x").sample(np.random.default_rng(5), 20_000)
    assert stats.kstest(x, scipy_rv(spec).cdf).pvalue > 1e-3


def test_pareto_is_the_classical_one_with_support_from_scale():
    """numpy's pareto is the Lomax law: dcsim draws scale * (1 + lomax), support x >= scale,
    and P(X > x) = (scale / x) ** shape."""
    d = parse_distribution({"dist": "pareto", "shape": 2.0, "scale": 3.0}, "x")
    x = d.sample(np.random.default_rng(0), 100_000)
    assert x.min() >= 3.0 and d.lower_bound() == 3.0 and d.upper_bound() == math.inf
    lomax = np.random.default_rng(0).pareto(2.0, 100_000)
    np.testing.assert_allclose(x, 3.0 * (1.0 + lomax), rtol=1e-15)
    assert np.mean(x > 6.0) == pytest.approx(0.25, abs=0.005)


@pytest.mark.parametrize("spec", [
    {"dist": "pareto", "shape": 1.5, "scale": 1.0, "min": 2, "max": 40},
    {"dist": "pareto", "shape": 0.9, "scale": 1.0, "max": 1000},
    {"dist": "pareto", "shape": 1.0, "scale": 2.0, "max": 50},
    {"dist": "pareto", "shape": 2.5, "scale": 1.0, "min": 100},  # narrow: no rejection
    {"dist": "weibull", "shape": 0.5, "scale": 3.0, "min": 1, "max": 20},
    {"dist": "weibull", "shape": 0.5, "scale": 3.0, "min": 200},
    {"dist": "gamma", "shape": 0.3, "scale": 10.0, "max": 0.5},
    {"dist": "gamma", "shape": 3.0, "scale": 0.5, "min": 3},
    {"dist": "lognormal", "mean": 5.0, "cv": 1.5, "max": 30},
], ids=_id)
def test_truncated_mean_is_scipys_conditional_mean(spec):
    """truncate: mean() is scipy's E[X | min <= X <= max] (quadrature, rel 1e-6); 200k draws
    (seed 2) all lie in range and their mean is within 5 SE of it."""
    d = parse_distribution(spec, "x")
    rv = scipy_rv(spec)
    lo, hi = spec.get("min", rv.support()[0]), spec.get("max", math.inf)
    expect = rv.expect(lambda v: v, lb=lo, ub=hi, conditional=True)
    assert d.mean() == pytest.approx(expect, rel=1e-6)
    x = d.sample(np.random.default_rng(2), 200_000)
    assert x.min() >= lo and x.max() <= hi
    assert abs(x.mean() - d.mean()) <= 5 * x.std() / math.sqrt(len(x))


def test_clipped_and_rounded_heavy_tails_keep_exact_means():
    """clip and integer work as for the older kinds: clip piles the tail on max, and the
    rounded mean is the exact pmf sum."""
    d = parse_distribution({"dist": "pareto", "shape": 1.2, "scale": 1.0, "max": 10,
                            "mode": "clip"}, "x")
    rv = stats.pareto(1.2)
    expect = rv.expect(lambda v: v, lb=1, ub=10) + 10 * rv.sf(10)
    assert d.mean() == pytest.approx(expect, rel=1e-9)
    g = parse_distribution({"dist": "gamma", "shape": 2.0, "scale": 3.0, "integer": True}, "x")
    k = np.arange(0, 400)
    pmf = stats.gamma(2, scale=3).cdf(k + 0.5) - stats.gamma(2, scale=3).cdf(k - 0.5)
    assert g.mean() == pytest.approx(float((k * pmf).sum()), rel=1e-9)


def test_lognormal_by_mean_and_cv():
    """cv is the values' std / mean: {mean, cv} is {mean, sigma = sqrt(log(1 + cv**2))}."""
    a = parse_distribution({"dist": "lognormal", "mean": 4.0, "cv": 0.5}, "x")
    b = parse_distribution({"dist": "lognormal", "mean": 4.0,
                            "sigma": math.sqrt(math.log(1.25))}, "x")
    ra, rb = np.random.default_rng(3), np.random.default_rng(3)
    np.testing.assert_allclose(a.sample(ra, 1000), b.sample(rb, 1000), rtol=1e-12)
    x = a.sample(np.random.default_rng(4), N)
    assert x.std() / x.mean() == pytest.approx(0.5, rel=0.01)


@pytest.mark.parametrize("spec, target", [
    ({"dist": "pareto", "shape": 2.5, "offered_load": 1}, 7.0),
    ({"dist": "pareto", "shape": 0.8, "offered_load": 1, "max": 100}, 5.0),
    ({"dist": "weibull", "shape": 0.5, "offered_load": 1, "max": 500}, 12.0),
    ({"dist": "gamma", "shape": 0.4, "offered_load": 1, "integer": True, "min": 1}, 9.0),
    ({"dist": "lognormal", "cv": 3, "offered_load": 1}, 2.0),
])
def test_offered_load_solves_the_scale(spec, target):
    """offered_load replaces scale (mean for lognormal): the solved mean, modifiers included,
    is the target, and the shape (cv) is kept."""
    d = parse_distribution(spec, "x").with_mean(target)
    assert d.offered_load is None and d.mean() == pytest.approx(target, rel=1e-9)
    assert getattr(d, "shape", None) == spec.get("shape")


def test_offered_load_needs_a_finite_mean():
    # refused where the section is read, not when the run resolves the scale
    with pytest.raises(ConfigError, match="x: offered_load needs a finite mean: shape 1.0 "
                                          "gives an infinite one"):
        parse_distribution({"dist": "pareto", "shape": 1.0, "offered_load": 1}, "x")


@pytest.mark.parametrize("spec", [{"dist": "lognormal", "mu": 1000, "sigma": 1},
                                  {"dist": "lognormal", "mean": 1, "cv": 1e300},
                                  {"dist": "weibull", "shape": 0.002, "offered_load": 0.5}])
def test_parameters_that_overflow_a_float_are_one_line(spec):
    with pytest.raises(ConfigError, match="x: its parameters overflow a float"):
        parse_distribution(spec, "x")


@pytest.mark.parametrize("spec, message", [
    ({"dist": "pareto", "shape": -1, "scale": 1}, "workload.duration.shape: Input should be "
                                                  "greater than 0"),
    ({"dist": "weibull", "shape": 0, "scale": 1}, "workload.duration.shape: Input should be "
                                                  "greater than 0"),
    ({"dist": "gamma", "shape": 1, "scale": -2}, "workload.duration.scale: Input should be "
                                                 "greater than 0"),
    ({"dist": "gamma", "scale": 2}, "workload.duration.shape: Field required"),
    ({"dist": "pareto", "shape": 2}, "give exactly one of 'scale' or 'offered_load'"),
    ({"dist": "weibull", "shape": 2, "scale": 1, "offered_load": 1},
     "give exactly one of 'scale' or 'offered_load'"),
    ({"dist": "pareto", "shape": 2, "scale": 1, "loc": 1}, "workload.duration.loc: Extra"),
    ({"dist": "pareto", "shape": 2, "scale": 5, "max": 4}, "range is empty"),
    ({"dist": "lognormal", "mean": 2, "cv": 1, "sigma": 1}, "exactly one of 'sigma' or 'cv'"),
    ({"dist": "lognormal", "mean": 2}, "exactly one of 'sigma' or 'cv'"),
    ({"dist": "lognormal", "mean": 2, "cv": -1}, "workload.duration.cv: Input should be "
                                                 "greater than 0"),
])
def test_bad_heavy_tails_name_the_field(spec, message):
    with pytest.raises(ConfigError, match="workload.duration") as e:
        parse_distribution(spec, "workload.duration")
    assert message in str(e.value)
