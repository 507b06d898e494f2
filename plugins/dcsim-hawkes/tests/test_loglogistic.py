"""The log-logistic distribution: dcsim's exact mean against the closed form and against
numerical integration, with and without min / max, and its draws."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dcsim import ConfigError
from dcsim.workload import parse_distribution
from scipy import integrate, stats

from dcsim_hawkes import LogLogistic


def dist(**options) -> LogLogistic:
    return parse_distribution({"dist": "loglogistic", **options}, "duration")


@pytest.mark.parametrize(("shape", "scale"), [(1.5, 1.0), (2.5, 3.0), (8.0, 0.2)])
def test_the_mean_is_the_closed_form(shape, scale):
    """E[X] = scale * (pi / shape) / sin(pi / shape)."""
    q = math.pi / shape
    assert dist(shape=shape, scale=scale).mean() == pytest.approx(scale * q / math.sin(q),
                                                                  rel=1e-12)


@pytest.mark.parametrize(("bounds", "mode"), [
    ({"min": 1.0, "max": 5.0}, "truncate"), ({"min": 20.0}, "truncate"),
    ({"max": 0.5}, "truncate"), ({"min": 1.0, "max": 5.0}, "clip"), ({"max": 4.0}, "clip"),
])
def test_a_bounded_mean_is_the_integral(bounds, mode):
    """min / max: the partial expectation in closed form (incomplete beta) against
    quadrature of x f(x) (the truncated law's, or the clipped one's with its two atoms)."""
    d = dist(shape=2.5, scale=2.0, mode=mode, **bounds)
    rv = stats.fisk(2.5, scale=2.0)
    lo, hi = bounds.get("min", 0.0), bounds.get("max", math.inf)
    body = integrate.quad(lambda x: x * rv.pdf(x), lo, hi, epsabs=0, epsrel=1e-11,
                          limit=200)[0]
    if mode == "truncate":
        want = body / (rv.cdf(hi) - rv.cdf(lo))
    else:
        want = body + lo * rv.cdf(lo) + (hi * rv.sf(hi) if hi < math.inf else 0.0)
    assert d.mean() == pytest.approx(want, rel=1e-8)


def test_a_rounded_mean_is_the_sum_of_its_pmf():
    """integer: true: P(round(X) = k) = F(k + .5) - F(k - .5), summed exactly by dcsim."""
    d = dist(shape=3.0, scale=4.0, integer=True, max=60)
    rv = stats.fisk(3.0, scale=4.0)
    k = np.arange(0, 61)
    pmf = rv.cdf(k + 0.5) - rv.cdf(np.maximum(k - 0.5, 0))
    assert d.mean() == pytest.approx(float((k * pmf).sum() / pmf.sum()), rel=1e-9)


@pytest.mark.parametrize("options", [{"shape": 3.0, "scale": 2.0},
                                     {"shape": 2.5, "scale": 2.0, "min": 1.0, "max": 5.0}])
def test_draws_have_the_law(options):
    """200k draws (seed 1): a KS test against the (truncated) law at level 1e-3, and the
    sample mean within 4 standard errors of mean()."""
    d = dist(**options)
    x = d.sample(np.random.default_rng(1), 200_000)
    rv = stats.fisk(options["shape"], scale=options["scale"])
    lo, hi = options.get("min", 0.0), options.get("max", math.inf)

    def cdf(v):
        return (rv.cdf(v) - rv.cdf(lo)) / (rv.cdf(hi) - rv.cdf(lo))

    assert stats.kstest(x, cdf).pvalue > 1e-3
    assert abs(x.mean() - d.mean()) <= 4 * x.std() / math.sqrt(len(x))


def test_offered_load_solves_the_scale():
    """On a duration, offered_load sets the scale: mean duration = load x capacity /
    (rate x mean demand) = 0.5 x 4 x 8 / (2 x 4) = 2, and the median (the scale) follows."""
    from dcsim.model.topologies import build_topology
    from dcsim.workload import build_source

    topo = build_topology({"kind": "flat", "servers": 4, "server": {"cpu": 8}})
    source = build_source({"requests": 10, "arrival": {"process": "poisson", "rate": 2},
                           "demand": {"cpu": 4},
                           "duration": {"dist": "loglogistic", "shape": 2.5,
                                        "offered_load": 0.5, "load_resource": "cpu"}}, topo)
    d = source.duration
    assert isinstance(d, LogLogistic) and d.mean() == pytest.approx(2.0, rel=1e-12)
    q = math.pi / 2.5
    assert d.scale == pytest.approx(2.0 / (q / math.sin(q)), rel=1e-12)


@pytest.mark.parametrize(("options", "field"), [
    ({"shape": 1.0, "scale": 1.0}, "shape"), ({"shape": 0.5, "scale": 1.0}, "shape"),
    ({"shape": 2.0, "scale": -1.0}, "scale"),
])
def test_bad_options_name_the_field(options, field):
    with pytest.raises(ConfigError, match=rf"^duration\.{field}: "):
        dist(**options)
