"""Online VM mode: first_fit / best_fit choices by hand, the online engine on hand-built
traces (placement, departures, rejections, periodic rescheduling, FR timeseries), VM
arrivals/departures in the model (hypothesis), determinism and ``vm:`` validation."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dcsim.errors import ConfigError, PluginError, StateError
from dcsim.modes.vm_online.engine import REJECTED, OnlineEngine, run_online
from dcsim.modes.vm_online.spec import OnlineSpec, check_online, parse_online, placer_class
from dcsim.placers import Placer
from dcsim.placers.builtin import PLACERS, BestFit, FirstFit, register_placers
from dcsim.reschedulers import Plan, Rescheduler
from dcsim.vm import BOTH, VM, Host, InvalidMigration, MappingState, Migration
from dcsim.vm.arrivals import VMStream, trace_stream, vm_sizes
from dcsim.vm.model import FRAGMENT_CORES

BIG_MEM = 10_000


def state_with_free(free_cpu, cap=44, free_mem=None, mem_cap=BIG_MEM) -> MappingState:
    """Hosts of ``cap`` cores per NUMA whose free cpu is ``free_cpu[h][j]``: each NUMA holds
    one filler VM of ``cap - free`` cores (``mem_cap - free_mem`` MB)."""
    hosts = [Host(f"h{h}", (cap, cap), (mem_cap, mem_cap)) for h in range(len(free_cpu))]
    vms, place = [], []
    for h, row in enumerate(free_cpu):
        for j, f in enumerate(row):
            used_mem = 0 if free_mem is None else mem_cap - free_mem[h][j]
            if cap - f > 0:
                vms.append(VM(f"fill{h}{j}", cap - f, used_mem))
                place.append((h, j))
    s = MappingState(hosts, vms, place)
    assert s.free_cpu.tolist() == [list(r) for r in free_cpu]
    return s


def brute_best(state: MappingState, vm: VM):
    """(lowest fragment after placement, options reaching it) by trying every option."""
    best, where = None, []
    opts = [(h, BOTH) for h in range(state.n_hosts)] if vm.numas == 2 else \
        [(h, j) for h in range(state.n_hosts) for j in (0, 1)]
    for h, n in opts:
        if state.place_reason(vm, h, n) is None:
            s = state.copy()
            s.add_vm(vm, h, n)
            f = s.fragment()
            if best is None or f < best:
                best, where = f, [(h, n)]
            elif f == best:
                where.append((h, n))
    return best, where


# -- placers ---------------------------------------------------------------------------------
def test_first_fit_and_best_fit_single_numa_by_hand():
    # free cpu per (host, NUMA):  h0 [16, 3]  h1 [20, 44]  h2 [36, 5]
    # fragment (free mod 16) now: 0 + 3 + 4 + 12 + 4 + 5 = 28 of 124 free -> FR 0.2258
    s = state_with_free([[16, 3], [20, 44], [36, 5]])
    vm = VM("x", 4, 100)
    # first fit: h0 NUMA 0 (16 >= 4); fragment there 0 -> 12: 28 + 12 = 40 -> FR 40/120
    assert FirstFit().place(vm, s) == (0, 0)
    # best fit: drops 16->12: 0-12 = -12; 3: no room; 20->16: 4-0 = +4; 44->40: 12-8 = +4;
    # 36->32: 4-0 = +4; 5->1: 5-1 = +4. Largest drop 4, first in host order: h1 NUMA 0.
    # fragment after: 28 - 4 = 24 -> FR 24/120 = 0.2
    assert BestFit().place(vm, s) == (1, 0)
    after = s.copy()
    after.add_vm(vm, 1, 0)
    assert after.fragment() == 24 and after.fragment_rate() == pytest.approx(0.2)
    assert brute_best(s, vm) == (24, [(1, 0), (1, 1), (2, 0), (2, 1)])


def test_best_fit_avoids_breaking_a_16_block_and_respects_memory():
    # h0 [32, 17]: a 2-core VM on NUMA 0: 0 -> 14 (+14); on NUMA 1: 1 -> 15 (+14)
    # h1 [18, 40] but h1 NUMA 0 has no memory: 18 -> 16 would drop 2 (not allowed);
    # h1 NUMA 1: 40 -> 38: 8 -> 6, drop 2 -> chosen (fragment 0+1+2+8 = 11 -> 9)
    s = state_with_free([[32, 17], [18, 40]], free_mem=[[BIG_MEM] * 2, [10, BIG_MEM]])
    vm = VM("y", 2, 50)
    assert BestFit().place(vm, s) == (1, 1)
    assert FirstFit().place(vm, s) == (0, 0)
    assert brute_best(s, vm) == (9, [(1, 1)])


def test_double_numa_choices_by_hand():
    # an 8-core double-NUMA VM takes 4 on each NUMA
    # h0 [16, 16]: drops -12 + -12 = -24; h1 [5, 3]: NUMA 1 lacks room;
    # h2 [20, 36]: 4 -> 0 and 4 -> 0: drop 4 + 4 = 8 (fragment 0+0+5+3+4+4 = 16 -> 8)
    s = state_with_free([[16, 16], [5, 3], [20, 36]])
    vm = VM("d", 8, 20, numas=2)
    assert FirstFit().place(vm, s) == (0, BOTH)
    assert BestFit().place(vm, s) == (2, BOTH)
    assert brute_best(s, vm) == (8, [(2, BOTH)])


def test_placers_reject_when_nothing_fits():
    s = state_with_free([[3, 2], [1, 0]])
    for p in (FirstFit(), BestFit()):
        assert p.place(VM("z", 4, 1), s) is None  # at most 3 free on a NUMA
        assert p.place(VM("z3", 6, 2, numas=2), s) is None  # 3 per NUMA: h0 N1 has 2
        assert p.place(VM("z2", 2, 2, numas=2), s) == (0, BOTH)  # 1 per NUMA: only h0
        assert p.place(VM("z4", 1, 10**6), s) is None  # no NUMA has the memory


@settings(max_examples=60, deadline=None)
@given(free=st.lists(st.lists(st.integers(0, 44), min_size=2, max_size=2), min_size=1,
                     max_size=6),
       cpu=st.integers(1, 40), double=st.booleans())
def test_best_fit_reaches_the_lowest_fragment(free, cpu, double):
    s = state_with_free(free)
    vm = VM("v", 2 * cpu if double else cpu, 2, numas=2 if double else 1)
    best, where = brute_best(s, vm)
    got = BestFit().place(vm, s)
    if best is None:
        assert got is None
        return
    assert got == where[0]  # the lowest fragment, first in host order
    ff = FirstFit().place(vm, s)
    assert s.place_reason(vm, *ff) is None


def test_registration_and_lookup():
    found = []
    register_placers(found.append)
    assert {c.name for c in found} == {"first_fit", "best_fit"} == {c.name for c in PLACERS}
    assert all(c.kind == "placer" and issubclass(c, Placer) for c in found)
    assert placer_class("best_fit") is BestFit
    with pytest.raises(PluginError, match="unknown placer 'nope'.*best_fit"):
        placer_class("nope")


# -- the model: arrivals and departures ----------------------------------------------------------
def test_add_and_remove_vm():
    s = state_with_free([[44, 44], [44, 44]])
    assert s.n_vms == 0 and s.fragment_rate() == pytest.approx(48 / 176)
    k = s.add_vm(VM("a", 10, 30), 1, 1)
    assert k == 0 and s.free_cpu.tolist() == [[44, 44], [44, 34]]
    s.add_vm(VM("b", 20, 40, numas=2), 0, BOTH)
    assert s.free_cpu.tolist() == [[34, 34], [44, 34]] and s.vm_index == {"a": 0, "b": 1}
    with pytest.raises(StateError, match="already placed"):
        s.add_vm(VM("a", 1, 1), 0, 0)
    with pytest.raises(StateError, match="NUMA 0 has 34 free cpu"):
        s.add_vm(VM("c", 40, 1), 0, 0)
    with pytest.raises(StateError, match="must go to both NUMAs"):
        s.add_vm(VM("c", 2, 2, numas=2), 0, 1)
    with pytest.raises(StateError, match="NUMA 0 or 1"):
        s.add_vm(VM("c", 2, 2), 0, BOTH)
    s.check_invariants()
    c = s.copy()
    vm, h, n = s.remove_vm(0)
    assert (vm.id, h, n) == ("a", 1, 1) and s.vm_ids == ("b",) and s.vm_index == {"b": 0}
    assert s.free_cpu.tolist() == [[34, 34], [44, 44]]
    assert c.vm_ids == ("a", "b") and c.vm_index == {"a": 0, "b": 1}  # the copy kept them
    c.check_invariants()
    s.add_vm(VM("a", 1, 1), 0, 0)  # the id is free again
    assert s.apply(Migration(1, 1, 0)).to_host == 1
    s.check_invariants()
    with pytest.raises(StateError):
        s.remove_vm(5)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(st.tuples(st.sampled_from(["add", "remove", "move"]),
                              st.integers(0, 10**6), st.integers(1, 30), st.booleans()),
                    max_size=60))
def test_free_stays_within_capacity_through_random_events(ops):
    """Random arrivals (valid or not), departures and migrations: the free arrays never go
    negative nor above capacity and always equal capacity minus the placed VMs; a refused
    operation changes nothing."""
    s = state_with_free([[44, 44], [44, 44], [44, 44]], mem_cap=200)
    serial = 0
    for op, r, cpu, double in ops:
        before = s.copy()
        if op == "add":
            numas = 2 if double else 1
            vm = VM(f"v{serial}", cpu * numas, (r % 80) * numas, numas=numas)
            serial += 1
            h, j = r % 3, (r // 3) % 2
            n = BOTH if double else j
            if s.place_reason(vm, h, n) is None:
                s.add_vm(vm, h, n)
            else:
                with pytest.raises(StateError):
                    s.add_vm(vm, h, n)
                assert s.same_as(before) and s.n_vms == before.n_vms
        elif op == "remove" and s.n_vms:
            s.remove_vm(r % s.n_vms)
        elif op == "move" and s.n_vms:
            k = r % s.n_vms
            m = Migration(k, (r // 7) % 3, BOTH if s.vm_double[k] else (r // 21) % 2)
            if s.reason(m) is None:
                s.apply(m)
            else:
                with pytest.raises(InvalidMigration):
                    s.apply(m)
                assert s.same_as(before)
        assert (s.free_cpu >= 0).all() and (s.free_mem >= 0).all()
        assert (s.free_cpu <= s.cap_cpu).all() and (s.free_mem <= s.cap_mem).all()
        s.check_invariants()
    while s.n_vms:
        s.remove_vm(0)
    assert np.array_equal(s.free_cpu, s.cap_cpu) and np.array_equal(s.free_mem, s.cap_mem)


# -- the online engine -----------------------------------------------------------------------------
def write_trace(tmp_path, rows, name="trace.csv"):
    p = tmp_path / name
    pd.DataFrame(rows, columns=["id", "arrival", "duration", "cpu", "mem"]).to_csv(p, index=False)
    return p


class Sink:
    def __init__(self):
        self.data: dict[str, dict] = {}

    def __call__(self, kind, columns):
        assert kind not in self.data  # one call per kind
        self.data[kind] = {k: np.asarray(v) for k, v in columns.items()}

    def frame(self, kind) -> pd.DataFrame:
        return pd.DataFrame(self.data[kind])


def online(tmp_path, rows, placer=None, **vm):
    p = write_trace(tmp_path, rows)
    spec = {"mapping": {"hosts": 2, "numa_cpu": 20, "numa_mem": 100},
            "workload": {"trace": {"path": p.name, "mem_unit_mb": 1}},
            "check_invariants": True, **vm}
    sink = Sink()
    out = run_online(spec, placer or FirstFit(), None, np.random.default_rng(0), sink,
                     base_dir=tmp_path)
    return out, sink


HAND = [  # id, arrival, duration, cpu, mem (MB)      first fit on 2 hosts x [20, 20]
    (0, 0, 10, 12, 10),   # h0 N0 -> free [8, 20] [20, 20]
    (1, 1, 10, 20, 10),   # h0 N1 -> [8, 0] [20, 20]
    (2, 2, 3, 16, 10),    # h1 N0 -> [8, 0] [4, 20]
    (3, 3, 10, 20, 10),   # h1 N1 -> [8, 0] [4, 0]
    (4, 4, 1, 9, 10),     # nothing has 9 free: rejected
    (5, 5, 2, 4, 10),     # VM 2 leaves at 5 first (departures come first): [8, 0] [20, 0];
                          #   first fit: h0 N0 (8 >= 4) -> [4, 0] [20, 0]
    (6, 5, 20, 8, 300),   # 300 MB > one NUMA's 100: double-NUMA, 4 cores + 150 MB per
                          #   NUMA: no NUMA has 150 MB -> rejected
    (7, 12, 1, 30, 10),   # 30 cores > 20: double-NUMA, 15 per NUMA; at 12 VMs 0, 1, 5 have
                          #   left: [20, 20] [20, 0] -> h0 both NUMAs
]


def test_engine_on_a_hand_built_trace(tmp_path):
    out, sink = online(tmp_path, HAND, sample_every=1.0, until=20.0)
    req = sink.frame("vms")
    assert req["accepted"].tolist() == [True, True, True, True, False, True, False, True]
    assert req["host"].tolist() == [0, 0, 1, 1, -1, 0, -1, 0]
    assert req["numa"].tolist() == [0, 1, 0, 1, REJECTED, 0, REJECTED, BOTH]
    assert req["cpu"].tolist()[-1] == 30 and req["numas"].tolist() == [1] * 6 + [2, 2]
    assert req["mem"].tolist()[6] == 300
    assert out["received"] == 8 and out["accepted"] == 6 and out["rejected"] == 2
    assert out["acceptance_ratio"] == pytest.approx(6 / 8)
    assert out["migrations"] == 0 and out["reschedules"] == 0
    ts = sink.frame("timeseries")
    at = ts.set_index("time")
    # t = 12 (sample before the arrival of VM 7): VM 0 left at 10, VM 1 at 11, VM 5 at 7,
    # VM 3 leaves at 13: free [20, 20] [20, 0]: fragment 4 + 4 + 4 + 0 = 12 of 60 -> 0.2
    assert at.loc[12.0, "fragment_rate"] == pytest.approx(0.2)
    # t = 4 (sample before VM 4 arrives): free [8, 0] [4, 0] -> (8 + 4) / 12 = 1.0
    assert at.loc[4.0, "fragment_rate"] == pytest.approx(1.0)
    # everything left by the end (until = 20): free = capacity, each VM released once
    assert ts["vms"].tolist()[-1] == 0 and ts["event"].tolist()[-1] == "end"
    assert out["final_fragment_rate"] == pytest.approx(16 / 80)
    assert out["sim_time"] == 20.0


def replay(req: pd.DataFrame, times, n_hosts=2, cap=20):
    """Free cpu per (host, NUMA) at each time, from the per-VM rows (no migrations):
    a VM is present at t when arrival <= t < arrival + duration (departures first)."""
    out = []
    acc = req[req["accepted"]]
    for t in times:
        free = np.full((n_hosts, 2), cap)
        on = acc[(acc["arrival"] <= t) & (acc["arrival"] + acc["duration"] > t)]
        for _, r in on.iterrows():
            if r["numa"] == BOTH:
                free[r["host"]] -= r["cpu"] // 2
            else:
                free[r["host"], r["numa"]] -= r["cpu"]
        out.append(free)
    return out


def fr_of(free) -> float:
    total = free.sum()
    return (free % FRAGMENT_CORES).sum() / total if total else 0.0


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 15), st.integers(1, 24),
                               st.integers(0, 60)), min_size=1, max_size=30),
       best=st.booleans())
def test_fr_timeseries_and_mean_match_a_replay(tmp_path, rows, best):
    """Random traces: the FR sampled every second equals the FR of the state rebuilt from
    the per-VM rows, and the time-average FR equals the integral of that replay."""
    rows = sorted(rows, key=lambda r: r[0])
    trace = [(i, a, d, c, m) for i, (a, d, c, m) in enumerate(rows)]
    out, sink = online(tmp_path, trace, BestFit() if best else FirstFit(), sample_every=0.5)
    req, ts = sink.frame("vms"), sink.frame("timeseries")
    regular = ts[ts["event"] == "sample"]
    # a regular sample at t comes after the departures at t and before the arrivals at t
    # events happen at integer times only: compare at the half-integers, where the state
    # is the one the events of the previous integer time left
    half = regular[regular["time"] % 1 == 0.5]
    for t, fr, free in zip(half["time"], half["fragment_rate"], replay(req, half["time"]),
                           strict=True):
        assert fr == pytest.approx(fr_of(free)), t
    # time average over [0, end]: the state is constant between integer times
    end = out["sim_time"]
    if end > 0:
        mids = np.arange(0, end) + 0.5
        frees = replay(req, mids)
        expect = np.mean([fr_of(f) for f in frees])
        assert out["mean_fragment_rate"] == pytest.approx(expect)
    assert out["accepted"] == int(req["accepted"].sum())


def test_departures_release_exactly_once(tmp_path):
    # zero-length and coinciding lifetimes; until after the last departure
    rows = [(i, i // 3, (i * 7) % 4, 1 + (i * 5) % 10, 5) for i in range(30)]
    out, sink = online(tmp_path, rows, until=50.0)
    eng_vms = sink.frame("timeseries")["vms"].tolist()
    assert eng_vms[-1] == 0 and out["accepted"] > 20
    # the model raises (check_invariants) on a double release; one more: free == capacity
    assert out["final_util_cpu"] == 0.0 and out["final_fragment_rate"] == pytest.approx(16 / 80)


def test_periodic_rescheduling_is_valid_and_never_raises_fr():
    spec = {"mapping": {"synthetic": "small", "target_cpu": 0.5},
            "workload": {"synthetic": {"count": 600, "rate": 0.2, "load": 0.9}},
            "reschedule": {"every": 200, "mnl": 5, "algorithm": "greedy"},
            "check_invariants": True}
    sink = Sink()
    out = run_online(spec, FirstFit(), None, np.random.default_rng(3), sink)
    ts = sink.frame("timeseries")
    before = ts[ts["event"] == "before_reschedule"].reset_index(drop=True)
    after = ts[ts["event"] == "after_reschedule"].reset_index(drop=True)
    assert len(before) == len(after) == out["reschedules"] > 5
    assert (after["fragment_rate"] <= before["fragment_rate"] + 1e-12).all()
    assert (after["time"] == before["time"]).all()
    steps = after["migrations_so_far"] - before["migrations_so_far"]
    assert steps.between(0, 5).all() and steps.sum() == out["migrations"] > 0
    assert (after["vms"] == before["vms"]).all()
    req = sink.frame("vms")
    assert req["migrations"].sum() <= out["migrations"]  # initial VMs may move too


class _Bad(Rescheduler):
    name = "bad"

    def reschedule(self, view, mnl):
        return Plan([Migration(0, int(view.vm_host[0]), 0)])  # its own host: invalid


class _Full(Placer):
    name = "always_h0"

    def place(self, vm, view):
        return (0, 0)


class _Junk(Placer):
    name = "junk"

    def place(self, vm, view):
        return "h0"


class _Meddler(Placer):
    """Tries to change the mapping it is shown; records what happened."""

    name = "meddler"
    tried: list[str] = []

    def place(self, vm, view):
        for what, attempt in (("write", lambda: view.free_cpu.__setitem__((0, 0), 0)),
                              ("apply", lambda: view.apply(Migration(0, 1, 0))),
                              ("add", lambda: view.add_vm(vm, 0, 0)),
                              ("set", lambda: setattr(view, "free_cpu", None))):
            try:
                attempt()
                self.tried.append(f"{what}: allowed")
            except (AttributeError, ValueError):
                self.tried.append(f"{what}: refused")
        private = view.copy()           # a private state is mutable
        private.free_cpu[0, 0] = 0
        return FirstFit().place(vm, view)


def test_placers_see_a_read_only_mapping(tmp_path):
    """#17: placers get a read-only view, as allocators do; the run equals first fit's."""
    _Meddler.tried = []
    out, sink = online(tmp_path, HAND, _Meddler())
    assert set(_Meddler.tried) == {"write: refused", "apply: refused", "add: refused",
                                   "set: refused"}
    ref, ref_sink = online(tmp_path, HAND, FirstFit())
    assert out["accepted"] == ref["accepted"]
    assert sink.frame("vms")["host"].tolist() == ref_sink.frame("vms")["host"].tolist()


