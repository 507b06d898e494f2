"""The rack index (dcsim.allocators.multi.rack_index) stays exact, and the choices made
with it are the full scan's, bit for bit (issue #19).

Slow reference implementations live here, not in the package: the aggregates recomputed from
scratch, and the breadth-first search of NALB/NULB offering one server at a time.
"""

from __future__ import annotations

from collections import deque

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dcsim.allocators.multi.baselines import NALB, NULB, BestFitMulti, Tetris
from dcsim.allocators.multi.rack_index import (
    RackIndex,
    bound_sum,
    matvec,
    rack_groups,
    server_links,
)
from dcsim.model import ClusterState, Placement, Request, StateView, Topology
from dcsim.model.state import EPS
from dcsim.model.topologies import build_topology

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def topologies(draw) -> Topology:
    """Racks of servers under ToR switches, pods of racks under aggregation switches; some
    servers of unknown rack or pod, some with a second link, capacities differing."""
    g = nx.Graph()
    n_pods = draw(st.integers(1, 3))
    s = 0
    for p in range(n_pods):
        g.add_node(f"a{p}", kind="switch", tier=2)
        for r in range(draw(st.integers(1, 3))):
            tor = f"t{p}_{r}"
            g.add_node(tor, kind="switch", tier=1)
            g.add_edge(tor, f"a{p}", capacity=draw(st.sampled_from([2.0, 4.0])))
            for _ in range(draw(st.integers(1, 4))):
                attrs = {"cpu": draw(st.sampled_from([4.0, 8.0, 10.0])),
                         "mem": draw(st.sampled_from([4.0, 10.0]))}
                if draw(st.integers(0, 9)):
                    attrs["rack"] = p * 10 + r
                if draw(st.integers(0, 9)):
                    attrs["pod"] = p
                g.add_node(f"h{s}", kind="server", **attrs)
                g.add_edge(f"h{s}", tor, capacity=draw(st.sampled_from([1.0, 2.0])))
                if draw(st.integers(0, 9)) == 0:  # a second link, to the pod's switch
                    g.add_edge(f"h{s}", f"a{p}", capacity=1.0)
                s += 1
    for p in range(1, n_pods):
        g.add_edge("a0", f"a{p}", capacity=4.0)
    return Topology.from_graph(g, name="random")


def recomputed(ix: RackIndex) -> dict[str, np.ndarray]:
    """The index's aggregates computed from scratch, server by server."""
    gr, view = ix.groups, ix.view
    out = {"free": np.zeros_like(ix.free_max), "links": np.full(gr.n_groups, -np.inf)}
    for k in ix.weights:
        out[k] = np.zeros_like(ix.weighted[k])
    inc, pad = server_links(view.topology)
    for g in range(gr.n_groups):
        members = [i for i in range(view.free.shape[0]) if gr.gid[i] == g]
        out["free"][g] = np.max(view.free[members], axis=0)
        for k, w in ix.weights.items():
            out[k][g] = np.max(view.free[members] * w[members], axis=0)
        for i in members:
            for j, ln in enumerate(inc[i]):
                if not pad[i, j]:
                    out["links"][g] = max(out["links"][g], view.link_free[ln])
    return out


@FAST
@given(topologies(), st.data())
def test_the_aggregates_equal_a_recomputation_after_any_changes(topo, data):
    """Reserve, release, the engine's one-server operations and direct writes announced by
    touch(): after each batch, sync() leaves exactly what a recomputation gives."""
    state = ClusterState(topo)
    view = StateView(state)
    ix = RackIndex(view, {"w": view.inv_capacity ** 2}, links=True)
    take, give = state.server_ops()
    held: list[Placement] = []
    n = topo.n_servers
    for _ in range(data.draw(st.integers(1, 6))):
        for _ in range(data.draw(st.integers(0, 5))):
            op = data.draw(st.sampled_from(["reserve", "release", "take", "give", "touch"]))
            s = data.draw(st.integers(0, n - 1))
            amount = [data.draw(st.sampled_from([0.0, 0.5, 1.0, 3.0])) for _ in range(2)]
            if op == "reserve":
                servers = sorted({s, data.draw(st.integers(0, n - 1))})
                amounts = np.minimum(np.array([amount] * len(servers)), state.free[servers])
                links = np.array([data.draw(st.integers(0, topo.n_links - 1))])
                p = Placement(np.array(servers), amounts, links,
                              np.minimum([0.5], state.link_free[links]))
                state.reserve(p)
                held.append(p)
            elif op == "release" and held:
                p = held.pop(data.draw(st.integers(0, len(held) - 1)))
                if state._check(p, release=True) is None:  # (gives and writes interleave)
                    state.release(p)
            elif op == "take":
                (take if data.draw(st.booleans()) else state.take_one)(s, amount)
            elif op == "give":
                (give if data.draw(st.booleans()) else state.give_one)(s, amount)
            elif op == "touch":
                state.free[s] = np.minimum(amount, topo.server_capacity[s])
                ln = data.draw(st.integers(0, topo.n_links - 1))
                state.link_free[ln] = min(amount[0], topo.link_capacity[ln])
                if data.draw(st.booleans()):
                    state.touch(s, links=[ln])
                else:
                    state.touch()
        ix.sync()
        want = recomputed(ix)
        assert np.array_equal(ix.free_max, want["free"])
        assert np.array_equal(ix.weighted["w"], want["w"])
        assert np.array_equal(ix.link_max, want["links"])


