"""The topology helpers a network-aware plugin uses (issue #48): rack and pod membership
(:meth:`Topology.racks`, ``rack_servers``, ``pod_racks``, ``rack_of``, ...), a rack's
switches and uplinks, and the free bandwidth between servers
(:meth:`PathService.free_bandwidth`, ``free_bandwidths``).

Hand-computed values on a small fat tree and on Fabric alpha, a dual-homed rack from a
graph, and property tests: on a tree the free bandwidth between two servers is the minimum
over the path's links of capacity minus used, never negative or above capacity; on every
topology the vectorised ``free_bandwidths`` equals the best bottleneck of ``k_paths``."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dcsim
from dcsim import ClusterState, PathService, Placement, StateView, Topology
from dcsim.model.topologies import build_topology

#: 2 pods x 2 racks x 2 hosts; host links 10, rack uplinks 2 x 10 = 20, pod uplinks 40.
#: Rack r holds servers 2r, 2r + 1 (h2r, h2r+1, under switch r<r>); pod p racks 2p, 2p + 1.
TREE = {"kind": "fat_tree", "pods": 2, "racks": 2, "hosts": 2, "server": {"cpu": 4},
        "host_link": 10}


def tree() -> Topology:
    return build_topology(TREE)


def taken(topo: Topology, links: dict[tuple[str, str], float]) -> ClusterState:
    """A state with ``links[(u, v)]`` bandwidth reserved on link u-v."""
    state = ClusterState(topo)
    ids = [topo.link_index(u, v) for u, v in links]
    state.reserve(Placement.build([0], np.zeros((1, len(topo.resources))), ids,
                                  list(links.values())))
    return state


# ---------------------------------------------------------------------------- membership
def test_rack_and_pod_membership_on_a_fat_tree():
    t = tree()
    assert t.racks().tolist() == [0, 1, 2, 3]
    assert t.pods().tolist() == [0, 1]
    assert t.rack_servers(1).tolist() == [2, 3]
    assert t.pod_servers(1).tolist() == [4, 5, 6, 7]
    assert t.pod_racks(0).tolist() == [0, 1]
    assert t.pod_racks(1).tolist() == [2, 3]
    assert t.rack_of(5) == 2 and isinstance(t.rack_of(5), int)
    assert t.pod_of(5) == 1
    assert t.rack_of([0, 7]).tolist() == [0, 3]
    assert t.pod_of(np.array([0, 7])).tolist() == [0, 1]


def test_unknown_ids_are_empty_and_minus_one_is_the_servers_without_one():
    t = tree()
    assert t.rack_servers(9).size == 0 and t.pod_servers(-1).size == 0
    assert t.pod_racks(5).size == 0 and t.rack_uplinks(9).size == 0
    assert t.rack_switches(9) == []
    flat = build_topology({"kind": "flat", "servers": 3})
    assert flat.racks().size == 0 and flat.pods().size == 0
    assert flat.rack_servers(-1).tolist() == [0, 1, 2]
    assert flat.rack_uplinks(0).size == 0
    assert flat.rack_uplink_table()[0].tolist() == [0]


def test_the_tables_are_read_only():
    t = tree()
    for a in (t.racks(), t.rack_servers(0), t.pod_racks(0), t.rack_uplinks(0),
              *t.rack_uplink_table()):
        with pytest.raises(ValueError):
            a[:1] = 0


def test_rack_switches_and_uplinks_on_a_fat_tree():
    t = tree()
    assert [t.rack_switches(r) for r in t.racks()] == [["r0"], ["r1"], ["r2"], ["r3"]]
    assert t.rack_uplinks(2).tolist() == [t.link_index("r2", "p1")]
    ptr, links = t.rack_uplink_table()
    assert ptr.tolist() == [0, 1, 2, 3, 4]
    assert [t.links[i] for i in links] == [("r0", "p0"), ("r1", "p0"), ("r2", "p1"),
                                           ("r3", "p1")]
    assert t.link_capacity[links].tolist() == [20.0] * 4


def test_rack_uplinks_on_fabric_alpha_go_to_every_fabric_switch_of_the_pod():
    t = build_topology({"kind": "fabric", "preset": "alpha"})
    assert t.rack_servers(3).tolist() == list(range(30, 40))
    assert t.pod_racks(1).tolist() == [2, 3]
    assert t.rack_switches(3) == ["r3"]
    assert sorted(t.rack_uplinks(3).tolist()) == t.rack_uplinks(3).tolist()
    assert {frozenset(t.links[i]) for i in t.rack_uplinks(3)} == {
        frozenset(("r3", "f1_0")), frozenset(("r3", "f1_1"))}


def dual_homed() -> Topology:
    """Rack 0: servers a0, a1, each linked to both ToRs t0 and t1, which are linked to each
    other and to agg; rack 1: server b0 on t2, linked to agg."""
    g = nx.Graph()
    for s, rack in (("a0", 0), ("a1", 0), ("b0", 1)):
        g.add_node(s, kind="server", tier=0, rack=rack, pod=0, cpu=4.0)
    for sw, tier in (("t0", 1), ("t1", 1), ("t2", 1), ("agg", 2)):
        g.add_node(sw, kind="switch", tier=tier)
    for s in ("a0", "a1"):
        for tor in ("t0", "t1"):
            g.add_edge(s, tor, capacity=10.0)
    g.add_edge("b0", "t2", capacity=10.0)
    g.add_edge("t0", "t1", capacity=5.0)
    for tor in ("t0", "t1", "t2"):
        g.add_edge(tor, "agg", capacity=20.0)
    return Topology.from_graph(g, name="dual")


def test_a_link_between_two_switches_of_one_rack_is_not_an_uplink():
    t = dual_homed()
    assert t.rack_switches(0) == ["t0", "t1"]
    assert t.rack_uplinks(0).tolist() == sorted([t.link_index("t0", "agg"),
                                                 t.link_index("t1", "agg")])
    assert t.rack_uplinks(1).tolist() == [t.link_index("t2", "agg")]
    assert t.rack_servers(0).tolist() == [0, 1]


# ---------------------------------------------------------------------------- bandwidth
def test_free_bandwidth_on_a_fat_tree_by_hand():
    """h0's host link has 3 taken (7 free), rack 0's uplink 12 (8 free), pod 0's 30 (10)."""
    t = tree()
    state = taken(t, {("h0", "r0"): 3, ("r0", "p0"): 12, ("p0", "core"): 30})
    ps = PathService(t)
    assert ps.free_bandwidth(0, 1, state) == 7.0     # h0-r0-h1: min(7, 10)
    assert ps.free_bandwidth(0, 2, state) == 7.0     # + r0-p0 (8), p0-r1 (20), h2 (10)
    assert ps.free_bandwidth(1, 2, state) == 8.0     # rack 0's uplink is the bottleneck
    assert ps.free_bandwidth(1, 4, state) == 8.0     # + p0-core (10), core-p1 (40), ...
    assert ps.free_bandwidth(3, 6, state) == 10.0    # the host links
    assert ps.free_bandwidth(5, 5, state) == np.inf  # no network between a server and itself
    got = ps.free_bandwidths(1, [0, 1, 2, 4], state)
    assert got.tolist() == [7.0, np.inf, 8.0, 8.0]
    # the same from a view, from the link_free array, from an idle state
    assert ps.free_bandwidths(1, [0, 1, 2, 4], StateView(state)).tolist() == got.tolist()
    assert ps.free_bandwidths(1, [0, 1, 2, 4], state.link_free).tolist() == got.tolist()
    assert ps.free_bandwidth(1, 4, ClusterState(t)) == 10.0


