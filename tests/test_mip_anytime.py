"""The MIP rescheduler as an anytime, deterministic baseline (issue #15): never worse than its
warm start (greedy / alpha_vbpp) whatever the limit, the same plan whatever the clock says, a
wall-clock limit only on request, and a bound that stays a valid lower bound."""

from __future__ import annotations

import types
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dcsim.reschedulers import mip as rmip
from dcsim.reschedulers import mip_model as rmodel
from dcsim.reschedulers.builtin import MIP, AlphaVBPP, Greedy
from dcsim.vm import BOTH, VM, Host, MappingState
from dcsim.vm.mapping_io import parse_mapping
from dcsim.vm.synthetic import synthetic_mapping, synthetic_preset

DOCS = Path(__file__).parent.parent / "docs"


def small_state(seed: int, hosts: int, target: float) -> MappingState:
    return parse_mapping(synthetic_mapping(np.random.default_rng(seed), hosts=hosts,
                                           target_cpu=target)).state


class Clock:
    """A stand-in for the ``time`` module whose clock jumps ``step`` seconds per reading, or
    which fails the test when read at all (``step=None``)."""

    def __init__(self, step: float | None):
        self.step, self.now, self.reads = step, 0.0, 0

    def monotonic(self) -> float:
        self.reads += 1
        if self.step is None:
            raise AssertionError("the deterministic MIP read the clock")
        self.now += self.step
        return self.now

    perf_counter = monotonic


# -- never worse than its warm start ----------------------------------------------------------
@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), hosts=st.integers(3, 7),
       target=st.floats(0.6, 0.95), mnl=st.integers(0, 8))
def test_default_mip_is_never_worse_than_greedy_or_alpha_vbpp(seed, hosts, target, mnl):
    """Whatever the mapping, the default MIP's FR is at most greedy's and alpha_vbpp's, its
    plan is valid in at most MNL steps (run() validates it), and its bound is below it."""
    s = small_state(seed, hosts, target)
    m = MIP().run(s, mnl)
    g, a = Greedy().run(s, mnl), AlphaVBPP().run(s, mnl)
    assert m.fr_after <= min(g.fr_after, a.fr_after) + 1e-12
    assert len(m.migrations) <= mnl
    assert m.info["greedy_fr"] == pytest.approx(g.fr_after)
    assert m.info["alpha_vbpp_fr"] == pytest.approx(a.fr_after)
    assert m.info["source"] in {"mip", "greedy", "alpha_vbpp", "none"}
    assert m.bound is not None and m.bound <= m.fr_after + 1e-12


@pytest.mark.parametrize("options", [{"node_limit": 1}, {"time_limit": 1e-3},
                                     {"node_limit": 1, "max_solves": 1}])
def test_any_limit_keeps_the_warm_start(options):
    """Under a tiny node or time limit, the answer is still at least the better heuristic's,
    and ``source`` says whose plan it is."""
    s = parse_mapping(synthetic_preset("production_small", 3)).state
    m = MIP(MIP.parse_options(options)).run(s, 20)
    best = min(Greedy().run(s, 20).fr_after, AlphaVBPP().run(s, 20).fr_after)
    assert m.fr_after <= best + 1e-12
    fr = {"greedy": m.info["greedy_fr"], "alpha_vbpp": m.info["alpha_vbpp_fr"],
          "mip": m.info["mip_fr"], "none": m.fr_before}
    assert m.fr_after == pytest.approx(fr[m.info["source"]])


def test_a_heuristic_plan_wins_when_the_mip_finds_nothing_better(monkeypatch):
    """If HiGHS returns no solution, the better heuristic plan is returned as it is."""
    from scipy.optimize import OptimizeResult

    monkeypatch.setattr(rmip, "milp", lambda *a, **k: OptimizeResult(
        x=None, status=4, message="Solution limit reached", mip_dual_bound=np.nan))
    s = small_state(7, 6, 0.9)
    m = MIP().run(s, 6)
    plans = {"greedy": Greedy().run(s, 6), "alpha_vbpp": AlphaVBPP().run(s, 6)}
    assert m.status == "no_solution" and m.info["mip_fr"] is None
    assert m.migrations == plans[m.info["source"]].migrations
    assert m.fr_after == min(p.fr_after for p in plans.values())


