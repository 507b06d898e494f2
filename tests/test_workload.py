"""Arrival processes, synthetic sources, offered load, and the workload spec."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import numpy as np
import pytest
import yaml
from scipy import stats

from dcsim.errors import ConfigError
from dcsim.model.topology import Topology
from dcsim.workload import (
    AugmentedSource,
    PoissonArrivals,
    SyntheticSource,
    TickArrivals,
    TraceSource,
    build_source,
    parse_distribution,
)
from dcsim.workload.arrivals import BernoulliArrivals
from tests.helpers.vc import vc_workload


def topology(n_servers: int = 4, cpu: float = 8.0, mem: float = 16.0) -> Topology:
    g = nx.Graph()
    g.add_node("sw", kind="switch", tier=1)
    for i in range(n_servers):
        g.add_node(f"h{i}", kind="server", cpu=cpu, mem=mem)
        g.add_edge("sw", f"h{i}", capacity=10.0)
    return Topology.from_graph(g)


def collect(source, seed=0):
    return list(source.batches(np.random.default_rng(seed)))


def concat(batches):
    return {
        "arrival": np.concatenate([b.arrival for b in batches]),
        "duration": np.concatenate([b.duration for b in batches]),
        "demand": np.concatenate([b.demand for b in batches]),
        "bandwidth": np.concatenate([b.bandwidth for b in batches]),
    }


# ---------------------------------------------------------------------- arrivals
def test_poisson_first_arrival_is_the_first_gap():
    """Poisson times are start + cumulative exponential gaps of mean 1/rate."""
    p = PoissonArrivals(rate=4)
    t = p.times(np.random.default_rng(5), 100_000, start=10.0)
    gaps = np.random.default_rng(5).exponential(0.25, 100_000)
    assert np.allclose(t, 10.0 + np.cumsum(gaps))
    assert np.diff(t, prepend=10.0).mean() == pytest.approx(0.25, rel=0.01)
    assert p.rate == 4


def test_tick_and_bernoulli_arrivals():
    """Ticks arrive at interval, 2*interval, ...; Bernoulli at whole ticks with rate p."""
    t = TickArrivals(interval=2.0)
    assert list(t.times(None, 3, start=4.0)) == [6.0, 8.0, 10.0] and t.rate == 0.5
    b = BernoulliArrivals(p=0.7)
    x = b.times(np.random.default_rng(0), 50_000)
    assert np.all(np.diff(x) >= 1) and np.all(x == np.round(x))
    assert len(x) / x[-1] == pytest.approx(0.7, rel=0.02)


# ---------------------------------------------------------------------- synthetic source
def nara_source(n=1000, batch_size=256) -> SyntheticSource:
    return SyntheticSource(
        arrival=TickArrivals(),
        n_requests=n,
        demand={"cpu": parse_distribution({"dist": "uniform_int", "low": 1, "high": 50}, "c")},
        duration=parse_distribution({"dist": "uniform_int", "low": 1, "high": 30}, "d"),
        bandwidth=parse_distribution({"dist": "uniform", "low": 0.1, "high": 1.0}, "b"),
        resources=("cpu", "mem"),
        batch_size=batch_size,
    )


def test_batches_cover_all_requests_in_resource_order():
    """Batches of batch_size, arrival-ordered; an undeclared resource (mem) is 0."""
    batches = collect(nara_source(1000, 256))
    assert [len(b) for b in batches] == [256, 256, 256, 232]
    cols = concat(batches)
    assert np.array_equal(cols["arrival"], np.arange(1, 1001))
    assert cols["demand"].shape == (1000, 2)
    assert np.all((cols["demand"][:, 0] >= 1) & (cols["demand"][:, 0] <= 50))
    assert np.all(cols["demand"][:, 1] == 0)
    assert np.all((cols["bandwidth"] >= 0.1) & (cols["bandwidth"] <= 1.0))


def test_same_seed_same_requests():
    """Same seed and batch size give identical requests; another seed does not."""
    a, b = concat(collect(nara_source(), 3)), concat(collect(nara_source(), 3))
    c = concat(collect(nara_source(), 4))
    for k in a:
        assert np.array_equal(a[k], b[k])
    assert not np.array_equal(a["duration"], c["duration"])


AHAB = vc_workload(1000, 4, 0.785, mean=20, low=3, high=60)


def test_offered_load_gives_analytic_mean_duration():
    """AHAB: mean duration = load × capacity / (λ × E[N] E[S]) with E[N] of the truncated,
    rounded exponential."""
    topo = topology(n_servers=432, cpu=8)
    src = build_source(AHAB, topo)
    k = np.arange(3, 61)
    pmf = np.diff(stats.expon(scale=20).cdf(np.arange(2.5, 61)))
    en = (k * pmf).sum() / pmf.sum()
    assert src.mean_duration == pytest.approx(0.785 * 3456 / (4 * en * 2.25), rel=1e-9)
    assert src.offered_load("cpu") == pytest.approx(0.785)
    b = next(src.batches(np.random.default_rng(0)))
    assert np.array_equal(b.demand[:, 0], b.attrs["N"] * b.attrs["S"])
    assert np.array_equal(b.bandwidth, b.attrs["B"])


def test_offered_load_simple_case():
    """Load 0.5, λ = 2, E[cpu] = 2, capacity 100 → mean duration 12.5 (uniform and
    constant durations too)."""
    for dur in ({"dist": "exponential", "offered_load": 0.5},
                {"dist": "uniform", "low": 0, "high": 2, "offered_load": 0.5},
                {"dist": "constant", "offered_load": 0.5}):
        src = SyntheticSource(
            arrival=PoissonArrivals(rate=2), n_requests=10,
            demand={"cpu": parse_distribution({"dist": "uniform_int", "low": 1, "high": 3}, "c")},
            duration=parse_distribution(dur, "d"), total_capacity={"cpu": 100, "mem": 1})
        assert src.mean_duration == pytest.approx(12.5)


def test_time_average_load_matches_offered_load():
    """Over a long stream, the time-average Σ demand of active requests / capacity ≈ load."""
    src = SyntheticSource(
        arrival=PoissonArrivals(rate=10), n_requests=200_000,
        demand={"cpu": parse_distribution({"dist": "discrete", "values": [1, 2, 4, 8],
                                           "probs": [0.45, 0.3, 0.2, 0.05]}, "c")},
        duration=parse_distribution({"dist": "exponential", "offered_load": 0.6}, "d"),
        total_capacity={"cpu": 500.0, "mem": 1.0})
    c = concat(collect(src, seed=11))
    start, end = c["arrival"], c["arrival"] + c["duration"]
    t0, t1 = start[20_000], start[-1]  # skip the warm-up
    overlap = np.clip(np.minimum(end, t1) - np.maximum(start, t0), 0, None)
    load = (c["demand"][:, 0] * overlap).sum() / (t1 - t0) / 500.0
    assert load == pytest.approx(0.6, rel=0.03)


@pytest.mark.parametrize("change, message", [
    ({"demand": {"gpu": 1}}, "workload.demand.gpu: no such resource"),
    ({"demand": {"cpu": {"dist": "normal", "mean": 1, "std": 1}}},
     "workload.demand.cpu: can draw negative values"),
    ({"demand": {"cpu": "N*Q"}}, "workload.demand.cpu: Q not among workload.attrs"),
    ({"bandwidth": {"dist": "exponential", "offered_load": 1}},
     "workload.bandwidth.offered_load: only allowed on workload.duration"),
    ({"duration": {"dist": "exponential", "offered_load": 0.5, "max": 1}},
     "workload.duration: offered_load 0.5 needs mean duration"),
    ({"duration": {"dist": "exponential", "offered_load": 0.5, "load_resource": "disk"}},
     "workload.duration.load_resource: no resource 'disk'"),
    ({"duration": {"dist": "exponential", "mean": 0}},
     "workload.duration.mean: Input should be greater than 0"),
    ({"arrival": {"process": "poisson", "rate": -1}}, "workload.arrival.rate: Input should be"),
    ({"requests": None}, "workload.requests: required"),
    ({"trace": {"path": "x.csv"}}, "give either trace or arrival/duration/demand"),
    ({"duration": None}, "needs duration"),
    ({"colour": 1}, "workload.colour: Extra inputs"),
])
def test_spec_errors_name_the_field(change, message):
    """Invalid workloads raise ConfigError with the YAML field path."""
    spec = {**AHAB, **change}
    spec = {k: v for k, v in spec.items() if v is not None}
    with pytest.raises(ConfigError) as e:
        build_source(spec, topology(432))
    assert message in str(e.value)


SYNTHETIC_YAML = """
workload:
  requests: 1000
  arrival: {process: poisson, rate: 12}
  attrs:
    N: {dist: exponential, mean: 20, integer: true, min: 3, max: 60}
    S: {dist: discrete, values: [1, 2, 4, 8], probs: [0.45, 0.30, 0.20, 0.05]}
    B: {dist: discrete, values: [1, 2, 4, 8], probs: [0.45, 0.30, 0.20, 0.05]}
  demand: {cpu: "N*S", mem: 0}
  bandwidth: B
  duration: {dist: exponential, offered_load: 2.34, load_resource: cpu}
