"""PathService: LCA paths on trees, cached k-shortest paths on general graphs."""

from __future__ import annotations

from itertools import pairwise

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dcsim.model.paths import PathService
from dcsim.model.topologies import build_topology
from dcsim.model.topology import Topology


@pytest.fixture(scope="module")
def fig1():
    return PathService(build_topology({"kind": "fat_tree", "preset": "ahab_fig1"}))


@pytest.fixture(scope="module")
def alpha():
    return PathService(build_topology({"kind": "fabric", "preset": "alpha"}))


def is_path(topo, links, a, b):
    """Whether ``links`` form a simple walk from server a to server b."""
    node = topo.servers[a]
    seen = {node}
    for i in links:
        u, v = topo.links[i]
        if node not in (u, v):
            return False
        node = v if node == u else u
        if node in seen:
            return False
        seen.add(node)
    return node == topo.servers[b]


def nx_links(topo, a, b):
    p = nx.shortest_path(topo.graph, topo.servers[a], topo.servers[b])
    return [topo.link_index(u, v) for u, v in pairwise(p)]


# ---------------------------------------------------------------------------- trees
def test_fat_tree_path_lengths(fig1):
    """Same rack: 2 links; same pod, other rack: 4; other pod: 6."""
    assert fig1.is_tree
    assert len(fig1.links_between(0, 1)) == 2
    assert len(fig1.links_between(0, 2)) == 4
    assert len(fig1.links_between(0, 7)) == 6
    assert is_path(fig1.topology, fig1.links_between(0, 7), 0, 7)


def test_same_server_is_empty_and_order_is_symmetric(fig1):
    """a == b gives no links; (a, b) and (b, a) give the same array."""
    assert fig1.links_between(3, 3).size == 0 and fig1.links_between(3, 3).dtype == np.int64
    assert np.array_equal(fig1.links_between(5, 1), fig1.links_between(1, 5))


def test_tree_k_paths_is_the_single_path(fig1):
    """On a tree k_paths returns only the unique path."""
    paths = fig1.k_paths(0, 5, k=3)
    assert len(paths) == 1 and np.array_equal(paths[0], fig1.links_between(0, 5))


def test_tree_arrays(fig1):
    """Rooted at the core: parent, depth, uplinks and server_ancestors per tier."""
    t = fig1.topology
    assert fig1.nodes[fig1.root] == "core" and fig1.height == 3
    assert fig1.server_ancestors.shape == (8, 3)
    assert (t.link_tier[fig1.server_ancestors] == [1, 2, 3]).all()
    r1, p0 = fig1.node_index("r1"), fig1.node_index("p0")
    assert fig1.parent[r1] == p0 and fig1.depth[r1] == 2
    assert fig1.uplink(r1) == t.link_index("r1", "p0")
    assert fig1.uplink(fig1.root) == -1
    assert fig1.server_ancestors[2].tolist() == [
        t.link_index("h2", "r1"), t.link_index("r1", "p0"), t.link_index("p0", "core")]
    assert fig1.server_ancestor_nodes[2].tolist() == [r1, p0, fig1.root]


def test_subtree_servers(fig1):
    """A switch's subtree holds the servers below it; a server's holds itself."""
    assert fig1.subtree_servers(fig1.node_index("r1")).tolist() == [2, 3]
    assert fig1.subtree_servers(fig1.node_index("p1")).tolist() == [4, 5, 6, 7]
    assert fig1.subtree_servers(fig1.root).tolist() == list(range(8))
    assert fig1.subtree_servers(fig1.server_node[6]).tolist() == [6]
    assert sorted(fig1.children(fig1.node_index("p1")).tolist()) == [
        fig1.node_index("r2"), fig1.node_index("r3")]


@settings(max_examples=40, deadline=None)
@given(pods=st.integers(1, 3), racks=st.integers(1, 3), hosts=st.integers(1, 3),
       data=st.data())
def test_fat_tree_lca_matches_networkx(pods, racks, hosts, data):
    """On random fat trees the LCA path is networkx's shortest path, link for link."""
    ps = PathService(build_topology({"kind": "fat_tree", "pods": pods, "racks": racks,
                                     "hosts": hosts}))
    n = ps.topology.n_servers
    a, b = sorted((data.draw(st.integers(0, n - 1)), data.draw(st.integers(0, n - 1))))
    assert ps.links_between(a, b).tolist() == nx_links(ps.topology, a, b)