# -- same rows whatever the load ----------------------------------------------------------------
def test_default_mip_never_reads_the_clock(monkeypatch):
    """Without ``time_limit`` the MIP's work is counted in nodes, never in seconds."""
    clock = Clock(step=None)
    monkeypatch.setattr(rmip, "time", types.SimpleNamespace(monotonic=clock.monotonic,
                                                            perf_counter=clock.monotonic))
    s = parse_mapping(synthetic_preset("production_small", 1)).state
    plan = MIP().reschedule(s, 10)
    assert plan.status == "optimal" and clock.reads == 0 and len(plan) <= 10


def test_default_mip_gives_the_same_plan_however_time_passes(monkeypatch):
    """Repeated runs, one of them under a clock that races ahead (a loaded machine), give
    the same migrations, status, bound and info."""
    s = parse_mapping(synthetic_preset("production_small", 2)).state
    first = MIP().reschedule(s, 15)
    monkeypatch.setattr(rmip, "time", types.SimpleNamespace(
        monotonic=Clock(step=1e4).monotonic, perf_counter=Clock(step=1e4).monotonic))
    again = MIP().reschedule(s, 15)
    assert list(first) == list(again) and len(first) > 0
    assert (first.status, first.bound, first.info) == (again.status, again.bound, again.info)


def test_time_limit_mode_reads_the_clock_and_stops(monkeypatch):
    """``time_limit`` is a wall-clock limit: a clock that jumps past it stops the solves
    (one solve at most, with HiGHS's own limit at its minimum), and the plan still is at
    least the warm start's. The option documents that results then depend on load."""
    s = parse_mapping(synthetic_preset("production_small", 4)).state
    clock = Clock(step=100.0)
    monkeypatch.setattr(rmip, "time", types.SimpleNamespace(monotonic=clock.monotonic))
    plan = MIP(MIP.parse_options({"time_limit": 1.0, "max_solves": 3})).reschedule(s, 20)
    assert clock.reads >= 2 and plan.info["attempts"] == 1
    trial = s.copy()
    trial.apply_all(plan, mnl=20)
    best = min(plan.info["greedy_fr"], plan.info["alpha_vbpp_fr"])
    assert trial.fragment_rate() <= best + 1e-12
    assert "load" in MIP.Options.model_fields["time_limit"].description
    assert MIP.Options().time_limit is None and MIP.Options().node_limit is not None


def test_docs_describe_the_deterministic_default():
    text = (DOCS / "howto" / "vm-rescheduling.md").read_text()
    assert "node_limit" in text and "time_limit" in text and "load" in text


# -- the bound --------------------------------------------------------------------------------
def tiny_state(seed: int) -> MappingState:
    """3 hosts of 2 × 20 cores and 2 × 20 MB, up to 6 VMs placed at random where they fit."""
    rng = np.random.default_rng(seed)
    hosts = [Host(f"h{i}", (20, 20), (20, 20)) for i in range(3)]
    free = np.full((3, 2), 20)
    vms, place = [], []
    for _ in range(6):
        double = rng.random() < 0.3
        c = int(rng.choice([4, 8, 16])) if double else int(rng.choice([2, 4, 6, 8, 12]))
        per = c // 2 if double else c
        opts = ([(h, BOTH) for h in range(3) if (free[h] >= per).all()] if double else
                [(h, j) for h in range(3) for j in (0, 1) if free[h, j] >= per])
        if not opts:
            break
        h, n = opts[rng.integers(len(opts))]
        for j in ((0, 1) if n == BOTH else (n,)):
            free[h, j] -= per
        vms.append(VM(f"v{len(vms)}", c, 2 if double else 1, 2 if double else 1))
        place.append((h, n))
    return MappingState(hosts, vms, place)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), mnl=st.integers(1, 4),
       node_limit=st.sampled_from([1, 1000]))