def test_invalid_choices_are_plugin_errors(tmp_path):
    with pytest.raises(PluginError, match=r"placer 'always_h0' chose host 0 NUMA 0 for VM "
                                          r"'arrival-1'.*has 8 free cpu"):
        online(tmp_path, HAND, _Full())
    with pytest.raises(PluginError, match="placer 'junk' returned 'h0'"):
        online(tmp_path, HAND, _Junk())
    spec = {"mapping": {"hosts": 2, "numa_cpu": 20, "numa_mem": 100},
            "workload": {"trace": {"path": str(write_trace(tmp_path, HAND)),
                                   "mem_unit_mb": 1}},
            "reschedule": {"every": 2, "mnl": 3, "algorithm": "bad"}}
    with pytest.raises(PluginError, match="rescheduler 'bad' returned an invalid"):
        run_online(spec, FirstFit(), lambda name: _Bad, np.random.default_rng(0), None)


def test_same_seed_same_rows_and_seeds_differ():
    spec = {"mapping": {"synthetic": "small", "target_cpu": 0.4},
            "workload": {"synthetic": {"count": 300, "rate": 0.1, "mean_lifetime": 500}},
            "reschedule": {"every": 600, "mnl": 3}, "sample_every": 100}

    def go(seed):
        sink = Sink()
        out = run_online(spec, BestFit(), None, np.random.default_rng(seed), sink)
        for kind in sink.data.values():
            kind.pop("decision_s", None)
        out.pop("mean_decision_s")
        out.pop("reschedule_seconds")
        return out, sink.data

    a, b, c = go(7), go(7), go(8)
    assert a[0] == b[0]
    for kind in ("vms", "timeseries"):
        for col in a[1][kind]:
            assert np.array_equal(a[1][kind][col], b[1][kind][col]), (kind, col)
    assert not np.array_equal(a[1]["vms"]["arrival"], c[1]["vms"]["arrival"])


