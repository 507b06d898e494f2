"""Metric plugins (dcsim.metrics) seen from the engine: the order of their hooks, that each
placed request departs exactly once, that they cannot change the run, and how the planner
checks ``metrics.plugins``. The packaged template (plugins/dcsim-rack-imbalance) is
tests/test_third_party_metric.py."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dcsim.errors import PluginError
from dcsim.experiment_sections import parse_failures
from dcsim.metrics import Column, Metric, Observers
from dcsim.modes.loss import Engine, EngineConfig
from dcsim.modes.loss.failures import LossFailures
from dcsim.plugins import get_plugin_class
from dcsim.sim.failures import failure_rng
from tests.helpers.metric_calls import Recorder, check_order
from tests.helpers.sources import ListSource, random_source
from tests.helpers.trees import star_topology


def allocator(name: str, topo, seed: int = 0):
    cls = get_plugin_class(name, "allocator")
    return cls(cls.parse_options({}), rng=np.random.default_rng(seed), topology=topo)


def run(topo, source, alloc, metrics=None, failures=None, seed=0, **cfg):
    tables: dict[str, dict[str, list]] = {}

    def sink(kind, cols):
        for k, v in cols.items():
            tables.setdefault(kind, {}).setdefault(k, []).extend(list(v))

    fail = None
    if failures is not None:
        spec = parse_failures(failures)

        def fail(e):
            return LossFailures(e, spec, failure_rng(seed, 0))

    eng = Engine(topo, source, alloc, np.random.default_rng(seed), EngineConfig(**cfg),
                 sink=sink, failures=fail,
                 metrics=Observers(metrics) if metrics else None)
    return eng, eng.run(), tables


def test_hooks_in_order_on_a_hand_worked_case():
    """Two servers of 4 cpu: r0 (3 cpu) placed at 0 until 5, r1 (3 cpu) on the other at 1
    until 3, r2 (3 cpu) at 2 fits nowhere (rejected), r3 at 3 after r1's departure."""
    topo = star_topology(2, cpu=4, mem=4)
    src = ListSource([0, 1, 2, 3], [5, 2, 1, 1], [[3, 0]] * 4)
    rec = Recorder()
    eng, out, tables = run(topo, src, allocator("first_fit", topo), [rec], sample_every=2)
    kinds = [(c[0], c[1], c[2]) for c in rec.calls[1:]]
    assert kinds == [("arrival", 0, 0), ("decision", 0, 0), ("arrival", 1, 1),
                     ("decision", 1, 1), ("arrival", 2, 2), ("decision", 2, 2),
                     ("departure", 3, 1),   # released before the arrival at 3
                     ("arrival", 3, 3), ("decision", 3, 3), ("departure", 4, 3),
                     ("departure", 5, 0)]
    decisions = {c[2]: c[3] for c in rec.calls if c[0] == "decision"}
    assert decisions[2] is None
    assert decisions[0].servers.tolist() == [0] and decisions[1].servers.tolist() == [1]
    assert rec.calls[0] == ("start", "loss", ("cpu", "mem"))
    assert out["recorded_events"] == len(rec.calls)
    # sampled before the arrivals 0, 2 (sample_every 2): the calls made by then
    assert tables["timeseries"]["recorded_so_far"] == [1, 5]


def test_a_metric_cannot_write_the_view_or_a_placement():
    topo = star_topology(2)
    writes = []

    class Meddler(Metric):
        name = "meddler"

        def on_decision(self, now, request, placement):
            for target in (lambda: placement.amounts.__setitem__(0, 0.0),
                           lambda: self.view.free.__setitem__(0, 0.0)):
                try:
                    target()
                except ValueError:  # numpy: assignment destination is read-only
                    writes.append("refused")

        def on_start(self, run):
            self.view = run.view

    src = ListSource([0], [1], [[1, 1]])
    run(topo, src, allocator("first_fit", topo), [Meddler()])
    assert writes == ["refused", "refused"]


def test_summary_and_sample_must_give_exactly_the_declared_columns():
    class Sloppy(Metric):
        name = "sloppy"
        summary_columns = {"sloppy_a": Column("float64", "a")}

        def summary(self):
            return {"sloppy_b": 1.0}

    topo = star_topology(2)
    with pytest.raises(PluginError, match=r"metric 'sloppy': summary\(\) left out "
                                          r"'sloppy_a'"):
        run(topo, ListSource([0], [1], [[1, 1]]), allocator("first_fit", topo), [Sloppy()])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n=st.integers(1, 60),
       name=st.sampled_from(["first_fit", "best_fit", "random", "tetris"]),
       wait=st.booleans())
def test_hook_order_and_one_departure_each_and_the_same_run(seed, n, name, wait):
    """Random streams: the order invariants hold, and the run with a metric (the engine's
    general path) gives the same rows and summary as without one (its fused path)."""
    topo = star_topology(4, cpu=6, mem=6)
    src = random_source(np.random.default_rng(seed), n)
    cfg = {"capacity": "wait" if wait else "reject", "sample_every": 7}
    rec = Recorder()
    _, with_, t_with = run(topo, src, allocator(name, topo, seed), [rec], **cfg)
    _, without, t_without = run(topo, src, allocator(name, topo, seed), **cfg)
    check_order(rec.calls, None if wait else src.duration.tolist())
    assert sum(c[0] == "arrival" for c in rec.calls) == n
    with_.pop("recorded_events")
    for k in ("mean_decision_s",):
        with_.pop(k), without.pop(k)
    assert with_ == pytest.approx(without, nan_ok=True)
    for table in ("requests", "timeseries"):
        a, b = dict(t_with[table]), dict(t_without[table])
        a.pop("decision_s", None), b.pop("decision_s", None)
        a.pop("recorded_so_far", None)
        assert a.keys() == b.keys()
        for k in a:
            assert [str(x) for x in a[k]] == [str(x) for x in b[k]], k


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), reallocate=st.booleans(),
       ttf=st.floats(1.0, 30.0), ttr=st.floats(0.1, 10.0))
def test_failures_interrupt_as_departures_and_are_heard(seed, reallocate, ttf, ttr):
    """With server failures: an interrupted request departs at the failure (once), a
    reallocated one is decided again; every failure and repair is heard, in time order."""
    topo = star_topology(6)
    src = random_source(np.random.default_rng(seed), 60)
    rec = Recorder()
    eng, out, tables = run(topo, src, allocator("first_fit", topo, seed), [rec],
                           failures={"on_failure": "reallocate" if reallocate else "drop",
                                     "servers": {"ttf": {"dist": "exponential", "mean": ttf},
                                                 "ttr": ttr}}, seed=seed)
    check_order(rec.calls)
    failures = tables.get("component_failures", {"event": []})["event"]
    assert sum(c[0] == "failure" for c in rec.calls) == failures.count("fail")
    assert sum(c[0] == "repair" for c in rec.calls) == failures.count("repair")
    placed = sum(c[0] == "decision" and c[3] is not None for c in rec.calls)
    assert sum(c[0] == "departure" for c in rec.calls) == placed


def test_observers_need_a_metric():
    with pytest.raises(ValueError):
        Observers([])
