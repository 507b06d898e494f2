"""Component failures (``failures:``): hand-worked cases in loss and vm_online modes, the
invariants with failures on (hypothesis), and the failure schedule itself."""

from __future__ import annotations

import math
from collections import Counter
from types import GeneratorType

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dcsim.allocators.base import Allocator
from dcsim.errors import ConfigError, PluginError
from dcsim.experiment_sections import parse_failures
from dcsim.model import Placement
from dcsim.modes.loss import Engine
from dcsim.modes.loss.failures import LossFailures
from dcsim.sim.failures import Components, FailureSchedule, failure_rng
from tests.helpers.failures import Tables, run_vm
from tests.helpers.sources import ListSource, random_source
from tests.helpers.trees import star_topology


class FirstUp(Allocator):
    """The lowest-indexed server that fits (``view.fits`` leaves failed servers out);
    records every call."""

    name = "first_up"

    def __init__(self, **kw):
        super().__init__(**kw)
        self.calls: list[tuple] = []

    def allocate(self, request, view):
        fit = np.flatnonzero(view.fits(request.demand))
        self.calls.append(("allocate", request.id, view.now, request.duration))
        return int(fit[0]) if fit.size else None

    def released(self, request, placement, view):
        self.calls.append(("released", request.id, view.now))

    def failed(self, kind, index, view):
        self.calls.append(("failed", kind, index, view.now))

    def repaired(self, kind, index, view):
        self.calls.append(("repaired", kind, index, view.now))


def trace_file(tmp_path, rows):
    p = tmp_path / "failures.csv"
    p.write_text("time,kind,component,duration\n"
                 + "".join(f"{t},{k},{c},{d}\n" for t, k, c, d in rows))
    return p


def run_loss(topology, source, allocator, failures: dict, tmp_path=None, seed=0, **cfg):
    from dcsim.modes.loss import EngineConfig

    spec = parse_failures(failures)
    sink = Tables()
    eng = Engine(topology, source, allocator, np.random.default_rng(seed),
                 EngineConfig(**cfg), sink=sink,
                 failures=lambda e: LossFailures(e, spec, failure_rng(seed, 0),
                                                 str(tmp_path) if tmp_path else None))
    return eng, eng.run(), sink.tables


# ------------------------------------------------------------------------------ by hand
def two_requests():
    # request 0 holds 4 cpu from 0 to 10; request 1 (1 cpu) arrives at 6 and ends the window
    return ListSource([0.0, 6.0], [10.0, 1.0], [[4, 4], [1, 1]])


def test_a_server_failure_drops_the_request_on_it(tmp_path):
    trace = trace_file(tmp_path, [(3, "server", 0, 2)])
    alloc = FirstUp()
    eng, out, tables = run_loss(star_topology(2), two_requests(), alloc,
                                {"trace": {"path": str(trace)}})
    assert (out["n_failures"], out["interrupted"], out["reallocated"]) == (1, 1, 0)
    assert out["lost_request_time"] == pytest.approx(7.0)   # 10 - 3
    # request 0 holds 4 of 16 cpu over [0, 3] of the window [0, 6]
    assert out["util_cpu"] == pytest.approx(4 * 3 / (16 * 6))
    # server 0 (half the cpu) is down over [3, 5]
    assert out["avail_cpu"] == pytest.approx((4 * 1 + 2 * 0.5) / 6)
    # request 1 arrived after the repair: server 0 is up again and takes it
    assert ("allocate", 1, 6.0, 1.0) in alloc.calls
    assert alloc.calls.count(("released", 0, 3.0)) == 1
    assert not any(c[:2] == ("released", 0) and c[2] != 3.0 for c in alloc.calls)
    assert ("failed", "server", 0, 3.0) in alloc.calls
    assert ("repaired", "server", 0, 5.0) in alloc.calls
    assert eng.released == eng.accepted == 2
    np.testing.assert_array_equal(eng.state.free, eng.state.capacity)
    f = tables["component_failures"]
    assert f["event"] == ["fail", "repair"] and f["time"] == [3.0, 5.0]
    assert f["interrupted"] == [1, 0] and f["avail_cpu"] == [0.5, 1.0]


