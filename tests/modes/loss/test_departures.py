"""``departures``: when the requests ending at an instant are released against the request
arriving then. ``before_arrivals`` (dcsim's default) releases them first;
``after_first_step`` is the Nara authors' environment's clock (``packing_env.py``: the
holding-time check runs before the clock ticks, and again, without a tick, after every
partial step of an allocation), hand-worked here on one- and two-server clusters."""

from __future__ import annotations

from types import GeneratorType

import numpy as np
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dcsim.allocators.base import FIRST_STEP, Allocator
from dcsim.allocators.multi.baselines import NALB, NULB, RandomMulti, Tetris
from dcsim.allocators.single import FirstFitAllocator
from dcsim.cli import main
from dcsim.model import Placement
from dcsim.model.topologies import build_topology
from dcsim.modes.loss import Engine, EngineConfig
from tests.helpers.engine import checked, run
from tests.helpers.sources import ListSource
from tests.helpers.trees import star_topology

AFTER = EngineConfig(departures="after_first_step")


class ChoiceSpy(Tetris):
    """Tetris (ties to the lowest index) that records the free cpu it saw at each choice."""

    name = "choice_spy"

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.seen: list[tuple[int, list[float]]] = []

    def choose(self, partial, view):
        self.seen.append((partial.request.id, view.free[:, 0].tolist()))
        return super().choose(partial, view)


def test_a_request_ending_at_an_arrival_is_gone_first_by_default_and_held_after():
    """One 10-cpu server. r0 takes it on [0, 1]; r1 arrives at 1 wanting all of it. By
    default r0 departs first and r1 fits; on the authors' clock r0 still holds the server
    during r1's (one-server) decision, so r1 is rejected, and r0 is released after it."""
    topo = star_topology(n=1, cpu=10, mem=10)
    src = ListSource([0, 1, 2], [1, 1, 1], [[10, 10], [10, 10], [10, 10]])
    for alloc in (FirstFitAllocator, Tetris):
        _, _, rec = run(topo, src, alloc())
        assert rec["accepted"] == [True, True, True]
        eng, summary, rec = run(topo, src, alloc(), AFTER)
        assert rec["accepted"] == [True, False, True]
        assert eng.released == eng.accepted == 2
        assert np.array_equal(eng.state.free, topo.server_capacity)


def test_after_first_step_frees_the_ending_request_for_the_later_choices():
    """Two 10-cpu servers. r0 (t=0, holding 1) takes h0. r1 arrives at 1 wanting 20: its
    first choice sees h0 full (r0 still holds it) and takes h1; then r0 is released and
    the second choice takes h0, so r1 is accepted. Default: both free at the first choice."""
    topo = star_topology(n=2, cpu=10, mem=10)
    src = ListSource([0, 1], [1, 5], [[10, 10], [20, 20]])
    spy = ChoiceSpy()
    _, _, rec = run(topo, src, spy, AFTER)
    assert rec["accepted"] == [True, True]
    assert rec["servers"][1] == [1, 0]
    assert [s for s in spy.seen if s[0] == 1] == [(1, [0.0, 10.0]), (1, [10.0, 10.0])]
    spy = ChoiceSpy()
    _, _, rec = run(topo, src, spy)
    assert rec["accepted"] == [True, True] and rec["servers"][1] == [0, 1]
    assert [s for s in spy.seen if s[0] == 1][0] == (1, [10.0, 10.0])


class MarkerSpy(ChoiceSpy):
    """:class:`ChoiceSpy` that also records, at each thing its stepwise decision yields and
    again when the engine resumes it, the free cpu the view shows."""

    name = "marker_spy"

    def allocate(self, request, view):
        choice = super().allocate(request, view)
        self.seen.append((request.id, "stepwise" if isinstance(choice, GeneratorType)
                          else "direct", view.step_boundaries))
        return self._watch(choice, view) if isinstance(choice, GeneratorType) else choice

    def _watch(self, steps, view):
        sent = None
        try:
            while True:
                out = steps.send(sent)
                self.seen.append((out, view.free[:, 0].tolist()))
                sent = yield out
                self.seen.append(("resumed", view.free[:, 0].tolist()))
        except StopIteration as stop:
            return stop.value


