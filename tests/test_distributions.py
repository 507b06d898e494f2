"""Request distributions: sampling, exact means under modifiers, validation messages."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from dcsim.errors import ConfigError
from dcsim.workload.distributions import Constant, Empirical, parse_distribution

N = 200_000

KINDS = [
    {"dist": "constant", "value": 3.5},
    {"dist": "uniform", "low": 0.1, "high": 1.0},
    {"dist": "uniform", "low": 0.1, "high": 1.0, "integer": True},
    {"dist": "uniform_int", "low": 1, "high": 50},
    {"dist": "uniform_int", "low": 1, "high": 50, "min": 10.5, "max": 20, "mode": "clip"},
    {"dist": "exponential", "mean": 20},
    {"dist": "exponential", "mean": 20, "integer": True, "min": 3, "max": 60},
    {"dist": "exponential", "mean": 20, "min": 3, "max": 60},
    {"dist": "exponential", "mean": 20, "min": 3, "max": 60, "mode": "clip"},
    {"dist": "exponential", "mean": 20, "integer": True, "min": 3, "max": 60, "mode": "clip"},
    {"dist": "normal", "mean": 1, "std": 2, "min": 0},
    {"dist": "normal", "mean": 1, "std": 2, "min": 0, "integer": True, "mode": "clip"},
    {"dist": "lognormal", "mean": 5, "sigma": 1, "max": 8},
    {"dist": "lognormal", "mu": 1, "sigma": 0.5, "max": 8, "mode": "clip"},
    {"dist": "discrete", "values": [1, 2, 4, 8], "probs": [0.45, 0.3, 0.2, 0.05]},
    {"dist": "discrete", "values": [1, 2, 4, 8], "probs": [0.45, 0.3, 0.2, 0.05], "max": 4},
    {"dist": "empirical", "values": [1, 5, 9.5], "integer": True},
    # narrow truncations (< 10 % of the mass) are sampled without rejection
    {"dist": "exponential", "mean": 1, "min": 5, "max": 6},
    {"dist": "exponential", "mean": 1, "min": 8, "max": 9, "integer": True},
    {"dist": "normal", "mean": 0, "std": 1, "min": -5, "max": -3},
    {"dist": "discrete", "values": [1, 2, 3], "probs": [0.98, 0.01, 0.01], "min": 2},
]


@pytest.mark.parametrize("spec", KINDS, ids=lambda s: "-".join(map(str, s.values())))
def test_sample_mean_matches_exact_mean(spec):
    """For every kind and modifier, the mean of 200k draws is within 5 standard errors of
    mean()."""
    d = parse_distribution(spec, "x")
    x = d.sample(np.random.default_rng(7), N)
    assert x.dtype == np.float64 and x.shape == (N,)
    se = x.std() / math.sqrt(N)
    assert abs(x.mean() - d.mean()) <= 5 * se + 1e-12


def test_ahab_vm_count_mean_is_exact_enumeration():
    """AHAB's N (exponential mean 20, rounded, truncated to [3, 60]) has the renormalised
    integer-pmf mean."""
    d = parse_distribution({"dist": "exponential", "mean": 20, "integer": True, "min": 3,
                            "max": 60}, "n")
    k = np.arange(3, 61)
    pmf = stats.expon(scale=20).cdf(k + 0.5) - stats.expon(scale=20).cdf(k - 0.5)
    assert d.mean() == pytest.approx(float((k * pmf).sum() / pmf.sum()), rel=1e-12)
    x = d.sample(np.random.default_rng(1), 10_000)
    assert np.all(x == np.round(x)) and x.min() >= 3 and x.max() <= 60


def test_clipped_mean_matches_quadrature():
    """clip puts the tail masses on the bounds: mean = a F(a) + ∫ x f + b (1 - F(b))."""
    rv = stats.lognorm(s=0.5, scale=math.e)
    a, b = 1.0, 8.0
    expect = a * rv.cdf(a) + integrate.quad(lambda x: x * rv.pdf(x), a, b)[0] + b * rv.sf(b)
    d = parse_distribution({"dist": "lognormal", "mu": 1, "sigma": 0.5, "min": a, "max": b,
                            "mode": "clip"}, "x")
    assert d.mean() == pytest.approx(expect, rel=1e-9)


def test_clip_piles_mass_on_bounds_and_truncate_does_not():
    """clip clamps (a visible atom at max), truncate redraws (no atom)."""
    rng = np.random.default_rng(3)
    clip = parse_distribution({"dist": "exponential", "mean": 1, "max": 2, "mode": "clip"}, "x")
    trunc = parse_distribution({"dist": "exponential", "mean": 1, "max": 2}, "x")
    assert np.mean(clip.sample(rng, N) == 2.0) == pytest.approx(math.exp(-2), abs=0.005)
    assert np.mean(trunc.sample(rng, N) == 2.0) == 0.0


def test_integer_rounds_before_the_bounds_check():
    """With integer: true, 2.6 rounds to 3 and passes min: 3 (round half up)."""
    d = parse_distribution({"dist": "discrete", "values": [2.4, 2.6, 3.5], "integer": True,
                            "min": 3}, "x")
    assert set(d.sample(np.random.default_rng(0), 1000)) == {3.0, 4.0}
    assert d.mean() == pytest.approx(3.5)


@st.composite
def bounded_specs(draw):
    kind = draw(st.sampled_from(["uniform", "uniform_int", "exponential", "normal",
                                 "lognormal", "discrete", "empirical", "constant", "pareto",
                                 "weibull", "gamma"]))
    val = st.floats(-50, 50, allow_nan=False)
    spec: dict = {"dist": kind}
    if kind == "uniform":
        lo = draw(val)
        spec |= {"low": lo, "high": lo + draw(st.floats(0.01, 50))}
    elif kind == "uniform_int":
        lo = draw(st.integers(-50, 50))
        spec |= {"low": lo, "high": lo + draw(st.integers(0, 50))}
    elif kind == "exponential":
        spec["mean"] = draw(st.floats(0.1, 50))
    elif kind == "normal":
        spec |= {"mean": draw(val), "std": draw(st.floats(0.1, 20))}
    elif kind == "lognormal":
        spec |= {"mu": draw(st.floats(-2, 3)), "sigma": draw(st.floats(0.1, 1.5))}
    elif kind == "constant":
        spec["value"] = draw(val)
    elif kind in ("pareto", "weibull", "gamma"):
        spec |= {"shape": draw(st.floats(0.2, 5)), "scale": draw(st.floats(0.1, 20))}
    else:
        spec["values"] = draw(st.lists(val, min_size=1, max_size=6))
    lo = draw(val)
    spec |= {"min": lo, "max": lo + draw(st.floats(0, 60)),
             "mode": draw(st.sampled_from(["clip", "truncate"])), "integer": draw(st.booleans())}
    return spec


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bounded_specs(), st.integers(0, 2**32 - 1))
def test_bounded_samples_lie_within_bounds(spec, seed):
    """Every draw of any bounded distribution lies in [min, max], in either mode."""
    try:
        d = parse_distribution(spec, "x")
    except ConfigError:
        assume(False)  # an (almost) empty truncation is refused at parse time
    x = d.sample(np.random.default_rng(seed), 500)
    assert np.all(x >= spec["min"]) and np.all(x <= spec["max"])
    assert spec["min"] <= d.mean() <= spec["max"]


@pytest.mark.parametrize("spec, message", [
    ({"dist": "discrete", "values": [1, 2], "probs": [0.5, 0.6]}, "probs must sum to 1"),
    ({"dist": "discrete", "values": [1, 2], "probs": [1.0]}, "probs has 1 entries"),
    ({"dist": "discrete", "values": [1, 2], "probs": [1.5, -0.5]}, "non-negative"),
    ({"dist": "exponential", "mean": -1}, "workload.demand.cpu.mean: Input should be greater"),
    ({"dist": "exponential", "mean": 2, "shape": 1}, "workload.demand.cpu.shape: Extra"),
    ({"dist": "exponential", "mean": 2, "min": 5, "max": 4}, "min (5.0) is greater than max"),
    ({"dist": "uniform", "low": 0, "high": 1, "min": 2}, "range is empty"),
    ({"dist": "uniform_int", "low": 1, "high": 5, "min": 2.2, "max": 2.8}, "range is empty"),
    ({"dist": "poisson", "mean": 2}, "does not match any of the expected tags"),
    ({"mean": 2}, "missing 'dist'"),
    (True, "expected a number"),
    ("N*", "is not a number"),
])
def test_invalid_specs_name_the_field(spec, message):
    """Bad distributions raise ConfigError naming the YAML path and the reason."""
    with pytest.raises(ConfigError, match="workload.demand.cpu") as e:
        parse_distribution(spec, "workload.demand.cpu")
    assert message in str(e.value)


def test_shorthands():
    """A bare number is a constant; '2*N*S' is a product of attributes."""
    assert parse_distribution(4, "x") == Constant(dist="constant", value=4.0)
    p = parse_distribution("2*N * S", "x")
    assert (p.dist, p.of, p.factor) == ("product", ["N", "S"], 2.0)


def test_same_seed_same_draws():
    """Sampling depends only on the generator's seed."""
    d = parse_distribution({"dist": "normal", "mean": 0, "std": 1, "min": -1, "max": 2}, "x")
    a = d.sample(np.random.default_rng(42), 1000)
    b = d.sample(np.random.default_rng(42), 1000)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, d.sample(np.random.default_rng(43), 1000))