def test_every_placer_of_a_seed_sees_the_same_vms():
    spec = {"mapping": {"hosts": 3},
            "workload": {"synthetic": {"count": 200, "rate": 1, "load": 1.5}}}
    seen = []
    for p in (BestFit(), FirstFit()):
        sink = Sink()
        run_online(spec, p, None, np.random.default_rng(11), sink)
        seen.append(sink.data["vms"])
    for col in ("id", "arrival", "duration", "cpu", "mem", "numas"):
        assert np.array_equal(seen[0][col], seen[1][col])
    assert not np.array_equal(seen[0]["host"], seen[1]["host"])


# -- trace conversion ---------------------------------------------------------------------------
def test_vm_sizes():
    c, m, n = vm_sizes([1, 8, 2.5, 44, 45, 33], [1.75, 56, 1, 10, 10, 500], 44, 184388)
    assert c.tolist() == [1, 8, 3, 44, 46, 34]
    assert m.tolist() == [1792, 57344, 1024, 10240, 10240, 512000]
    assert n.tolist() == [1, 1, 1, 1, 2, 2]  # 45 cores or 500 GB do not fit one NUMA
    c, m, n = vm_sizes([16, 32, 31], [32, 64, 1], 44, 184388, double_numa_from=32)
    assert n.tolist() == [1, 2, 1] and c.tolist() == [16, 32, 31]