def test_reallocate_moves_the_request_with_its_remaining_time(tmp_path):
    trace = trace_file(tmp_path, [(3, "server", 0, 2)])
    alloc = FirstUp()
    eng, out, _ = run_loss(star_topology(2), two_requests(), alloc,
                           {"trace": {"path": str(trace)}, "on_failure": "reallocate"})
    assert (out["interrupted"], out["reallocated"], out["lost_request_time"]) == (1, 1, 0.0)
    # offered again at 3 with the 7 time units left; server 0 is down, so server 1
    assert ("allocate", 0, 3.0, 7.0) in alloc.calls
    order = [c[0] for c in alloc.calls if c[0] != "allocate" or c[1] == 0]
    assert order[:4] == ["allocate", "released", "failed", "allocate"]
    # it keeps its departure time: released at 10, once more (one release per placement)
    assert ("released", 0, 10.0) in alloc.calls
    assert sum(c[:2] == ("released", 0) for c in alloc.calls) == 2
    # request 0 holds 4 cpu all through the window [0, 6] (on server 0, then on server 1)
    assert out["util_cpu"] == pytest.approx(4 * 6 / (16 * 6))
    np.testing.assert_array_equal(eng.state.free, eng.state.capacity)
    assert eng.released == eng.accepted == 2


def test_a_request_that_fits_nowhere_after_the_failure_is_dropped(tmp_path):
    # both servers full-ish: the interrupted request cannot move, so it is dropped
    src = ListSource([0.0, 0.5, 6.0], [10.0, 10.0, 1.0], [[6, 6], [6, 6], [1, 1]])
    trace = trace_file(tmp_path, [(3, "server", 0, 2)])
    eng, out, _ = run_loss(star_topology(2), src, FirstUp(),
                           {"trace": {"path": str(trace)}, "on_failure": "reallocate"})
    assert (out["interrupted"], out["reallocated"]) == (1, 0)
    assert out["lost_request_time"] == pytest.approx(7.0)


class TwoServers(Allocator):
    """Every request on two servers joined through the star's switch, avoiding failed
    servers and links (a multi-server placement with bandwidth)."""

    name = "two_servers"

    def allocate(self, request, view):
        up = np.ones(view.topology.n_servers, bool) if view.server_up is None else \
            view.server_up.copy()
        if view.link_up is not None:
            up &= view.link_up  # in the star, link i is server i's
        half = request.demand / 2
        ok = np.flatnonzero(up & view.fits(half) & (view.link_free >= request.bandwidth))
        if ok.size < 2:
            return None
        s = ok[:2]
        return Placement(s, np.repeat(half[None], 2, axis=0), links=s,
                         bandwidth=np.full(2, request.bandwidth))


def test_a_link_failure_reembeds_a_multi_server_request_whole(tmp_path):
    src = ListSource([0.0, 6.0], [10.0, 1.0], [[4, 4], [2, 2]], bandwidth=[3.0, 1.0])
    trace = trace_file(tmp_path, [(3, "link", 1, 2)])
    eng, out, tables = run_loss(star_topology(3), src, TwoServers(),
                                {"trace": {"path": str(trace)}, "on_failure": "reallocate"})
    assert (out["interrupted"], out["reallocated"]) == (1, 1)
    # re-embedded on servers 0 and 2 while link 1 is down: the star's link tier keeps
    # 2 of 3 links up over [3, 5] of the window [0, 6]
    tier = next(k for k in out if k.startswith("avail_bw_"))
    assert out[tier] == pytest.approx((4 * 1 + 2 * 2 / 3) / 6)
    np.testing.assert_allclose(eng.state.link_free, eng.state.link_capacity)
    assert eng.released == eng.accepted == 2
    assert tables["component_failures"]["kind"] == ["link", "link"]


