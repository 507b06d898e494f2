"""Arrivals that vary in time (issue #38, item 3): diurnal, nhpp (rate table), trace_rate
(a rate curve estimated from a trace) and mmpp (bursts). Statistical tests use fixed seeds and
say their tolerance; the processes are checked against the integrated rate they declare."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from dcsim.errors import ConfigError
from dcsim.model.topology import Topology
from dcsim.workload import (
    DiurnalArrivals,
    MMPPArrivals,
    PiecewiseArrivals,
    PoissonArrivals,
    TraceRateArrivals,
    build_source,
    parse_workload,
)


def topology() -> Topology:
    g = nx.Graph()
    g.add_node("sw", kind="switch", tier=1)
    for i in range(4):
        g.add_node(f"h{i}", kind="server", cpu=8.0, mem=16.0)
        g.add_edge("sw", f"h{i}", capacity=10.0)
    return Topology.from_graph(g)


def run_times(process, rng, horizon: float, batch: int = 4096) -> np.ndarray:
    """Every arrival before ``horizon`` of one run, drawn in batches as a run draws them."""
    times, start, out = process.stream(), 0.0, []
    while start < horizon:
        t = times(rng, batch, start)
        out.append(t)
        start = float(t[-1])
    t = np.concatenate(out)
    return t[t < horizon]


def workload(arrival: dict, requests: int = 50) -> dict:
    return {"requests": requests, "arrival": arrival,
            "demand": {"cpu": {"dist": "uniform_int", "low": 1, "high": 4}},
            "duration": {"dist": "exponential", "mean": 2}}


DIURNAL = DiurnalArrivals(mean=10, amplitude=8, period=100, peak=30)
TABLE = PiecewiseArrivals(times=[0, 10, 25, 40], rates=[2, 0, 30, 5], period=60)


def trace_rate(tmp_path) -> TraceRateArrivals:
    """A rate curve estimated from a 'trace': 3 busy bins, one quiet, one empty."""
    arrivals = np.concatenate([np.linspace(100, 109.9, 40), np.linspace(110, 119.9, 80),
                               np.linspace(120, 129.9, 10), np.linspace(140, 149.9, 30)])
    pd.DataFrame({"arrival": arrivals}).to_csv(tmp_path / "trace.csv", index=False)
    return TraceRateArrivals(path=str(tmp_path / "trace.csv"), bin=10).load()


# ---------------------------------------------------------------------- NHPP: counts
@pytest.mark.parametrize("kind", ["diurnal", "table", "trace_rate"])
def test_nhpp_counts_match_the_integrated_rate(kind, tmp_path):
    """Counts in the window [a, b) of each of R = 400 periods of one run (independent
    Poisson(Λ(b) - Λ(a)) by independent increments; seed 1): their mean is within 4 standard
    errors sqrt(Λ / R) of Λ(b) - Λ(a), and the dispersion statistic (R - 1) s² / Λ lies in the
    central 99.8 % of chi-square(R - 1) (counts are Poisson, not over- or under-dispersed)."""
    proc = {"diurnal": DIURNAL, "table": TABLE, "trace_rate": None}[kind] or trace_rate(
        tmp_path)
    period = {"diurnal": 100.0, "table": 60.0, "trace_rate": 50.0}[kind]
    a, b = 0.13 * period, 0.71 * period
    R = 400
    t = run_times(proc, np.random.default_rng(1), R * period)
    phase, k = np.mod(t, period), np.floor(t / period).astype(int)
    counts = np.bincount(k[(phase >= a) & (phase < b)], minlength=R)[:R]
    lam = integrate.quad(lambda u: float(proc.rate_at(u)), a, b, limit=500,
                         points=np.linspace(a, b, 60)[1:-1])[0]  # Λ(b) - Λ(a), not the code's
    assert lam > 5 and float(proc.cumulative(b) - proc.cumulative(a)) == pytest.approx(
        lam, rel=1e-6)
    assert abs(counts.mean() - lam) <= 4 * math.sqrt(lam / R)
    stat = (R - 1) * counts.var(ddof=1) / lam
    assert stats.chi2(R - 1).ppf(0.001) < stat < stats.chi2(R - 1).ppf(0.999)


@pytest.mark.parametrize("kind", ["diurnal", "table", "trace_rate", "full_swing"])
def test_time_rescaled_gaps_are_unit_exponential(kind, tmp_path):
    """Time-rescaling: Λ(t_k) - Λ(t_(k-1)) are iid Exp(1) for an NHPP with integrated rate Λ;
    KS test over 20k arrivals drawn in batches of 97 (so every batch start is exercised;
    seed 2), p above 0.001."""
    proc = {"diurnal": DIURNAL, "table": TABLE,
            "full_swing": DiurnalArrivals(mean=3, amplitude=3, period=7)}.get(kind)
    proc = proc or trace_rate(tmp_path)
    times, start, out = proc.stream(), 0.0, []
    rng = np.random.default_rng(2)
    for _ in range(207):
        t = times(rng, 97, start)
        out.append(t)
        start = float(t[-1])
    t = np.concatenate(out)
    assert np.all(np.diff(t) >= 0)
    gaps = np.diff(proc.cumulative(t), prepend=0.0)
    assert stats.kstest(gaps, "expon").pvalue > 1e-3


def test_rate_table_is_the_declared_function():
    """λ and Λ of a table by hand: rate 2 on [0, 10), 0 on [10, 25), 30 on [25, 40), 5 on
    [40, 60), repeated; no arrival falls where the rate is 0."""
    assert TABLE.rate_at([0, 9.9, 10, 24.9, 25, 45, 60, 70]).tolist() == [2, 2, 0, 0, 30, 5,
                                                                          2, 0]
    per = 2 * 10 + 30 * 15 + 5 * 20
    assert TABLE.cumulative(60.0) == pytest.approx(per)
    assert TABLE.cumulative(60.0 * 3 + 30) == pytest.approx(3 * per + 20 + 150)
    assert TABLE.rate == pytest.approx(per / 60)
    t = TABLE.times(np.random.default_rng(0), 20_000)
    phase = np.mod(t, 60)
    assert not np.any((phase > 10) & (phase < 25))
    held = PiecewiseArrivals(times=[0, 5], rates=[1, 4])  # no period: the last rate holds
    assert held.rate == 4 and held.cumulative(105.0) == pytest.approx(5 + 400)


def test_diurnal_rate_and_integral():
    """λ(t) = mean + amplitude cos(2π (t - peak) / period); Λ is its integral (quadrature);
    default peak period/4 is mean + amplitude sin(2π t / period)."""
    assert DIURNAL.rate_at(30.0) == pytest.approx(18) and DIURNAL.rate_at(80.0) == \
        pytest.approx(2)
    for t in (0.0, 17.0, 99.0, 1234.5):
        assert DIURNAL.cumulative(t) == pytest.approx(
            integrate.quad(lambda u: float(DIURNAL.rate_at(u)), 0, t, limit=500)[0], rel=1e-9)
    sine = DiurnalArrivals(mean=5, amplitude=2, period=24)
    x = np.linspace(0, 48, 97)
    np.testing.assert_allclose(sine.rate_at(x), 5 + 2 * np.sin(2 * np.pi * x / 24), atol=1e-12)
    assert DIURNAL.rate == 10


def test_trace_rate_bins_the_trace():
    """Each bin's rate is its count / bin; the curve repeats after the last bin; rate_scale
    and time_scale apply."""
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "t.parquet"
        pd.DataFrame({"ts": [7.0, 7.5, 8.0, 9.5, 13.0, 17.9]}).to_parquet(path)
        p = TraceRateArrivals(path=str(path), column="ts", bin=2).load()
        # shifted to 0: 0, .5, 1, 2.5, 6, 10.9 -> bins of width 2: [3, 1, 0, 1, 0, 1]
        assert p.rate_at(np.arange(0, 12, 2.0)).tolist() == [1.5, 0.5, 0, 0.5, 0, 0.5]
        assert p.table.period == 12 and p.rate == pytest.approx(6 / 12)
        q = TraceRateArrivals(path=str(path), column="ts", bin=4, time_scale=2,
                              rate_scale=3).load()
        # times 0, 1, 2, 5, 12, 21.8 -> bins of 4: [3, 1, 0, 1, 0, 1] counts
        assert q.rate_at(np.arange(0, 24, 4.0)).tolist() == [2.25, 0.75, 0, 0.75, 0, 0.75]


# ---------------------------------------------------------------------- MMPP
BURSTY = MMPPArrivals(rates=[1, 50], sojourn=[10, 1])


def test_mmpp_stationary_law_and_rate():
    """Two states: π ∝ sojourn (the chain alternates), rate Σ π λ; a 3-state generator's π
    solves πQ = 0."""
    np.testing.assert_allclose(BURSTY.stationary, [10 / 11, 1 / 11])
    assert BURSTY.rate == pytest.approx((10 * 1 + 1 * 50) / 11)
    q = np.array([[-1, 0.5, 0.5], [2, -3, 1], [1, 1, -2]])
    m = MMPPArrivals(rates=[1, 50, 0], generator=q.tolist())
    assert np.abs(m.stationary @ q).max() < 1e-12 and m.stationary.sum() == pytest.approx(1)
    assert m.rate == pytest.approx(float(m.stationary @ [1, 50, 0]))
    # sojourn + jump is the same chain as its generator
    soj = MMPPArrivals(rates=[1, 50, 0], sojourn=[1, 1 / 3, 0.5],
                       jump=[[0, 0.5, 0.5], [2 / 3, 0, 1 / 3], [0.5, 0.5, 0]])
    np.testing.assert_allclose(soj.stationary, m.stationary, rtol=1e-12)


def test_mmpp_counts_match_the_stationary_mean_rate():
    """From a stationary phase, E[N(T)] = rate × T exactly. R = 300 independent runs of
    T = 200 (seed 3): the mean count is within 4 standard errors (sample sd / sqrt(R)) of
    rate × T; the counts are over-dispersed (variance above 3 × mean), as bursts make them."""
    rng = np.random.default_rng(3)
    T, R = 200.0, 300
    counts = np.array([len(run_times(BURSTY, rng, T, batch=256)) for _ in range(R)])
    assert abs(counts.mean() - BURSTY.rate * T) <= 4 * counts.std(ddof=1) / math.sqrt(R)
    assert counts.var() > 3 * counts.mean()


@pytest.mark.parametrize("batch", [1, 4096])
def test_mmpp_long_run_rate_across_batches(batch):
    """One run of 60k arrivals drawn in batches of ``batch`` (1: the phase must carry from
    each arrival to the next): arrivals / time is the stationary mean rate within 4 standard
    errors, the SE from 30 batch means of the rate (seed 4). Restarting each batch from a
    stationary phase would give gaps of the wrong mean (about 8.6 vs 0.18 time units here)."""
    rng = np.random.default_rng(4)
    times, start, out = BURSTY.stream(), 0.0, []
    for _ in range(60_000 // batch):
        t = times(rng, batch, start)
        out.append(t)
        start = float(t[-1])
    t = np.concatenate(out)
    assert np.all(np.diff(t) >= 0)
    ends = t[np.arange(1, 31) * (len(t) // 30) - 1]
    per = (len(t) // 30) / np.diff(ends, prepend=0.0)
    assert abs(len(t) / t[-1] - BURSTY.rate) <= 4 * per.std(ddof=1) / math.sqrt(30)


def test_mmpp_initial_phase():
    """initial: 1 starts in the burst (the first arrival's median is ln 2 / 50.1 within
    10 %, 2000 seeds); initial: 0 starts silent (rate 0 for a sojourn of mean 10)."""
    m = MMPPArrivals(rates=[0, 50], sojourn=[10, 10], initial=1)
    first = np.array([m.times(np.random.default_rng(s), 1)[0] for s in range(2000)])
    assert np.median(first) == pytest.approx(math.log(2) / 50.1, rel=0.1)
    m0 = m.model_copy(update={"initial": 0})
    first = np.array([m0.times(np.random.default_rng(s), 1)[0] for s in range(2000)])
    assert np.median(first) == pytest.approx(10 * math.log(2), rel=0.1)


# ---------------------------------------------------------------------- common random numbers
def test_inversion_takes_poissons_draws():
    """With a flat rate, diurnal and nhpp give poisson's arrivals, and the later columns
    (demand, duration) of a workload are the same draws: one unit exponential per arrival."""
    rng = lambda: np.random.default_rng(9)  # noqa: E731
    flat = [DiurnalArrivals(mean=4, amplitude=0, period=10), PiecewiseArrivals(times=[0],
                                                                               rates=[4])]
    base = build_source(workload({"process": "poisson", "rate": 4}, 5000), topology())
    want = list(base.batches(rng()))
    for proc in flat:
        src = build_source(workload(proc.model_dump(by_alias=True), 5000), topology())
        got = list(src.batches(rng()))
        for b, w in zip(got, want, strict=True):
            np.testing.assert_allclose(b.arrival, w.arrival, rtol=1e-12)
            assert np.array_equal(b.demand, w.demand) and np.array_equal(b.duration,
                                                                         w.duration)
    t = PoissonArrivals(rate=4).times(rng(), 10)
    np.testing.assert_allclose(flat[0].times(rng(), 10), t, rtol=1e-13)


@pytest.mark.parametrize("arrival", [
    {"process": "diurnal", "mean": 3, "amplitude": 2, "period": 20},
    {"process": "mmpp", "rates": [0.5, 20], "sojourn": [5, 1]},
])
def test_same_seed_same_arrivals_whatever_the_allocator(arrival, tmp_path):
    """A run's workload draws only from its own generator: two allocators see the same
    requests at the same times."""
    import yaml
    from click.testing import CliRunner

    from dcsim.cli import main

    cfg = {"name": "crn", "seed": 5,
           "topology": {"kind": "flat", "servers": 4, "server": {"cpu": 8, "mem": 16}},
           "workload": workload(arrival, 300), "allocators": ["first_fit", "random"]}
    (tmp_path / "e.yaml").write_text(yaml.safe_dump(cfg))
    r = CliRunner().invoke(main, ["run", str(tmp_path / "e.yaml"), "--out",
                                  str(tmp_path / "o"), "--seeds", "1"])
    assert r.exit_code == 0, r.output
    req = pd.read_parquet(tmp_path / "o" / "requests")
    by = {str(k): g.sort_values("arrival")["arrival"].to_numpy()
          for k, g in req.groupby("allocator", observed=True)}
    assert len(by) == 2
    a, b = by.values()
    assert len(a) == 300 and np.array_equal(a, b)
    assert not np.array_equal(np.diff(a), np.full(299, np.diff(a)[0]))


# ---------------------------------------------------------------------- files
def test_rate_table_from_a_file_is_the_inline_table(tmp_path):
    """nhpp with path reads (time_column, rate_column) relative to the experiment folder and
    draws the same arrivals as the inline table."""
    pd.DataFrame({"t": [0, 10, 25, 40], "r": [2, 0, 30, 5]}).to_csv(tmp_path / "rates.csv",
                                                                   index=False)
    spec = workload({"process": "nhpp", "path": "rates.csv", "time_column": "t",
                     "rate_column": "r", "period": 60}, 3000)
    got = list(build_source(spec, topology(), base_dir=tmp_path).batches(
        np.random.default_rng(0)))[0].arrival
    inline = workload({"process": "nhpp", "times": [0, 10, 25, 40], "rates": [2, 0, 30, 5],
                       "period": 60}, 3000)
    want = list(build_source(inline, topology()).batches(np.random.default_rng(0)))[0].arrival
    assert np.array_equal(got, want)


def test_offered_load_uses_the_long_run_rate():
    """offered_load with a time-varying rate uses its long-run mean rate."""
    spec = workload({"process": "diurnal", "mean": 2, "amplitude": 1.5, "period": 50})
    spec["duration"] = {"dist": "exponential", "offered_load": 0.5}
    src = build_source(spec, topology())
    assert src.offered_load("cpu") == pytest.approx(0.5)
    assert src.mean_duration == pytest.approx(0.5 * 32 / (2 * 2.5))
    mm = workload({"process": "mmpp", "rates": [1, 50], "sojourn": [10, 1]})
    mm["duration"] = {"dist": "pareto", "shape": 2.5, "offered_load": 0.5}
    assert build_source(mm, topology()).describe()["rate"] == pytest.approx(60 / 11)


# ---------------------------------------------------------------------- validation
@pytest.mark.parametrize("arrival, message", [
    ({"process": "diurnal", "mean": 5, "amplitude": 6, "period": 24},
     "workload.arrival.amplitude: 6 is above mean (5): the rate would fall to -1"),
    ({"process": "diurnal", "mean": 5, "amplitude": -1, "period": 24},
     "workload.arrival.amplitude: Input should be greater than or equal to 0"),
    ({"process": "diurnal", "mean": 5, "amplitude": 1, "period": 0},
     "workload.arrival.period: Input should be greater than 0"),
    ({"process": "nhpp", "times": [0, 5, 5], "rates": [1, 2, 3]},
     "workload.arrival.times: must be increasing; times[2] (5) is not after times[1]"),
    ({"process": "nhpp", "times": [1, 5], "rates": [1, 2]},
     "workload.arrival.times: the first time must be 0"),
    ({"process": "nhpp", "times": [0, 5], "rates": [1, -2]},
     "workload.arrival.rates: rates[1] is -2; a rate is >= 0"),
    ({"process": "nhpp", "times": [0, 5], "rates": [1]},
     "workload.arrival.rates: 1 rates but 2 times"),
    ({"process": "nhpp", "times": [], "rates": []}, "workload.arrival.times: the table is "
     "empty"),
    ({"process": "nhpp", "times": [0, 5], "rates": [1, 1e-300]},
     "workload.arrival.rates: rates[1] is 1e-300; a rate is 0 (no arrivals) or at least "
     "1e-100"),
    ({"process": "mmpp", "rates": [1, 5], "sojourn": [1e-300, 1]},
     "sojourn[0] is 1e-300, outside [1e-100, 1e+100]"),
    ({"process": "nhpp", "times": [0, 5], "rates": [1, 0]}, "workload.arrival.rates: the "
     "last rate holds forever without a period and is 0"),
    ({"process": "nhpp", "times": [0, 5], "rates": [1, 1], "period": 5},
     "workload.arrival.period: 5 must be after the last time (5)"),
    ({"process": "nhpp", "times": [0, 5], "rates": [0, 0], "period": 9},
     "workload.arrival.rates: all zero"),
    ({"process": "nhpp", "rates": [1]}, "workload.arrival: give times and rates together"),
    ({"process": "nhpp", "times": [0], "rates": [1], "path": "r.csv"}, "give either times "
     "and rates, or path"),
    ({"process": "mmpp", "rates": [1, 5], "generator": [[-1, 1], [2, -1]]},
     "workload.arrival.generator: row 1 sums to 1, not 0"),
    ({"process": "mmpp", "rates": [1, 5], "generator": [[-1, 1], [-2, 2]]},
     "workload.arrival.generator: row 1, column 0 is negative"),
    ({"process": "mmpp", "rates": [1, 5], "generator": [[-1, 1], [0, 0]]},
     "workload.arrival.generator: state 1 is never left (absorbing)"),
    ({"process": "mmpp", "rates": [1, 5, 2], "generator": [[-1, 1, 0], [1, -1, 0],
                                                           [1, 0, -1]]},
     "workload.arrival.generator: state 2 cannot be reached from state 0"),
    ({"process": "mmpp", "rates": [1, 5], "generator": [[-1, 1]]},
     "workload.arrival.generator: must be 2 x 2"),
    ({"process": "mmpp", "rates": [1, 5], "sojourn": [1]},
     "workload.arrival.sojourn: 1 entries but rates has 2 states"),
    ({"process": "mmpp", "rates": [1, 5], "sojourn": [1, -1]},
     "workload.arrival.sojourn[1]: Input should be greater than 0"),
    ({"process": "mmpp", "rates": [1, 5]}, "give exactly one of generator"),
    ({"process": "mmpp", "rates": [0, 0], "sojourn": [1, 1]},
     "workload.arrival.rates: all zero"),
    ({"process": "mmpp", "rates": [1, 2, 3], "sojourn": [1, 1, 1],
      "jump": [[0, 0.5, 0.5], [0.5, 0, 0.6], [0.5, 0.5, 0]]},
     "workload.arrival.jump: row 1 sums to 1.1, not 1"),
    ({"process": "mmpp", "rates": [1, 2], "sojourn": [1, 1], "initial": 2},
     "workload.arrival.initial: state 2 does not exist"),
    ({"process": "trace_rate", "path": "t.csv"}, "workload.arrival.bin: Field required"),
    ({"rate": 3}, "missing 'process' (one of: poisson, tick, bernoulli, diurnal, nhpp, "
     "trace_rate, mmpp)"),
])
def test_bad_arrivals_name_the_field(arrival, message):
    with pytest.raises(ConfigError) as e:
        parse_workload(workload(arrival))
    assert message in str(e.value)


@pytest.mark.parametrize("content, arrival, message", [
    (None, {"process": "nhpp", "path": "nope.csv"},
     "workload.arrival.path: 'nope.csv' not found"),
    (None, {"process": "trace_rate", "path": "nope.csv", "bin": 1},
     "workload.arrival.path: 'nope.csv' not found"),
    ("time,rate\n0,1\n10,2\n5,3\n", {"process": "nhpp", "path": "f.csv"},
     "workload.arrival.path: f.csv: column 'time': must be increasing; row 3 (5) is "
     "not after row 2 (10)"),
    ("time,rate\n0,1\n10,x\n", {"process": "nhpp", "path": "f.csv"},
     "workload.arrival.path: f.csv: column 'rate', row 2: not a number"),
    ("time,speed\n0,1\n", {"process": "nhpp", "path": "f.csv"},
     "workload.arrival.path: f.csv: cannot read column(s) 'time', 'rate'"),
    ("time,rate\n", {"process": "nhpp", "path": "f.csv"},
     "workload.arrival.path: f.csv: column 'time': the table is empty"),
    ("arrival\n", {"process": "trace_rate", "path": "f.csv", "bin": 5},
     "workload.arrival.path: f.csv: column 'arrival': no arrival times"),
])
def test_bad_rate_files_name_the_field_and_row(tmp_path, content, arrival, message):
    if content is not None:
        (tmp_path / "f.csv").write_text(content)
    with pytest.raises(ConfigError) as e:
        build_source(workload(arrival), topology(), base_dir=tmp_path)
    assert message in str(e.value)


# ---------------------------------------------------------------------- properties
@st.composite
def processes(draw):
    kind = draw(st.sampled_from(["diurnal", "nhpp", "mmpp"]))
    pos = st.floats(0.01, 100)
    if kind == "diurnal":
        mean = draw(pos)
        return DiurnalArrivals(mean=mean, amplitude=draw(st.floats(0, 1)) * mean,
                               period=draw(pos), peak=draw(st.floats(-100, 100)))
    if kind == "nhpp":
        k = draw(st.integers(1, 6))
        gaps = draw(st.lists(pos, min_size=k - 1, max_size=k - 1))
        times = np.concatenate([[0.0], np.cumsum(gaps)]).tolist()
        rates = draw(st.lists(st.just(0.0) | st.floats(1e-100, 50), min_size=k, max_size=k))
        rates[-1] = max(rates[-1], 0.1)
        period = draw(st.none() | st.floats(1.01, 3))
        return PiecewiseArrivals(times=times, rates=rates,
                                 period=None if period is None else times[-1] * period + 0.1)
    k = draw(st.integers(2, 4))
    rates = draw(st.lists(st.floats(0, 50), min_size=k, max_size=k))
    rates[0] = max(rates[0], 0.1)
    return MMPPArrivals(rates=rates, sojourn=draw(st.lists(pos, min_size=k, max_size=k)))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(processes(), st.floats(0, 1e4), st.integers(1, 300), st.integers(0, 2**32 - 1))
def test_arrivals_are_ordered_and_rates_non_negative(proc, start, n, seed):
    """Any valid process: n arrival times, non-decreasing, none before start; λ >= 0, Λ
    non-decreasing, counts in windows non-negative; the long-run rate positive."""
    t = proc.stream()(np.random.default_rng(seed), n, start)
    assert t.shape == (n,) and np.all(np.isfinite(t))
    assert t[0] >= start and np.all(np.diff(t) >= 0)
    assert proc.rate > 0
    if not isinstance(proc, MMPPArrivals):
        grid = np.linspace(0, start + 10, 200)
        assert np.all(proc.rate_at(grid) >= 0)
        lam = proc.cumulative(grid)
        assert np.all(np.diff(lam) >= -1e-9 * (1 + np.abs(lam[1:])))
        counts = np.histogram(t, bins=5)[0]
        assert np.all(counts >= 0) and counts.sum() == n


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_a_rate_table_beyond_max_rows_is_refused_before_it_is_read(tmp_path, fmt):
    """#47 item 4: a rate table's rows are counted (a Parquet footer, a CSV's lines) before
    it is parsed; max_rows raises the bound for a trusted file."""
    frame = pd.DataFrame({"time": [0.0, 10.0, 20.0, 30.0], "rate": [1.0, 2.0, 1.0, 3.0]})
    path = tmp_path / f"r.{fmt}"
    frame.to_csv(path, index=False) if fmt == "csv" else frame.to_parquet(path)
    arrival = {"process": "nhpp", "path": path.name, "max_rows": 3}
    with pytest.raises(ConfigError, match=r"r\.\w+: 4 rows, above the 3 a rate table may "
                                          "have; set max_rows"):
        build_source(workload(arrival), topology(), base_dir=tmp_path)
    build_source(workload({**arrival, "max_rows": 4}), topology(), base_dir=tmp_path)