def test_azure_slice_and_spread(tmp_path):
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    t = OnlineSpec.model_validate({
        "mapping": {"hosts": 1}, "workload": {"trace": {
            "path": "traces/azure2017_dev_slice.csv", "spread": 300, "limit": 400,
            "time_scale": 2}}}).workload.trace
    s = trace_stream(t, root, 44, 184388, "vm.workload.trace")
    raw = pd.read_csv(root / "traces/azure2017_dev_slice.csv").iloc[:400]
    assert len(s) == 400 and (s.numas == 1).all() and set(s.cpu) <= {1, 2, 4, 8}
    assert s.mem.tolist()[:3] == [14 * 1024, 768, 3584]
    assert s.arrival[0] == 0 and np.all(np.diff(s.arrival) >= 0)
    first = raw["arrival"] == raw["arrival"].iloc[0]
    n0 = int(first.sum())  # the first 300-s line: spread over [0, 300) x time_scale 2
    assert s.arrival[:n0] == pytest.approx(2 * 300 * np.arange(n0) / n0)
    assert s.duration == pytest.approx(2 * raw["duration"].to_numpy())


def test_engine_vmstream_directly():
    hosts = [Host("a", (4, 4), (10, 10))]
    state = MappingState(hosts, [], [])
    stream = VMStream([0, 1], [0.0, 1.0], [5.0, 1.0], [4, 4], [1, 1], [1, 1])
    spec = OnlineSpec.model_validate({"mapping": {"hosts": 1},
                                      "workload": {"synthetic": {"count": 1, "rate": 1,
                                                                 "mean_lifetime": 1}}})
    out = OnlineEngine(spec, state, stream, FirstFit()).run()
    assert out["accepted"] == 2 and out["sim_time"] == 1.0
    # FR: t in [0, 1): free [0, 4] -> 4/4 = 1; at the end [0, 0] -> 0
    assert out["mean_fragment_rate"] == pytest.approx(1.0)
    assert out["final_fragment_rate"] == 0.0 and out["final_util_cpu"] == 1.0