def test_an_allocator_that_uses_a_failed_server_is_an_error(tmp_path):
    class Stubborn(Allocator):
        name = "stubborn"

        def allocate(self, request, view):
            return 0

    trace = trace_file(tmp_path, [(0.5, "server", 0, 5)])
    src = ListSource([0.0, 1.0], [0.1, 1.0], [[1, 0], [1, 0]])
    with pytest.raises(PluginError, match="server 0, which has failed"):
        run_loss(star_topology(2), src, Stubborn(), {"trace": {"path": str(trace)}})


def test_virtual_clusters_are_reembedded_after_a_link_failure():
    from dcsim.plugins import get_plugin_class
    from tests.helpers.trees import fat_tree

    topo, _ = fat_tree(2, 2, 2)
    cls = get_plugin_class("oktopus", "allocator")
    rng = np.random.default_rng(1)
    n = 120
    N, S = rng.integers(2, 6, n), rng.integers(1, 3, n)
    src = ListSource(np.cumsum(rng.exponential(0.3, n)), rng.exponential(4, n),
                     np.c_[N * S], attrs={"N": N, "S": S, "B": rng.uniform(0.5, 3, n)})
    alloc = Counting(cls(cls.parse_options({}), rng=np.random.default_rng(0), topology=topo))
    eng, out, _ = run_loss(topo, src, alloc, {
        "on_failure": "reallocate",
        "links": {"ttf": {"dist": "exponential", "mean": 20}, "ttr": 2},
        "servers": {"ttf": {"dist": "exponential", "mean": 40}, "ttr": 3}})
    assert out["interrupted"] > 0 and out["reallocated"] > 0
    alloc.check_released_once()
    assert eng.released == eng.accepted


# ------------------------------------------------------------------------------ invariants
class Counting(Allocator):
    """Wraps an allocator: counts placements and releases per request, and checks the
    state against the *available* capacity at every call."""

    name = "counting"

    def __init__(self, inner: Allocator):
        super().__init__(rng=inner.rng, topology=inner.topology)
        self.inner = inner
        self.placed: Counter = Counter()
        self.freed: Counter = Counter()
        self.view = None

    def setup(self, view):
        self.view = view
        self.inner.setup(view)

    def check(self, view):
        up = np.ones(len(view.free), bool) if view.server_up is None else view.server_up
        assert (view.free >= 0).all() and (view.link_free >= 0).all()
        assert (view.free <= view.capacity * up[:, None] + 1e-9).all()
        lup = np.ones(len(view.link_free), bool) if view.link_up is None else view.link_up
        assert (view.link_free <= view.link_capacity * lup + 1e-9).all()

    def allocate(self, request, view):
        self.check(view)
        choice = self.inner.allocate(request, view)
        if isinstance(choice, GeneratorType):  # a stepwise decision (after_first_step)
            return self._counted(request, choice)
        if choice is not None:
            self.placed[request.id] += 1
        return choice

    def _counted(self, request, steps):
        choice = yield from steps  # FIRST_STEP and any events go on to the engine
        if choice is not None:
            self.placed[request.id] += 1
        return choice

    def released(self, request, placement, view):
        self.check(view)
        self.freed[request.id] += 1
        self.inner.released(request, placement, view)

    def failed(self, kind, index, view):
        self.check(view)
        self.inner.failed(kind, index, view)

    def repaired(self, kind, index, view):
        self.check(view)
        self.inner.repaired(kind, index, view)

    def check_released_once(self):
        assert self.placed == self.freed  # every placement released exactly once


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), reallocate=st.booleans(),
       name=st.sampled_from(["first_fit", "best_fit", "random", "tetris"]),
       ttf=st.floats(1.0, 30.0), ttr=st.floats(0.1, 10.0))