@example(seed=1575, mnl=4, node_limit=1)  # the first solve's optimum needs > MNL steps
def test_bound_is_a_lower_bound_on_the_per_vm_optimum(seed, mnl, node_limit):
    """The aggregated MIP's bound, even after one node, is at most the optimum of the paper's
    per-VM formulation (its proven bound), and at most the FR it returns."""
    s = tiny_state(seed)
    per = MIP(MIP.parse_options({"formulation": "per_vm", "warm_start": False})).run(s, mnl)
    assert per.status.startswith("optimal")  # "+dropped": the optimum needs > MNL steps
    m = MIP(MIP.parse_options({"node_limit": node_limit})).run(s, mnl)
    assert m.bound is not None
    assert m.bound <= per.bound + 1e-12 and m.bound <= m.fr_after + 1e-12
    if m.status == "optimal":
        assert m.fr_after <= per.fr_after + 1e-12


# -- plan hygiene -----------------------------------------------------------------------------
def test_same_shape_swaps_cancel_unless_hall_breaks():
    """A VM of a shape leaving and another arriving at the same (host, NUMA) cancel; the
    cancellation is refused when what remains could not be matched across hosts."""
    assert rmodel._cancel({0: 1, 2: 1}, {0: 1, 4: 1}) == ({2: 1}, {4: 1})
    assert rmodel._cancel({0: 1, 2: 1}, {2: 1, 0: 1}) == ({}, {})
    # host 0 leaves from NUMA 0 and receives on NUMA 1; host 1 swaps: cancelling host 1's
    # pair leaves one move from host 0 to host 0, which is not a migration
    assert rmodel._cancel({0: 1, 2: 1}, {1: 1, 2: 1}) == ({0: 1, 2: 1}, {1: 1, 2: 1})


def test_prune_drops_moves_that_do_not_help():
    """A planned move whose undoing keeps the end state valid and its fragment no higher is
    dropped; a move the end state needs stays."""
    hosts = [Host(f"h{i}", (16, 16), (100, 100)) for i in range(3)]
    vms = [VM("a", 4, 1, 1), VM("b", 16, 1, 1), VM("c", 4, 1, 1)]
    s = MappingState(hosts, vms, [(0, 0), (1, 0), (2, 0)])
    # moving a to host 2 NUMA 0 (next to c) helps; moving b to host 2 NUMA 1 does nothing
    moves = [(0, 2, 0), (1, 2, 1)]
    assert rmip._end_fragment(s, moves) == rmip._end_fragment(s, [(0, 2, 0)])
    assert rmip._prune(s, moves) == [(0, 2, 0)]


def test_identical_hosts_are_grouped_and_keep_the_optimum():
    """Hosts with the same free capacity and VMs form a group (ordered by activity in the
    model); the aggregated optimum still equals the per-VM one."""
    hosts = [Host(f"h{i}", (20, 20), (40, 40)) for i in range(4)]
    vms = [VM("a", 6, 1, 1), VM("b", 6, 1, 1), VM("c", 4, 1, 1), VM("d", 6, 1, 1)]
    s = MappingState(hosts, vms, [(0, 0), (1, 0), (2, 1), (3, 0)])
    assert rmodel._identical_hosts(s) == [[0, 1, 3]]
    for mnl in (1, 2, 3):
        agg = MIP(MIP.parse_options({"warm_start": False})).run(s, mnl)
        per = MIP(MIP.parse_options({"formulation": "per_vm", "warm_start": False})).run(s, mnl)
        assert agg.status == per.status == "optimal"
        assert agg.fr_after == pytest.approx(per.fr_after)


def test_a_re_solve_after_dropped_moves_is_not_called_optimal():
    """Seed 1575: the first solve's end state (the bound) needs more than MNL steps, so the
    MIP re-solves at a lower MNL; the plan it returns is above the bound, and its status
    says why ("+dropped"), not "optimal"."""
    s = tiny_state(1575)
    m = MIP(MIP.parse_options({"node_limit": 1})).run(s, 4)
    assert m.info["attempts"] > 1 and m.fr_after > m.bound
    assert m.status == "optimal+dropped"