def test_the_engine_not_the_allocator_releases_at_the_first_step_marker():
    """The two-server case above: on the authors' clock r1's decision is stepwise; after its
    first server it yields FIRST_STEP with r0 still holding h0 (the step releases nothing),
    the engine releases r0 before resuming it, and the second choice sees h0 free. By
    default the view asks for no step boundaries and the decision is one call."""
    topo = star_topology(n=2, cpu=10, mem=10)
    src = ListSource([0, 1], [1, 5], [[10, 10], [20, 20]])
    spy = MarkerSpy()
    eng, _, rec = run(topo, src, spy, AFTER)
    assert not hasattr(eng.view, "release_due")  # no hook for the policy to call
    assert rec["accepted"] == [True, True] and rec["servers"][1] == [1, 0]
    assert [s for s in spy.seen if s[0] is FIRST_STEP or s[0] == "resumed"
            or s[0] == 1] == [
        (1, "stepwise", True),
        (1, [0.0, 10.0]),                # the first choice: r0 still holds h0
        (FIRST_STEP, [0.0, 10.0]),       # the marker: nothing released by the allocator
        ("resumed", [10.0, 10.0]),       # the engine released r0 before resuming
        (1, [10.0, 10.0]),               # so the second choice sees h0 free
    ]
    assert not eng.view.step_boundaries and eng.released == 2
    spy = MarkerSpy()
    run(topo, src, spy)
    assert (1, "direct", False) in spy.seen and all(s[0] is not FIRST_STEP for s in spy.seen)


class Unmarked(Allocator):
    """A stepwise third-party allocator that never yields FIRST_STEP: it waits on a SimPy
    event at each of its two choices, recording the free cpu, and places the request on
    servers 1 and 0 if they cover it."""

    name = "unmarked"

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.sim = None
        self.seen: list[tuple[int, list[float]]] = []

    def allocate(self, request, view):
        return self._steps(request, view)

    def _steps(self, request, view):
        for _ in range(2):
            self.seen.append((request.id, view.free[:, 0].tolist()))
            yield self.sim.timeout(0)  # an event at the same instant, as an agent's choice
        half = request.demand / 2 if request.demand[0] > 10 else None
        if half is None:
            return 0 if view.free[0, 0] >= request.demand[0] else None
        if (view.free[[0, 1]] < half).any():
            return None
        return Placement.build([1, 0], [half, half])


def test_a_stepwise_allocator_without_the_marker_gets_the_departures_after_its_decision():
    """The same two requests, decided stepwise without the marker: r0 still holds h0 through
    both of r1's waits, so r1 is rejected; r0 is released after the decision, once."""
    topo = star_topology(n=2, cpu=10, mem=10)
    src = ListSource([0, 1], [1, 5], [[10, 10], [20, 20]])
    alloc = Unmarked()
    eng = Engine(topo, src, alloc, np.random.default_rng(0), AFTER)
    alloc.sim = eng.env
    eng.run()
    assert [s for s in alloc.seen if s[0] == 1] == [(1, [0.0, 10.0]), (1, [0.0, 10.0])]
    assert eng.accepted == eng.released == 1
    assert np.array_equal(eng.state.free, topo.server_capacity)
    alloc = Unmarked()  # by default r0 is gone before r1 is offered
    eng = Engine(topo, src, alloc, np.random.default_rng(0))
    alloc.sim = eng.env
    eng.run()
    assert eng.accepted == eng.released == 2


def test_a_held_request_is_placed_one_tick_after_the_departure_that_makes_room():
    """One 10-cpu server, capacity wait. r0 holds it on [0, 2]; r1 (t=1) waits. Default: r0
    departs at 2 and r1 starts at 2. Authors' clock: r0 is released at 2, the clock ticks
    and r1 starts at 3 (wait 2); r2 (workload t=2, shifted to 4) finds r1, ending at 4,
    still there, waits, and starts at 5 -- as ``packing_env.py`` steps its time."""
    topo = star_topology(n=1, cpu=10, mem=10)
    src = ListSource([0, 1, 2], [2, 1, 1], [[10, 10], [10, 10], [1, 1]])
    _, _, rec = run(topo, src, FirstFitAllocator(), EngineConfig(capacity="wait"))
    assert rec["wait"] == [0, 1, 0] and rec["start"] == [0, 2, 3]
    eng, _, rec = run(topo, src, FirstFitAllocator(),
                      EngineConfig(capacity="wait", departures="after_first_step"))
    assert rec["arrival"] == [0, 1, 4]
    assert rec["wait"] == [0, 2, 1] and rec["start"] == [0, 3, 5]
    assert rec["accepted"] == [True, True, True]
    assert eng.released == 3


def test_engine_config_refuses_an_unknown_departure_order():
    with pytest.raises(ValueError, match="departures must be one of"):
        EngineConfig(departures="whenever")


# ------------------------------------------------------------------------ property


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 60),
       capacity=st.sampled_from(["reject", "wait"]),
       cls=st.sampled_from([Tetris, NALB, NULB, RandomMulti]),
       reservation=st.sampled_from(["union", "per_pair_channel"]),
       eligible=st.sampled_from(["needed", "any_free"]))