def test_invariants_with_server_failures(seed, reallocate, name, ttf, ttr):
    from dcsim.plugins import get_plugin_class

    topo = star_topology(6)
    cls = get_plugin_class(name, "allocator")
    inner = cls(cls.parse_options({}), rng=np.random.default_rng(seed), topology=topo)
    alloc = Counting(inner)
    src = random_source(np.random.default_rng(seed), 80)
    eng, out, _ = run_loss(topo, src, alloc, {
        "on_failure": "reallocate" if reallocate else "drop",
        "servers": {"ttf": {"dist": "exponential", "mean": ttf}, "ttr": ttr}}, seed=seed)
    alloc.check_released_once()
    assert eng.released == eng.accepted
    assert not eng.meter.active
    up = eng.view.server_up
    np.testing.assert_allclose(eng.state.free[up], eng.state.capacity[up])
    assert (eng.state.free[~up] == 0).all()
    assert out["reallocated"] <= out["interrupted"]
    if not reallocate:
        assert out["reallocated"] == 0


@settings(max_examples=16, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), reallocate=st.booleans(),
       name=st.sampled_from(["tetris", "nalb", "nulb", "random_multi",
                             "best_fit_multi"]),
       authors_env=st.booleans())
def test_invariants_with_server_and_link_failures_on_a_fabric(seed, reallocate, name,
                                                              authors_env):
    """...also in the Nara authors' environment (capacity: wait, departures:
    after_first_step), as experiments/failures_fabric.yaml runs it."""
    from dcsim.model.topologies import build_topology
    from dcsim.plugins import get_plugin_class
    from dcsim.workload.spec import build_source

    topo = build_topology({"kind": "fabric", "preset": "alpha"})
    src = build_source({"requests": 60, "arrival": {"process": "tick"},
                        "demand": {"cpu": {"dist": "uniform_int", "low": 1, "high": 50},
                                   "mem": {"dist": "uniform_int", "low": 1, "high": 50}},
                        "duration": {"dist": "uniform_int", "low": 1, "high": 30},
                        "bandwidth": {"dist": "uniform", "low": 0.1, "high": 1.0}}, topo)
    cls = get_plugin_class(name, "allocator")
    alloc = Counting(cls(cls.parse_options({}), rng=np.random.default_rng(seed),
                         topology=topo))
    env = {"capacity": "wait", "departures": "after_first_step"} if authors_env else {}
    eng, out, _ = run_loss(topo, src, alloc, {
        "on_failure": "reallocate" if reallocate else "drop",
        "servers": {"ttf": {"dist": "exponential", "mean": 100}, "ttr": 5},
        "links": {"ttf": {"dist": "exponential", "mean": 100}, "ttr": 5}}, seed=seed,
        **env)
    alloc.check_released_once()
    assert eng.released == eng.accepted
    np.testing.assert_allclose(eng.state.link_free[eng.view.link_up],
                               eng.state.link_capacity[eng.view.link_up])
    assert (eng.state.link_free[~eng.view.link_up] == 0).all()


