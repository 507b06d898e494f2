"""The Hawkes process: exact (time rescaling), at its stationary rate, self-exciting, the
same drawn at once or in batches, and refused where it is not stationary."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dcsim import ConfigError
from dcsim.workload import parse_workload
from pydantic import ValidationError
from scipy import stats

from dcsim_hawkes import HawkesArrivals

BURSTY = HawkesArrivals(mu=1.0, alpha=0.5, beta=1.0)   # branching ratio 0.5, rate 2


def compensator_gaps(p: HawkesArrivals, t: np.ndarray) -> np.ndarray:
    """Lambda(t_i) - Lambda(t_{i-1}) from 0 with no history: the integrated intensity
    between arrivals, computed from the definition (excitation decaying between them)."""
    out, last, e = np.empty(len(t)), 0.0, 0.0
    for i, ti in enumerate(t.tolist()):
        gap = ti - last
        out[i] = p.mu * gap + e / p.beta * (1.0 - math.exp(-p.beta * gap))
        e = e * math.exp(-p.beta * gap) + p.alpha
        last = ti
    return out


def test_the_simulation_is_exact_by_time_rescaling():
    """Time rescaling (Brown et al. 2002): the integrated intensity between the arrivals of
    an exact simulation is i.i.d. Exp(1). A Kolmogorov-Smirnov test of 20k gaps (seed 3)
    at level 1e-3; a Poisson stream of the same rate fails it by far."""
    t = BURSTY.times(np.random.default_rng(3), 20_000)
    assert stats.kstest(compensator_gaps(BURSTY, t), "expon").pvalue > 1e-3
    poisson = np.cumsum(np.random.default_rng(3).exponential(1 / BURSTY.rate, 20_000))
    assert stats.kstest(compensator_gaps(BURSTY, poisson), "expon").pvalue < 1e-6


@pytest.mark.parametrize(("process", "batch"), [
    (BURSTY, 4096), (BURSTY, 1), (HawkesArrivals(mu=2.0, alpha=3.0, beta=4.0), 4096),
    (HawkesArrivals(mu=0.5, alpha=0.0, beta=1.0), 4096),     # no excitation: Poisson
])
def test_the_long_run_rate_is_mu_over_one_minus_the_branching_ratio(process, batch):
    """N / T over 100k arrivals drawn in batches of ``batch`` (1: the excitation must carry
    from each arrival to the next, else the rate is mu) is mu / (1 - n) within 4 standard
    errors. The SE is the stationary Hawkes process's: Var N(T) ~ T mu / (1 - n)^3 (its
    Bartlett spectrum at 0), so SE(N/T) = sqrt(mu / (1 - n)^3 / T)."""
    n_ratio = process.alpha / process.beta
    assert process.rate == pytest.approx(process.mu / (1 - n_ratio))
    rng, stream, start, out = np.random.default_rng(11), process.stream(), 0.0, []
    for _ in range(100_000 // batch):
        t = stream(rng, batch, start)
        out.append(t)
        start = float(t[-1])
    t = np.concatenate(out)
    se = math.sqrt(process.mu / (1 - n_ratio) ** 3 / t[-1])
    assert abs(len(t) / t[-1] - process.rate) <= 4 * se


def test_it_clusters():
    """Counts in windows of 50 time units: a Poisson stream's variance / mean is 1, this
    one's tends to 1 / (1 - n)^2 = 4 for long windows (about 3.7 at 50); over 2000 windows
    it is above 2."""
    t = BURSTY.times(np.random.default_rng(5), 200_000)
    counts = np.bincount((t[t < 100_000] // 50).astype(int), minlength=2000)
    assert counts.var() / counts.mean() > 2.0


@pytest.mark.parametrize("pieces", [[1000], [1, 999], [250, 250, 500], [999, 1]])
def test_batches_drawn_in_pieces_are_the_draw_made_at_once(pieces):
    """Two uniforms per arrival, in order, and the excitation carried between pieces: the
    same seed gives the same times however a run cuts its batches."""
    whole = BURSTY.stream()(np.random.default_rng(7), 1000, 0.0)
    rng, stream, start, out = np.random.default_rng(7), BURSTY.stream(), 0.0, []
    for n in pieces:
        t = stream(rng, n, start)
        out.append(t)
        start = float(t[-1])
    assert np.array_equal(np.concatenate(out), whole)


def test_times_are_non_decreasing_and_after_start():
    t = HawkesArrivals(mu=3.0, alpha=9.0, beta=10.0).times(np.random.default_rng(2), 5000,
                                                          start=12.5)
    assert t[0] >= 12.5 and np.all(np.diff(t) >= 0)
    assert BURSTY.times(np.random.default_rng(2), 0).size == 0


def test_the_excitation_decays_between_a_stream_call_and_a_later_start():
    """A stream asked for arrivals after a later start than its last arrival lets the
    excitation decay over the gap: a long pause gives back the baseline rate's first gap."""
    rng = np.random.default_rng(9)
    stream = BURSTY.stream()
    stream(rng, 200, 0.0)
    assert stream.excitation > 0
    first = [BURSTY.stream()(np.random.default_rng(s), 1, 0.0)[0] for s in range(500)]
    later = []
    for s in range(500):
        st = BURSTY.stream()
        st.last, st.excitation = 0.0, 5.0
        later.append(st(np.random.default_rng(s), 1, 1e4)[0] - 1e4)
    assert np.allclose(first, later)   # e * exp(-1e4) is 0: the same draws, the same gaps


@pytest.mark.parametrize(("options", "field"), [
    ({"mu": 1, "alpha": 1, "beta": 1}, "alpha"),        # branching ratio 1
    ({"mu": 1, "alpha": 3, "beta": 2}, "alpha"),
    ({"mu": 1, "alpha": -1, "beta": 2}, "alpha"),
    ({"mu": 0, "alpha": 0.5, "beta": 1}, "mu"),
    ({"mu": 1, "alpha": 0.5, "beta": 0}, "beta"),
])
def test_a_non_stationary_or_bad_process_is_refused_naming_the_field(options, field):
    with pytest.raises(ValidationError) as e:
        HawkesArrivals(**options)
    assert e.value.errors()[0]["loc"] == (field,)
    spec = {"requests": 10, "arrival": {"process": "hawkes", **options},
            "demand": {"cpu": 1}, "duration": {"dist": "exponential", "mean": 1}}
    with pytest.raises(ConfigError, match=rf"^workload\.arrival\.{field}: "):
        parse_workload(spec)


def test_a_workload_selects_it_and_its_rate_sets_the_offered_load():
    spec = parse_workload({"requests": 10, "arrival": {"process": "hawkes", "mu": 1,
                                                       "alpha": 0.5, "beta": 1},
                           "demand": {"cpu": 1},
                           "duration": {"dist": "exponential", "offered_load": 0.5,
                                        "load_resource": "cpu"}})
    assert isinstance(spec.arrival, HawkesArrivals) and spec.arrival.rate == 2.0