"""

TRACE_YAML = """
workload:
  requests: 500
  trace:
    path: ../traces/azure2017_dev_slice.csv
    columns: {cpu: cpu, mem: mem, censored: censored}
    scale: {cpu: 50, mem: 50}
    cap: {cpu: 100, mem: 100}
    time_scale: 0.01
  bandwidth: {dist: uniform, low: 0.1, high: 1.0}
"""


def test_yaml_examples_build(tmp_path):
    """The documented YAML examples parse and yield requests."""
    topo = topology(432)
    src = build_source(yaml.safe_load(SYNTHETIC_YAML)["workload"], topo)
    assert isinstance(src, SyntheticSource) and src.offered_load("cpu") == pytest.approx(2.34)
    assert sum(len(b) for b in collect(src)) == 1000
    here = Path(__file__).parent
    tr = build_source(yaml.safe_load(TRACE_YAML)["workload"], topo, base_dir=here)
    assert isinstance(tr, AugmentedSource) and isinstance(tr.inner, TraceSource)
    c = concat(collect(tr))
    assert len(c["arrival"]) == 500 and c["arrival"][0] == 0
    assert c["demand"].max() <= 100 and np.all((c["bandwidth"] >= 0.1) & (c["bandwidth"] <= 1))


def test_trace_path_not_found_names_the_field(tmp_path):
    """A missing trace file names workload.trace.path and where it looked."""
    with pytest.raises(ConfigError, match=r"workload.trace.path: 'nope.csv' not found"):
        build_source({"trace": {"path": "nope.csv"}}, topology(), base_dir=tmp_path)


def test_trace_formats_run_their_importer():
    """format: azure2020 / azure2017 import the raw files in memory, then replay them."""
    here = Path(__file__).parent
    spec = {"trace": {"path": "data/traces/azure2020_requests_head.csv", "format": "azure2020",
                      "columns": {"priority": "priority"}, "scale": {"cpu": 104},
                      "options": {"horizon_days": 14}}}
    c = collect(build_source(spec, topology(), base_dir=here))
    assert sum(len(b) for b in c) == 210 and set(c[0].attrs["priority"]) <= {0, 1}
    assert c[0].demand[0, 0] == pytest.approx(2.0)  # 2/104 of a 104-core machine
    spec = {"requests": 100, "trace": {"path": "data/traces/azure2017", "format": "azure2017",
                                       "split": "dev", "options": {"lifetime": "lower"}}}
    c = collect(build_source(spec, topology(), base_dir=here))
    assert sum(len(b) for b in c) == 100
    with pytest.raises(ConfigError, match="workload.trace.options.lifetime: expected 'mid', "
                                          "'lower' or 'uniform', got 'max'"):
        build_source({"trace": {**spec["trace"], "options": {"lifetime": "max"}}}, topology(),
                     base_dir=here)