NEAR_TOL = [0.0, 4e-9, 5e-9, 8e-9, 1e-8, 2e-8, 1.0]  # around EPS · capacity (4 to 10)


@FAST
@given(topologies(), st.data())
def test_eligibility_from_the_bits_is_the_partials(topo, data):
    """Free amounts and remaining demands at and between the servers' tolerances: the
    index's eligibility (bits) is Partial.eligible's, and a group it rules out has no
    eligible server (its own formula, per resource, gives the same)."""
    from dcsim.allocators.multi.step import Partial

    state = ClusterState(topo)
    n, n_res = state.free.shape
    state.free[:] = np.minimum(topo.server_capacity, np.reshape(data.draw(st.lists(
        st.sampled_from(NEAR_TOL), min_size=n * n_res, max_size=n * n_res)), (n, n_res)))
    view = StateView(state)
    ix = RackIndex(view)
    state.touch()
    ix.sync()
    gr = ix.groups
    for _ in range(3):
        demand = np.array([data.draw(st.sampled_from(NEAR_TOL)) for _ in range(n_res)])
        part = Partial(Request(0, 0.0, 1.0, demand, 0.0), view, "union", False,
                       data.draw(st.sampled_from(["needed", "any_free"])))
        for s in data.draw(st.lists(st.integers(0, n - 1), max_size=2, unique=True)):
            part.servers.append(s)
            part.chosen[s] = True
        part.remaining = np.array([data.draw(st.sampled_from(NEAR_TOL))
                                   for _ in range(n_res)])
        idx = np.arange(n)
        want = part.eligible_at(idx)
        assert np.array_equal(ix.eligible_at(part, idx), want)
        sub = np.array(sorted(set(data.draw(st.lists(st.integers(0, n - 1), min_size=1)))))
        assert np.array_equal(ix.eligible_at(part, sub), want[sub])
        assert [part.is_eligible(s) for s in range(n)] == want.tolist()
        any_free = part.eligibility == "any_free"
        may = ix.may_be_eligible(part.remaining, any_free)
        above = ix.free_max > gr.min_tol
        if not any_free:
            above &= part.remaining > gr.min_tol
        assert np.array_equal(may, above.any(axis=1))
        assert np.array_equal(ix.may_fit(part.remaining),
                              (ix.free_max >= part.remaining - gr.max_tol).all(axis=1))
        some = np.array(sorted(set(data.draw(st.lists(st.integers(0, gr.n_groups - 1),
                                                      min_size=1)))))
        assert np.array_equal(ix.may_fit(part.remaining, some), ix.may_fit(part.remaining)[some])
        assert np.array_equal(ix.may_be_eligible(part.remaining, any_free, some), may[some])
        given = np.minimum(ix.free_max, part.remaining) * gr.max_inv
        assert np.array_equal(bound_sum(given), given.sum(axis=1))
        if part.servers or np.any(part.remaining > 0):  # (else every server is, unasked)
            assert may[gr.gid[want]].all()


def test_a_dropped_record_stops_recording():
    """A ServerChanges nobody holds is forgotten by its state (no log grows unread)."""
    topo = build_topology({"kind": "fabric", "preset": "alpha"})
    state = ClusterState(topo)
    changes = state.server_changes()
    state.take_one(0, [1.0, 1.0])
    assert changes.drain().tolist() == [0] and changes.drain().size == 0
    del changes
    assert state._logs == []
    assert state.copy()._logs == []