def test_free_bandwidth_over_k_paths_on_fabric_alpha_by_hand():
    """h0 to h10 (the next rack): first path via f0_0, second via f0_1 (every link 1).
    With r0-f0_0 at 0.25 free and r0-f0_1 at 0.5, k=1 sees 0.25 and k=2 the better 0.5."""
    t = build_topology({"kind": "fabric", "preset": "alpha"})
    ps = PathService(t)
    first, second = ps.k_paths(0, 10, 2)
    assert t.link_index("r0", "f0_0") in first and t.link_index("r0", "f0_1") in second
    state = taken(t, {("r0", "f0_0"): 0.75, ("r0", "f0_1"): 0.5})
    assert ps.free_bandwidth(0, 10, state, k=1) == 0.25
    assert ps.free_bandwidth(0, 10, state, k=2) == 0.5
    assert ps.free_bandwidth(0, 1, state) == 1.0     # one switch: the two host links
    assert ps.free_bandwidths(0, [1, 10, 20], state, k=2).tolist() == [1.0, 0.5, 0.5]
    assert ps.free_bandwidths(10, [0], state, k=2).tolist() == [0.5]


def test_flat_topologies_and_bad_arguments():
    flat = build_topology({"kind": "flat", "servers": 3})
    ps = PathService(flat)
    assert ps.free_bandwidths(0, [1, 2], ClusterState(flat)).tolist() == [np.inf, np.inf]
    t = tree()
    ps = PathService(t)
    with pytest.raises(IndexError):
        ps.free_bandwidth(0, 8, ClusterState(t))
    with pytest.raises(ValueError, match="k must be"):
        ps.free_bandwidth(0, 1, ClusterState(t), k=0)
    with pytest.raises(ValueError, match="shape"):
        ps.free_bandwidth(0, 1, np.zeros(3))
    assert ps.free_bandwidths(0, [], ClusterState(t)).shape == (0,)