# -- the vm: section -------------------------------------------------------------------------------
GOOD = {"mapping": {"hosts": 4},
        "workload": {"trace": {"path": "x.csv"}},
        "reschedule": {"every": 3600, "mnl": 50, "algorithm": "greedy"}}


@pytest.mark.parametrize(("change", "field"), [
    ({"reschedule": {"every": 3600, "mnl": -1}}, "vm.reschedule.mnl"),
    ({"reschedule": {"every": 0, "mnl": 1}}, "vm.reschedule.every"),
    ({"reschedule": {"mnl": 1}}, "vm.reschedule.every"),
    ({"reschedule": {"every": 1, "mnl": 1, "algorithm": "nope"}}, "vm.reschedule.algorithm"),
    ({"reschedule": {"every": 1, "mnl": 1, "options": {"max_vm_cpu": 0}}},
     "vm.reschedule.options.max_vm_cpu"),
    ({"reschedule": {"every": 1, "mnl": 1, "options": {"alpha": 3}}},
     "vm.reschedule.options.alpha"),
    ({"workload": {"trace": {"path": "x.csv", "time_scale": 0}}}, "vm.workload.trace.time_scale"),
    ({"workload": {"trace": {"path": "missing.csv"}}}, "vm.workload.trace.path"),
    ({"workload": {}}, "vm.workload"),
    ({"workload": {"synthetic": {"count": 5, "rate": 1}}}, "vm.workload.synthetic"),
    ({"workload": {"synthetic": {"count": 0, "rate": 1, "load": 1}}},
     "vm.workload.synthetic.count"),
    ({"mapping": {}}, "vm.mapping"),
    ({"mapping": {"hosts": 0}}, "vm.mapping.hosts"),
    ({"mapping": {"path": "m.json", "hosts": 3}}, "vm.mapping.path"),
    ({"mapping": {"hosts": 3, "target_cpu": 0.5}}, "vm.mapping.target_cpu"),
    ({"mapping": {"synthetic": "huge"}}, "vm.mapping.synthetic"),
    ({"sample_every": -5}, "vm.sample_every"),
    ({"colour": 1}, "vm.colour"),
])
def test_bad_vm_fields_name_the_field(tmp_path, change, field):
    (tmp_path / "x.csv").write_text("arrival,duration,cpu,mem\n0,1,1,1\n")
    spec = {**GOOD, **change}
    with pytest.raises(ConfigError) as e:
        check_online(spec, tmp_path)
    assert str(e.value).startswith(field + ":"), str(e.value)
    with pytest.raises(ConfigError) as e2:
        run_online(spec, FirstFit(), None, np.random.default_rng(0), None, base_dir=tmp_path)
    assert str(e2.value).startswith(field + ":"), str(e2.value)