def test_after_first_step_never_over_commits_and_releases_each_request_once(
        seed, n, capacity, cls, reservation, eligible):
    """Integer holding times on a tick clock (so departures and arrivals coincide), every
    multi-server allocator: free stays within [0, capacity] at every choice, every accepted
    request is released exactly once, and the cluster ends empty."""
    topo = build_topology({"kind": "fabric", "pods": 1, "racks": 2, "servers": 2, "fabric": 1,
                           "spines": 1, "sr": 1, "rf": 1, "fs": 1,
                           "server": {"cpu": 10, "mem": 10}})
    rng = np.random.default_rng(seed)
    src = ListSource(np.arange(n, dtype=float), rng.integers(1, 6, n).astype(float),
                     rng.integers(0, 25, (n, 2)), rng.choice([0.0, 0.3, 0.6], n))
    alloc_cls = checked(cls)
    alloc = alloc_cls(alloc_cls.Options(reservation=reservation, eligible=eligible),
                      rng=np.random.default_rng(seed + 1), topology=topo)
    eng, summary, rec = run(topo, src, alloc,
                            EngineConfig(capacity=capacity, departures="after_first_step"))
    rows = pd.DataFrame(rec)
    assert eng.released == eng.accepted == int(rows["accepted"].sum())
    assert np.allclose(eng.state.free, topo.server_capacity)
    assert np.allclose(eng.state.link_free, topo.link_capacity)
    assert summary["received"] == n


# ------------------------------------------------------------------------ config and CLI
def _cli(tmp_path, cfg, *extra):
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return CliRunner().invoke(main, ["run", str(path), "--out", str(tmp_path / "out"), *extra])


BASE = {"name": "dep", "seed": 1, "capacity": "wait",
        "topology": {"kind": "fabric", "preset": "alpha"},
        "workload": {"requests": 60, "arrival": {"process": "tick"},
                     "demand": {"cpu": {"dist": "uniform_int", "low": 1, "high": 50},
                                "mem": {"dist": "uniform_int", "low": 1, "high": 50}},
                     "duration": {"dist": "uniform_int", "low": 1, "high": 30},
                     "bandwidth": {"dist": "uniform", "low": 0.1, "high": 1.0}},
        "allocators": ["tetris"]}


def test_cli_sweeps_the_departure_order_and_records_it(tmp_path):
    res = _cli(tmp_path, BASE | {"matrix": {"departures": ["before_arrivals",
                                                          "after_first_step"]}})
    assert res.exit_code == 0, res.output
    s = pd.read_parquet(tmp_path / "out" / "summary.parquet")
    assert sorted(s["departures"]) == ["after_first_step", "before_arrivals"]
    waits = pd.read_parquet(tmp_path / "out" / "requests")
    assert waits.groupby("departures")["wait"].sum().loc["after_first_step"] > 0
    res = _cli(tmp_path, BASE | {"departures": "after_first_step"}, "--overwrite")
    assert res.exit_code == 0, res.output
    rec = yaml.safe_load((tmp_path / "out" / "experiment.yaml").read_text())
    assert rec["departures"] == "after_first_step"


@pytest.mark.parametrize(("cfg", "needle"), [
    (BASE | {"departures": "later"}, "departures"),
    ({"name": "q", "mode": "queue", "departures": "after_first_step",
      "workload": {"jobs": 5}, "schedulers": ["sjf"]}, "departures"),
])
def test_cli_bad_departures_is_one_clear_error(tmp_path, cfg, needle):
    res = _cli(tmp_path, cfg)
    assert res.exit_code != 0
    assert needle in res.output and "Traceback" not in res.output


def test_nara_env_takes_the_departure_order_from_an_experiment(tmp_path):
    pytest.importorskip("gymnasium")  # the learn extra
    from dcsim.learn.nara.env import NaraEnvConfig, env_config_from_experiment

    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(BASE | {"departures": "after_first_step"}))
    assert env_config_from_experiment(path).departures == "after_first_step"
    assert NaraEnvConfig().departures == "before_arrivals"


def test_a_training_config_passes_the_departure_order_to_its_environments():
    pytest.importorskip("torch")  # the learn extra
    pytest.importorskip("gymnasium")
    from dcsim.learn.nara.train import TrainConfig

    cfg = TrainConfig(departures="after_first_step")
    assert cfg.env_config().departures == "after_first_step"
    assert all(c.departures == "after_first_step" for c in cfg.eval_configs())


def test_continuous_times_without_waiting_give_the_same_rows_under_both_orders():
    """Poisson arrivals and exponential holding times never coincide, so without capacity
    waits the authors' clock changes nothing (as docs/reference/config.md says)."""
    from tests.helpers.sources import random_source

    topo = build_topology({"kind": "fabric", "preset": "alpha"})
    rows = []
    for departures in ("before_arrivals", "after_first_step"):
        src = random_source(np.random.default_rng(4), 300, rate=3.0, hold=8.0, max_demand=40)
        _, summary, rec = run(topo, src, Tetris(), EngineConfig(departures=departures))
        rec.pop("decision_s")
        rows.append(pd.DataFrame(rec))
    assert rows[0]["accepted"].any() and not rows[0]["accepted"].all()
    pd.testing.assert_frame_equal(rows[0], rows[1])