def test_memoised_truncation_follows_changed_fields():
    """sample() remembers the truncation mass, but not past a change of a field."""
    d = parse_distribution(
        {"dist": "exponential", "mean": 20, "integer": True, "min": 3, "max": 60}, "N")
    rng = np.random.default_rng(1)
    first = d.sample(rng, 5000)
    assert first.min() >= 3 and first.max() <= 60
    d.max = 5.0  # keeps far less mass: the memo must not reuse the old acceptance
    again = d.sample(rng, 5000)
    assert len(again) == 5000 and again.min() >= 3 and again.max() <= 5
    assert d._memo_accept() == pytest.approx(d.accept_probability())


@pytest.mark.parametrize("spec, target", [
    ({"dist": "exponential", "offered_load": 1}, 15.0),
    ({"dist": "exponential", "offered_load": 1, "integer": True, "min": 1, "max": 100}, 15.0),
    ({"dist": "uniform", "low": 1, "high": 3, "offered_load": 1, "max": 5}, 3.0),
    ({"dist": "constant", "offered_load": 1}, 7.0),
    ({"dist": "lognormal", "sigma": 1, "offered_load": 1, "max": 50}, 3.0),
])
def test_with_mean_hits_target_including_modifiers(spec, target):
    """A scalable kind solves its scale so the modified mean equals the target."""
    d = parse_distribution(spec, "x").with_mean(target)
    assert d.offered_load is None
    assert d.mean() == pytest.approx(target, rel=1e-9)


def test_with_mean_out_of_reach():
    """A target the bounds cannot reach is refused."""
    d = parse_distribution({"dist": "exponential", "offered_load": 1, "max": 10}, "x")
    with pytest.raises(ValueError, match="no scale gives mean 60"):
        d.with_mean(60.0)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_empirical_from_file_column(tmp_path, suffix):
    """empirical {path, column, scale} resamples one column of a CSV or Parquet file."""
    df = pd.DataFrame({"cores": [1.0, 2.0, 4.0, np.nan], "other": [0, 0, 0, 0]})
    path = tmp_path / f"t{suffix}"
    df.to_csv(path, index=False) if suffix == ".csv" else df.to_parquet(path)
    d = parse_distribution({"dist": "empirical", "path": str(path), "column": "cores",
                            "scale": 50}, "x")
    assert isinstance(d, Empirical)
    d = d.load()
    assert d.mean() == pytest.approx(50 * 7 / 3)
    assert set(d.sample(np.random.default_rng(0), 200)) == {50.0, 100.0, 200.0}
    bad = parse_distribution({"dist": "empirical", "path": str(path), "column": "cpu"}, "x")
    with pytest.raises(ConfigError, match="column 'cpu'"):
        bad.load()