def server_links_by_lookup(topology) -> np.ndarray:
    """server_links as it was before the link ends were arrays: each link's ends looked up
    label by label; a server's links in the graph's order of its neighbours where some
    server has several."""
    n, si, li = topology.n_servers, topology._server_index, topology._link_index
    ends = np.array([[si.get(u, -1), si.get(v, -1)] for u, v in topology.links],
                    dtype=np.int64).reshape(-1, 2)
    if np.bincount(ends[ends >= 0], minlength=n).max(initial=0) <= 1:
        inc = np.full((n, 1), -1, dtype=np.int64)
        for k, (a, b) in enumerate(ends.tolist()):
            for s in (a, b):
                if s >= 0:
                    inc[s, 0] = k
        return inc
    rows = [[li[(s, v)] for v in topology.graph.adj[s]] for s in topology.servers]
    inc = np.full((n, max(max(map(len, rows)), 1)), -1, dtype=np.int64)
    for i, r in enumerate(rows):
        inc[i, :len(r)] = r
    return inc


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topologies())
def test_server_links_are_the_lookups_on_random_topologies(topo):
    inc, pad = server_links(topo)
    want = server_links_by_lookup(topo)
    assert np.array_equal(inc, want) and np.array_equal(pad, want < 0)


@pytest.mark.parametrize("spec", [{"kind": "fabric", "preset": "delta"},
                                  {"kind": "optical", "preset": "authors_large"},
                                  {"kind": "fat_tree", "preset": "ahab_k12"},
                                  {"kind": "flat", "servers": 4}],
                         ids=["delta", "authors_large", "k12", "flat"])
def test_server_links_are_the_lookups_on_shipped_topologies(spec):
    topo = build_topology(spec)
    inc, pad = server_links(topo)
    want = server_links_by_lookup(topo)
    assert np.array_equal(inc, want) and np.array_equal(pad, want < 0)


def test_groups_partition_the_servers_by_rack_and_pod():
    topo = build_topology({"kind": "fabric", "preset": "gamma"})
    gr = rack_groups(topo)
    seen = np.concatenate([gr.members(np.array([g])) for g in range(gr.n_groups)])
    assert sorted(seen.tolist()) == list(range(topo.n_servers))
    both = gr.members(np.array([3, 1]))
    assert both.tolist() == gr.members(np.array([3])).tolist() + gr.members(
        np.array([1])).tolist()
    for g in range(gr.n_groups):
        m = gr.members(np.array([g]))
        assert (topo.server_rack[m] == gr.rack[g]).all()
        assert (topo.server_pod[m] == gr.pod[g]).all()
        assert np.all(np.diff(m) > 0) and gr.first[g] == m[0]


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 3), st.integers(0, 2**31))
def test_a_rows_product_does_not_depend_on_the_other_rows(n_res, seed):
    """What the index's exactness rests on: numpy's matrix-vector product gives each row the
    same bits whatever rows surround it (matvec computes a lone row as two)."""
    rng = np.random.default_rng(seed)
    n = 300
    a = rng.random((n, n_res)) * rng.integers(1, 100, (n, n_res))
    x = rng.random(n_res) * 50
    full = a @ x
    for size in (1, 2, 3, 7, 64):
        idx = np.sort(rng.choice(n, size, replace=False))
        assert np.array_equal(matvec(np.ascontiguousarray(a[idx]), x), full[idx])


# ------------------------------------------------------------------ choices: index vs scan
class RefNALB(NALB):
    """NALB with the search offering one server at a time (before the index; slow)."""

    def choose(self, partial, view):
        if not partial.servers:
            i = self.tetris_choice(partial, view, self.options.anchor)
            if i is None:
                return None
            if self.options.search == "bfs":
                partial.scratch["ref"] = self._ref_bfs(i, partial)
                return i
            partial.scratch["plan"] = self._authors_plan(i, partial, view)
        eligible = partial.eligible()
        if self.options.search == "bfs":
            for s in partial.scratch["ref"]:
                if eligible[s]:
                    return s
            return None
        plan = partial.scratch["plan"]
        while plan:
            s = plan.pop()
            if eligible[s]:
                return s
        return None

    def _ref_bfs(self, start, partial):
        ps = self.path_service
        seen = np.zeros(len(ps.nodes), dtype=bool)
        first = int(ps.server_node[start])
        seen[first] = True
        queue = deque([first])
        while queue:
            u = queue.popleft()
            for v in self._neighbours(u, partial).tolist():
                if not seen[v]:
                    seen[v] = True
                    queue.append(v)
                    s = int(ps.node_server[v])
                    if s >= 0:
                        yield s


class RefNULB(RefNALB):
    weighted_search = False