@settings(max_examples=40, deadline=None)
@given(parents=st.lists(st.integers(0, 10**6), min_size=1, max_size=25), data=st.data())
def test_irregular_tree_lca_matches_networkx(parents, data):
    """On random trees with servers at mixed depths the LCA path is the networkx path."""
    g = nx.Graph()
    g.add_node(0)
    for i, p in enumerate(parents, start=1):
        g.add_edge(p % i, i, capacity=1.0)
    for v in g:
        leaf = v != 0 and g.degree(v) == 1
        g.nodes[v].update(kind="server" if leaf else "switch", tier=0 if leaf else 1, cpu=1.0)
    g.nodes[0]["tier"] = 9
    ps = PathService(Topology.from_graph(g))
    assert ps.is_tree and ps.nodes[ps.root] == 0
    n = ps.topology.n_servers
    a, b = sorted((data.draw(st.integers(0, n - 1)), data.draw(st.integers(0, n - 1))))
    assert ps.links_between(a, b).tolist() == nx_links(ps.topology, a, b)


# ---------------------------------------------------------------------------- general graphs
def test_fabric_k_paths_across_pods(alpha):
    """Across pods on α: 3 distinct valid paths, fewest hops first, the first one 6 links."""
    assert not alpha.is_tree
    paths = alpha.k_paths(0, 25, k=3)
    assert len(paths) == 3
    assert len({tuple(p) for p in paths}) == 3
    lengths = [len(p) for p in paths]
    assert lengths == sorted(lengths) and lengths[0] == 6
    assert all(is_path(alpha.topology, p, 0, 25) for p in paths)
    assert np.array_equal(alpha.links_between(25, 0), paths[0])


def test_k_paths_cache(alpha):
    """A repeated query (either order) is a cache hit returning equal read-only arrays; so
    is a query of another server pair of the same two racks, around its own host links."""
    alpha.cache_clear()
    first = alpha.k_paths(3, 33)
    again = alpha.k_paths(33, 3)
    assert alpha.cache_info()["hits"] == 1 and alpha.cache_info()["misses"] == 1
    assert [p.tolist() for p in first] == [p.tolist() for p in again]
    with pytest.raises(ValueError):
        first[0][0] = 7
    t = alpha.topology
    other = alpha.k_paths(4, 34)  # servers 3/4 share rack 0, 33/34 rack 3
    assert alpha.cache_info() == {"hits": 2, "misses": 1, "size": 1, "maxsize": 100_000,
                                  "searches": 1}
    for p, q in zip(first, other, strict=True):
        assert p[1:-1].tolist() == q[1:-1].tolist()
        assert (q[0], q[-1]) == (t.link_index("h4", "r0"), t.link_index("r3", "h34"))
    alpha.k_paths(3, 4)  # one rack: no search, no cache entry
    assert alpha.cache_info()["searches"] == 1 and alpha.cache_info()["size"] == 1


def test_cache_is_bounded():
    """The k-paths cache evicts the least recently used rack pair beyond its size."""
    ps = PathService(build_topology({"kind": "fabric", "preset": "alpha"}), cache_size=2)
    for b in (11, 21, 31):
        ps.k_paths(0, b)
    assert ps.cache_info()["size"] == 2
    ps.k_paths(0, 31)
    ps.k_paths(0, 11)
    assert ps.cache_info()["hits"] == 1 and ps.cache_info()["misses"] == 4


def test_per_pair_cache_is_bounded():
    """So does the per-server-pair cache (the one before rack pairs, kept for benchmarks)."""
    ps = PathService(build_topology({"kind": "fabric", "preset": "alpha"}), cache_size=2)
    ps._by_rack = False
    for b in (11, 12, 13):
        ps.k_paths(0, b)
    assert ps.cache_info()["size"] == 2
    ps.k_paths(0, 13)
    ps.k_paths(0, 11)
    assert ps.cache_info()["hits"] == 1 and ps.cache_info()["misses"] == 4


def test_shortest_path_on_general_graph(alpha):
    """links_between on a non-tree is a shortest path by hop count."""
    t = alpha.topology
    for a, b in [(0, 1), (0, 15), (7, 39)]:
        links = alpha.links_between(a, b)
        assert len(links) == nx.shortest_path_length(t.graph, t.servers[a], t.servers[b])
        assert is_path(t, links, a, b)


def test_flat_paths_are_empty():
    """A flat topology does not model the network: every path is empty."""
    ps = PathService(build_topology({"kind": "flat", "servers": 3}))
    assert ps.is_flat and not ps.is_tree
    assert ps.links_between(0, 2).size == 0 and [p.size for p in ps.k_paths(0, 2)] == [0]


def test_bad_arguments():
    """Out-of-range servers and k < 1 are errors."""
    ps = PathService(build_topology({"kind": "fabric", "preset": "alpha"}))
    with pytest.raises(IndexError):
        ps.links_between(0, 40)
    with pytest.raises(ValueError):
        ps.k_paths(0, 1, k=0)
    with pytest.raises(ValueError, match="not a tree"):
        ps.subtree_servers(0)