def test_the_multi_server_plugin_types_are_exported_from_dcsim():
    from dcsim.allocators.multi import MultiServerAllocator, Partial

    assert dcsim.MultiServerAllocator is MultiServerAllocator
    assert dcsim.Partial is Partial
    assert dcsim.PathService is PathService
    assert {"MultiServerAllocator", "Partial", "PathService"} <= set(dcsim.__all__)


# ---------------------------------------------------------------------------- properties
def _random_state(t: Topology, rng: np.random.Generator, full: float) -> ClusterState:
    """Every link with a random share of its capacity taken; ``full`` of them entirely."""
    used = rng.uniform(0, 1, t.n_links) * t.link_capacity
    used = np.where(rng.uniform(size=t.n_links) < full, t.link_capacity, used)
    state = ClusterState(t)
    state.reserve(Placement.build([0], np.zeros((1, len(t.resources))),
                                  np.arange(t.n_links), used))
    return state


TREES = st.fixed_dictionaries({
    "kind": st.just("fat_tree"), "pods": st.integers(1, 3), "racks": st.integers(1, 3),
    "hosts": st.integers(1, 3), "server": st.just({"cpu": 4.0}),
    "host_link": st.sampled_from([1.0, 2.5, 10.0]),
    "oversubscription": st.fixed_dictionaries({"rack": st.sampled_from([1.0, 2.0, 4.0]),
                                               "pod": st.sampled_from([1.0, 3.0])})})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=TREES, seed=st.integers(0, 2**32 - 1), full=st.sampled_from([0.0, 0.2]))
def test_on_a_tree_the_free_bandwidth_is_the_paths_least_capacity_minus_used(spec, seed,
                                                                             full):
    t = build_topology(spec)
    rng = np.random.default_rng(seed)
    state = _random_state(t, rng, full)
    ps = PathService(t)
    a = int(rng.integers(t.n_servers))
    got = ps.free_bandwidths(a, np.arange(t.n_servers), state)
    for b in range(t.n_servers):
        if b == a:
            assert got[b] == np.inf
            continue
        path = ps.links_between(a, b)
        want = (state.link_capacity[path] - state.link_used[path]).min()
        assert got[b] == pytest.approx(want, abs=1e-12)
        assert ps.free_bandwidth(a, b, state) == got[b]
        assert 0.0 <= got[b] <= state.link_capacity[path].min()


GRAPHS = st.one_of(
    st.fixed_dictionaries({"kind": st.just("fabric"), "pods": st.integers(1, 3),
                           "racks": st.integers(1, 3), "servers": st.integers(1, 3),
                           "fabric": st.integers(1, 3), "spines": st.integers(1, 2)}),
    st.fixed_dictionaries({"kind": st.just("optical"),
                           "preset": st.sampled_from(["small", "authors_small"])}),
    st.just({"kind": "dual"}),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=GRAPHS, seed=st.integers(0, 2**32 - 1), k=st.integers(1, 3),
       full=st.sampled_from([0.0, 0.3]))
def test_free_bandwidths_is_the_best_bottleneck_of_k_paths(spec, seed, k, full):
    """Any graph: for each server, the largest over k_paths of the smallest free bandwidth
    on the path, within [0, capacity]; the vectorised call and the one-pair call agree."""
    t = dual_homed() if spec["kind"] == "dual" else build_topology(spec)
    rng = np.random.default_rng(seed)
    state = _random_state(t, rng, full)
    ps = PathService(t)
    for a in rng.choice(t.n_servers, size=min(3, t.n_servers), replace=False).tolist():
        got = ps.free_bandwidths(a, np.arange(t.n_servers), state, k)
        for b in range(t.n_servers):
            if b == a:
                assert got[b] == np.inf
                continue
            paths = ps.k_paths(a, b, k)
            want = max(state.link_free[p].min() for p in paths)
            assert got[b] == want
            assert ps.free_bandwidth(b, a, state, k) == want  # either direction
            assert 0.0 <= got[b] <= max(state.link_capacity[p].min() for p in paths)