# ------------------------------------------------------------------------------ schedule
def test_drawn_failures_alternate_and_do_not_depend_on_anything_but_the_seed():
    spec = parse_failures({"servers": {"ttf": {"dist": "exponential", "mean": 10},
                                       "ttr": {"dist": "exponential", "mean": 2}}})

    def events(seed):
        s = FailureSchedule(spec, Components(4), failure_rng(seed, 0))
        return [s.pop() for _ in range(200)]

    a = events(7)
    assert a == events(7) and a != events(8)
    assert [t for t, *_ in a] == sorted(t for t, *_ in a)
    for c in range(4):
        kinds = [e for _t, _k, comp, e in a if comp == c]
        assert kinds == ["fail", "repair"] * (len(kinds) // 2) + ["fail"] * (len(kinds) % 2)
    # mean down time ≈ 2, mean up time ≈ 10 over many draws
    s = FailureSchedule(spec, Components(1), failure_rng(1, 0))
    ev = [s.pop() for _ in range(4000)]
    down = [ev[i + 1][0] - ev[i][0] for i in range(0, len(ev) - 1, 2)]
    up = [ev[i + 1][0] - ev[i][0] for i in range(1, len(ev) - 1, 2)]
    assert np.mean(down) == pytest.approx(2, rel=0.1)
    assert np.mean(up) == pytest.approx(10, rel=0.1)


def test_link_tiers_pick_their_own_lifetimes():
    comps = Components(2, 4, ["edge", "edge", "core", "core"], {"edge": 1, "core": 2})
    spec = parse_failures({"links": {"tiers": {"core": {"ttf": 5, "ttr": 1}}}})
    s = FailureSchedule(spec, comps, np.random.default_rng(0))
    first = [s.pop() for _ in range(4)]
    assert {c for _t, _k, c, _e in first} == {2, 3}   # only the core links fail
    assert all(k == "link" for _t, k, _c, _e in first)
    with pytest.raises(ConfigError, match=r"failures.links.tiers.spine: no such tier"):
        FailureSchedule(parse_failures({"links": {"tiers": {"spine": {"ttf": 5, "ttr": 1}}}}),
                        comps, np.random.default_rng(0))


@pytest.mark.parametrize("section, message", [
    ({}, "failures: name servers, links or a trace"),
    ({"servers": {"ttf": 0, "ttr": 1}}, "failures.servers.ttf: its mean must be positive"),
    ({"servers": {"ttf": {"dist": "normal", "mean": 5, "std": 1}, "ttr": 1}},
     "failures.servers.ttf: can draw negative times"),
    ({"servers": {"ttf": 5}}, "failures.servers.ttr: Field required"),
    ({"links": {"ttf": 5}}, "failures.links: ttf and ttr go together"),
    ({"servers": {"ttf": 5, "ttr": 1}, "on_failure": "retry"}, "failures.on_failure"),
])
def test_bad_sections_name_the_field(section, message):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        parse_failures(section)


@pytest.mark.parametrize("rows, message", [
    ("time,kind,component\n1,server,0\n", "missing column 'duration'"),
    ("time,kind,component,duration\n1,disk,0,1\n", "row 2: kind 'disk'"),
    ("time,kind,component,duration\n1,server,0,1\n2,server,9,1\n", "row 3: there is no server 9"),
    ("time,kind,component,duration\n-1,server,0,1\n", "row 2: time must be >= 0"),
    ("time,kind,component,duration\n1,link,0,1\n", "row 2: there is no link 0"),
])
def test_bad_failure_traces_name_the_row(tmp_path, rows, message):
    p = tmp_path / "f.csv"
    p.write_text(rows)
    with pytest.raises(ConfigError, match=message):
        FailureSchedule(parse_failures({"trace": {"path": str(p)}}), Components(3),
                        np.random.default_rng(0))


def test_overlapping_replayed_failures_keep_the_component_down_until_the_last_repair(
        tmp_path):
    trace = trace_file(tmp_path, [(1, "server", 0, 4), (2, "server", 0, 1)])
    alloc = FirstUp()
    src = ListSource([0.0, 6.0], [0.5, 1.0], [[1, 1], [1, 1]])
    _, out, tables = run_loss(star_topology(2), src, alloc, {"trace": {"path": str(trace)}})
    assert tables["component_failures"]["event"] == ["fail", "repair"]
    assert tables["component_failures"]["time"] == [1.0, 5.0]
    assert out["avail_cpu"] == pytest.approx((2 * 1 + 4 * 0.5) / 6)
    assert math.isfinite(out["avail_mem"])


# ------------------------------------------------------------------------------ vm_online
VMS = [  # id, arrival, duration, cpu, mem      first fit on 2 hosts x 2 NUMAs x 20 cores
    (0, 0, 10, 12, 10),   # h0 N0
    (1, 1, 10, 6, 10),    # h0 N0 (6 <= 8 free)
    (2, 2, 3, 4, 10),     # h0 N1
    (3, 6, 2, 4, 10),     # at 6 host 0 is down: h1 N0
]


@pytest.mark.parametrize("on_failure", ["drop", "reallocate"])
def test_a_host_failure_drops_or_replaces_its_vms(tmp_path, on_failure):
    trace = trace_file(tmp_path, [(2.5, "host", 0, 5)])   # host 0 down over [2.5, 7.5]
    out, tables = run_vm(tmp_path, VMS, {"trace": {"path": str(trace)},
                                         "on_failure": on_failure}, sample_every=1.0)
    f = tables["component_failures"]
    assert f["event"] == ["fail", "repair"] and f["interrupted"] == [3, 0]
    vms = tables["vms"]
    assert list(vms["interruptions"]) == [1, 1, 1, 0]
    assert list(vms["host"]) == [0, 0, 0, 1]          # the host at arrival
    assert out["n_failures"] == 1 and out["interrupted"] == 3
    if on_failure == "drop":
        assert out["reallocated"] == 0
        # VM 0 loses 10 - 2.5, VM 1 11 - 2.5, VM 2 5 - 2.5
        assert out["lost_vm_time"] == pytest.approx(7.5 + 8.5 + 2.5)
    else:
        assert out["reallocated"] == 3 and out["lost_vm_time"] == 0.0
    # every VM has left by 20: everything is free again (check_invariants ran throughout)
    assert out["final_util_cpu"] == 0.0
    ts = dict(zip(tables["timeseries"]["time"], tables["timeseries"]["avail_cpu"],
                  strict=True))
    assert (ts[2.0], ts[3.0], ts[7.0], ts[8.0]) == (1.0, 0.5, 0.5, 1.0)
    # half the capacity is down for 5 of the 20 time units
    assert out["avail_cpu"] == pytest.approx(1 - 0.5 * 5 / 20)


def test_a_placer_hears_of_departures_failures_and_repairs(tmp_path):
    """Placers get the allocators' optional hooks: ``released`` at each departure and for
    each VM a failure interrupts (before it is placed again), ``failed`` after those and
    ``repaired`` when the host is back; each sees the mapping as it is then."""
    from dcsim.placers.builtin import FirstFit

    class Listening(FirstFit):
        name = "listening_first_fit"

        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            self.heard = []

        def released(self, vm, placement, view):
            self.heard.append(("released", vm.id, placement, bool(view.host_up[0])))

        def failed(self, kind, index, view):
            self.heard.append(("failed", kind, index, bool(view.host_up[index])))

        def repaired(self, kind, index, view):
            self.heard.append(("repaired", kind, index, bool(view.host_up[index])))

    trace = trace_file(tmp_path, [(2.5, "host", 0, 5)])   # host 0 down over [2.5, 7.5]
    placer = Listening()
    out, _ = run_vm(tmp_path, VMS, {"trace": {"path": str(trace)}, "on_failure": "drop"},
                    placer=placer)
    # at 2.5 VMs 0, 1 (h0 N0) and 2 (h0 N1) are interrupted, then host 0 fails; VM 3
    # arrives at 6 on h1 N0 and leaves at 8; host 0 is back at 7.5
    assert placer.heard == [("released", "arrival-0", (0, 0), False),
                            ("released", "arrival-1", (0, 0), False),
                            ("released", "arrival-2", (0, 1), False),
                            ("failed", "server", 0, False), ("repaired", "server", 0, True),
                            ("released", "arrival-3", (1, 0), True)]
    assert out["interrupted"] == 3


def test_a_failed_host_takes_no_vm_and_counts_as_not_used(tmp_path):
    trace = trace_file(tmp_path, [(0.5, "server", 0, 100)])   # host 0 down from 0.5 on
    rows = [(0, 0, 0.2, 2, 10), (1, 1, 30, 12, 10), (2, 2, 30, 12, 10)]
    out, tables = run_vm(tmp_path, rows, {"trace": {"path": str(trace)}})
    assert list(tables["vms"]["host"]) == [0, 1, 1]
    # at the end: 24 of 80 cores used (host 0's 40 are down, not used)
    assert out["final_util_cpu"] == pytest.approx(24 / 80)


def test_vm_online_refuses_link_failures(tmp_path):
    with pytest.raises(ConfigError, match="failures.links: this run has no links"):
        run_vm(tmp_path, VMS, {"links": {"ttf": 5, "ttr": 1}})


# ------------------------------------------------------------------------------ the CLI
def test_same_seed_same_rows_with_failures_serial_and_two_processes(tmp_path):
    import pandas as pd
    import yaml

    from tests.helpers.cli import assert_same_dataset, ok

    cfg = yaml.safe_load(open("experiments/failures_fabric.yaml"))
    cfg["workload"]["requests"] = 60
    cfg["allocators"] = cfg["allocators"][:2] + ["best_fit_multi"]
    cfg["matrix"]["failures"] = cfg["matrix"]["failures"][2:4]
    for f in cfg["matrix"]["failures"]:   # frequent enough to hit requests in 60 ticks
        f["servers"]["ttf"]["mean"] = 40
    cfg["seeds"] = 2
    path = tmp_path / "f.yaml"
    path.write_text(yaml.safe_dump(cfg))
    ok("run", path, "--out", tmp_path / "a")
    ok("run", path, "--out", tmp_path / "b", "--jobs", "2")
    assert_same_dataset(tmp_path / "a", tmp_path / "b", runs=12)
    fa, fb = (pd.read_parquet(tmp_path / x / "component_failures").sort_values(
        ["allocator", "seed", "failures", "time", "event"], ignore_index=True)
        for x in "ab")
    pd.testing.assert_frame_equal(fa, fb)
    s = pd.read_parquet(tmp_path / "a" / "summary.parquet")
    assert s["interrupted"].sum() > 0 and set(s["failures"]) == {
        "servers/reallocate", "servers+links/drop"}
    # every allocator of a seed saw the same failures (as long as its run lasted: a run
    # ends when its last request leaves)
    fails = fa[fa["event"] == "fail"]
    for _, group in fails.groupby(["failures", "seed"]):
        seen = [tuple(zip(g["time"], g["component"], strict=True))
                for _, g in group.groupby("allocator")]
        n = min(len(x) for x in seen)
        assert len(seen) == 3 and n > 0 and all(x[:n] == seen[0][:n] for x in seen)


def test_a_bad_failure_trace_is_one_clear_error(tmp_path):
    import yaml

    from tests.helpers.cli import invoke

    (tmp_path / "f.csv").write_text("time,kind,component,duration\n1,server,99,2\n")
    cfg = {"name": "x", "topology": {"kind": "flat", "servers": 4, "server": {"cpu": 4}},
           "workload": {"requests": 10, "arrival": {"process": "tick"},
                        "demand": {"cpu": 1}, "duration": 2},
           "allocators": ["first_fit"], "failures": {"trace": {"path": "f.csv"}}}
    (tmp_path / "x.yaml").write_text(yaml.safe_dump(cfg))
    r = invoke("run", tmp_path / "x.yaml", "--out", tmp_path / "out")
    assert r.exit_code != 0
    assert "f.csv: row 2: there is no server 99 (4 servers" in r.output
    assert "Traceback" not in r.output
    cfg["mode"] = "queue"
    cfg["schedulers"] = cfg.pop("allocators")
    (tmp_path / "q.yaml").write_text(yaml.safe_dump(cfg))
    r = invoke("run", tmp_path / "q.yaml", "--out", tmp_path / "q")
    assert r.exit_code != 0
    assert "failures: not used in mode 'queue' (only modes loss, vm_online and gpu read it)" \
        in r.output


def test_a_link_failure_under_a_virtual_cluster_by_hand(tmp_path):
    """OKTOPUS embeds a 2-VM cluster (6 CU each on 8-CU hosts: two hosts, a link each);
    the link carrying the most of it fails: the cluster is re-embedded whole, off that link,
    and keeps its departure time; the repair restores the link."""
    from dcsim.plugins import get_plugin_class
    from tests.helpers.trees import fat_tree

    topo, _ = fat_tree(1, 2, 2)   # 4 hosts, 2 racks
    cls = get_plugin_class("oktopus", "allocator")
    choices = []

    class Recording(cls):
        def allocate(self, request, view):
            p = super().allocate(request, view)
            choices.append((view.now, p))
            return p

    def run(failures, src):
        choices.clear()
        alloc = Recording(cls.parse_options({}), rng=np.random.default_rng(0), topology=topo)
        return run_loss(topo, src, alloc, failures)

    vc = {"N": [2, 1], "S": [6, 1], "B": [2.0, 0.0]}
    src = ListSource([0.0, 9.0], [10.0, 0.5], [[12], [1]], attrs=vc)
    # where it goes without failures (a failure long after the run ends changes nothing)
    run({"trace": {"path": str(trace_file(tmp_path, [(50, "link", 0, 1)]))}}, src)
    first = choices[0][1]
    assert first.servers.size == 2 and first.links.size >= 2
    failed = int(first.links[np.argmax(first.bandwidth)])
    eng, out, tables = run({"trace": {"path": str(trace_file(tmp_path, [(4, "link", failed, 2)]))},
                            "on_failure": "reallocate"}, src)
    assert (out["interrupted"], out["reallocated"]) == (1, 1)
    (t0, p0), (t1, p1) = choices[0], choices[1]
    assert (t0, t1) == (0.0, 4.0)
    np.testing.assert_array_equal(p0.servers, first.servers)
    assert failed in p0.links.tolist() and failed not in p1.links.tolist()
    # the re-embedded cluster departs at 10 as planned; everything is back at the end
    assert tables["component_failures"]["time"] == [4.0, 6.0]
    np.testing.assert_allclose(eng.state.link_free, eng.state.link_capacity)
    np.testing.assert_allclose(eng.state.free, eng.state.capacity)
    assert eng.released == eng.accepted == 2


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                               HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 15), st.integers(1, 24),
                               st.integers(1, 150)), min_size=1, max_size=40),
       reallocate=st.booleans(), resched=st.booleans(), seed=st.integers(0, 1000))