def test_good_spec_checks_and_where_prefix(tmp_path):
    (tmp_path / "x.csv").write_text("arrival,duration,cpu,mem\n0,1,1,1\n")
    s = check_online(GOOD, tmp_path)
    assert s.reschedule.mnl == 50 and s.mapping.hosts == 4
    with pytest.raises(ConfigError, match=r"^exp.yaml: vm.reschedule.mnl:"):
        check_online({**GOOD, "reschedule": {"every": 1, "mnl": -2}}, tmp_path,
                     where="exp.yaml: vm")
    out = run_online({**GOOD, "reschedule": None}, BestFit(), None,
                     np.random.default_rng(0), None, base_dir=tmp_path)
    # end = 0 (the only arrival): the mean is the state at 0: 1 core on h0 N0: 44 -> 43,
    # fragment 7 x 12 + 11 = 95 of 351 free
    assert out["received"] == 1 and out["accepted"] == 1
    assert math.isclose(out["mean_fragment_rate"], 95 / 351)


def test_parse_online_checks_fields_and_rescheduler_but_not_files():
    s = parse_online({**GOOD, "workload": {"trace": {"path": "not/there.csv"}}})
    assert s.workload.trace.path == "not/there.csv"
    with pytest.raises(ConfigError, match=r"^vm.reschedule.algorithm: unknown rescheduler"):
        parse_online({**GOOD, "reschedule": {"every": 1, "mnl": 1, "algorithm": "x"}})