OPTIONS = {
    Tetris: {"anchor": ["first", "previous", "carried"], "demand": ["remaining", "full"],
             "bandwidth_term": ["none", "own_link"], "ties": ["index", "name"],
             "locality_penalty": [0.9, 0.5, 0.0, 1.0]},
    NALB: {"anchor": ["none", "carried"], "search": ["bfs", "authors"],
           "ties": ["index", "name"], "bandwidth_term": ["none", "own_link"],
           "path_weight": ["inverse_free", "free", "hops"]},
    BestFitMulti: {},
}
OPTIONS[NULB] = OPTIONS[NALB]
REFERENCE = {NALB: RefNALB, NULB: RefNULB}


def build(cls, topo, view, indexed, **options):
    alloc = cls(cls.Options(**options), rng=np.random.default_rng(0), topology=topo)
    if indexed:
        alloc.index_min_servers = 2
    else:
        alloc.index_min_servers = 10**9
    alloc.setup(view)
    return alloc


def same(p, q) -> bool:
    if p is None or q is None:
        return p is q
    return (p.servers.tolist() == q.servers.tolist() and p.amounts.tolist() == q.amounts.tolist()
            and p.links.tolist() == q.links.tolist()
            and p.bandwidth.tolist() == q.bandwidth.tolist())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topologies(), st.sampled_from(list(OPTIONS)), st.data())
def test_choices_with_the_index_are_the_full_scans(topo, cls, data):
    """A run of requests (each placed one reserved, some released): the allocator searching
    racks first places every request exactly as the full scan (and, for NALB/NULB, as the
    search offering one server at a time)."""
    options = {k: data.draw(st.sampled_from(v)) for k, v in OPTIONS[cls].items()}
    options["reservation"] = data.draw(st.sampled_from(["union", "per_pair_channel"]))
    options["eligible"] = data.draw(st.sampled_from(["needed", "any_free"]))
    state = ClusterState(topo)
    cap = topo.server_capacity
    state.free[:] = np.minimum(cap, np.reshape(data.draw(st.lists(
        st.sampled_from([0.0, 1.0, 2.0, 4.0, 10.0]), min_size=cap.size, max_size=cap.size)),
        cap.shape))
    view = StateView(state)
    fast = build(cls, topo, view, True, **options)
    scan = build(REFERENCE.get(cls, cls), topo, view, False, **options)
    held = []
    for rid in range(data.draw(st.integers(1, 6))):
        demand = [float(data.draw(st.integers(0, 25))) for _ in range(2)]
        bw = data.draw(st.sampled_from([0.0, 0.3, 1.0]))
        req = Request(rid, 0.0, 1.0, np.array(demand), bw)
        p, q = fast.allocate(req, view), scan.allocate(req, view)
        assert same(p, q), (rid, p, q)
        if p is not None:
            state.reserve(p)
            held.append(p)
        if held and data.draw(st.booleans()):
            state.release(held.pop(0))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-1, 12), min_size=1, max_size=30),
       st.lists(st.integers(-1, 15), min_size=1, max_size=5))
def test_among_is_isin_of_the_known_labels(values, chosen):
    """best_fit_multi's rack and pod stages: a lookup table, the same mask as np.isin."""
    from dcsim.allocators.multi.rack_search import _among

    v, c = np.array(values, dtype=np.int64), np.array(chosen, dtype=np.int64)
    assert np.array_equal(_among(v, c), np.isin(v, c[c >= 0]))


@FAST
@given(topologies(), st.data())
def test_the_leftover_bound_is_never_above_a_fitting_servers_leftover(topo, data):
    """best_fit_multi searches fitting groups by this bound: at or below the leftover of
    every server of the group that fits, with the scan's arithmetic (free amounts and
    demands at and near the servers' tolerances too)."""
    from dcsim.allocators.multi.rack_search import leftover_bound

    state = ClusterState(topo)
    n, n_res = state.free.shape
    values = NEAR_TOL + [2.0, 3.5, 4.0, 7.0, 10.0]
    state.free[:] = np.minimum(topo.server_capacity, np.reshape(data.draw(st.lists(
        st.sampled_from(values), min_size=n * n_res, max_size=n * n_res)), (n, n_res)))
    view = StateView(state)
    ix = RackIndex(view, mins=True)
    gr = ix.groups
    rem = np.array([data.draw(st.sampled_from(values)) for _ in range(n_res)])
    bound = leftover_bound(ix, rem, np.arange(gr.n_groups))
    fits = np.all(view.free >= rem - EPS * np.maximum(view.capacity, 1.0), axis=1)
    leftover = ((view.free - rem) * view.inv_capacity).sum(axis=1)
    for s in np.flatnonzero(fits):
        assert bound[gr.gid[s]] <= leftover[s]