def test_vm_online_invariants_with_host_failures(tmp_path, rows, reallocate, resched, seed):
    """Random VMs, random host failures, with and without rescheduling: the mapping's
    invariants hold after every event (check_invariants), nothing sits on a failed host,
    and every VM is accounted for (placed, departed, or dropped by a failure, once)."""
    import pandas as pd

    from dcsim.modes.vm_online.engine import run_online
    from dcsim.placers.builtin import BestFit

    vms = sorted(((i, a, d, c, m) for i, (a, d, c, m) in enumerate(rows)), key=lambda r: r[1])
    p = tmp_path / "vms.csv"
    pd.DataFrame(vms, columns=["id", "arrival", "duration", "cpu", "mem"]).to_csv(p,
                                                                                index=False)
    spec = {"mapping": {"hosts": 3, "numa_cpu": 20, "numa_mem": 100},
            "workload": {"trace": {"path": p.name, "mem_unit_mb": 1}},
            "check_invariants": True, "until": 60.0, "sample_every": 5.0}
    if resched:
        spec["reschedule"] = {"every": 7.0, "mnl": 3, "algorithm": "greedy"}
    sink = Tables()
    out = run_online(spec, BestFit(), None, np.random.default_rng(0), sink,
                     base_dir=tmp_path, failures=parse_failures(
                         {"on_failure": "reallocate" if reallocate else "drop",
                          "servers": {"ttf": {"dist": "exponential", "mean": 15},
                                      "ttr": {"dist": "exponential", "mean": 4}}}),
                     failure_rng=failure_rng(seed, 0))
    assert out["reallocated"] <= out["interrupted"]
    assert (np.asarray(sink.tables["vms"]["interruptions"]) >= 0).all()
    assert 0.0 <= out["final_util_cpu"] <= 1.0 and 0.0 < out["avail_cpu"] <= 1.0
    if not reallocate:
        assert out["reallocated"] == 0
