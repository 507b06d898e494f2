"""PathService.k_paths by rack pair equals networkx's per-server-pair paths, order included.

The reference is :func:`networkx.shortest_simple_paths` between the two servers (the lower
index first), which is what ``k_paths`` computed per server pair before it was keyed by rack
pair (issue #37). Checked on every shipped topology (the Fabric presets, the optical presets
and oversubscriptions, the AHAB trees, a topology file) and on random graphs whose servers
have one or several links, to switches of any tier, with many tied paths and switches whose
leaf counts differ (where the order of ties depends on those counts).
"""

from __future__ import annotations

import random
from itertools import islice, pairwise

import networkx as nx
import numpy as np
import pytest

from dcsim.model.paths import PathService
from dcsim.model.topologies import build_topology
from dcsim.model.topology import Topology
from dcsim.model.topology_io import save_topology
from tests.helpers.trees import SHIPPED_TOPOLOGIES

SHIPPED = SHIPPED_TOPOLOGIES


def reference(topo: Topology, a: int, b: int, k: int) -> list[list[int]]:
    """networkx's first k paths between servers a and b, as link lists (lower index first)."""
    if a == b:
        return [[]]
    lo, hi = min(a, b), max(a, b)
    paths = nx.shortest_simple_paths(topo.graph, topo.servers[lo], topo.servers[hi])
    return [[topo.link_index(u, v) for u, v in pairwise(p)] for p in islice(paths, k)]


def sample_pairs(topo: Topology, n: int, seed: int) -> list[tuple[int, int]]:
    """``n`` random server pairs, a third of them on one rack, both orders."""
    rng = random.Random(seed)
    racks = topo.server_rack
    out = []
    for i in range(n):
        a = rng.randrange(topo.n_servers)
        if i % 3 == 0 and racks[a] >= 0:
            b = rng.choice(np.flatnonzero(racks == racks[a]).tolist())
        else:
            b = rng.randrange(topo.n_servers)
        out.append((a, b))
    return out


def check(ps: PathService, pairs, ks=(1, 2, 3, 4)) -> None:
    t = ps.topology
    old = PathService(t)
    old._by_rack = False
    for a, b in pairs:
        for k in ks:
            want = reference(t, a, b, k)
            got = [p.tolist() for p in ps.k_paths(a, b, k)]
            assert got == want, (t.name, a, b, k)
            assert [p.tolist() for p in old.k_paths(a, b, k)] == want
            assert all(not p.flags.writeable and p.dtype == np.int64
                       for p in ps.k_paths(a, b, k))


@pytest.mark.parametrize("spec", SHIPPED, ids=lambda s: f"{s['kind']}-"
                         f"{s.get('preset') or s.get('oversubscription')}")
def test_shipped_topologies_match_networkx(spec):
    """Sampled pairs (same-rack ones included), k = 1..4: same paths, same order."""
    topo = build_topology(spec)
    check(PathService(topo), sample_pairs(topo, 24, seed=37))


def test_topology_file_matches_networkx(tmp_path):
    """A Fabric saved to and loaded from a file (kind: file) takes the same paths."""
    save_topology(build_topology({"kind": "fabric", "preset": "beta"}), tmp_path / "b.json")
    topo = build_topology({"kind": "file", "path": str(tmp_path / "b.json")})
    ps = PathService(topo)
    assert not ps.is_tree
    check(ps, sample_pairs(topo, 20, seed=1))


def test_rack_pairs_are_searched_once():
    """Every server pair of two racks is answered from one search of the rack pair."""
    topo = build_topology({"kind": "fabric", "preset": "gamma"})  # 40 servers a rack
    ps = PathService(topo)
    rack0, rack5 = range(0, 40), range(200, 240)
    for a in rack0[::7]:
        for b in rack5[::9]:
            ps.k_paths(a, b, 3)
            ps.k_paths(b, a, 3)
    info = ps.cache_info()
    assert info["searches"] == 1 and info["misses"] == 1 and info["size"] == 1
    assert info["hits"] == 2 * len(rack0[::7]) * len(rack5[::9]) - 1


def random_topology(seed: int) -> Topology:
    """A random connected graph: switches with random extra links (many tied paths),
    servers with one link (mostly) or two, dangling switches, and every adjacency list in
    a random insertion order (leaves before, between and after switches)."""
    rng = random.Random(seed)
    sw = [f"s{i}" for i in range(rng.randint(2, 9))]
    edges = [(sw[i], sw[rng.randrange(i)]) for i in range(1, len(sw))]
    edges += [tuple(rng.sample(sw, 2)) for _ in range(rng.randint(0, 2 * len(sw)))]
    servers = [f"h{j}" for j in range(rng.randint(2, 14))]
    for h in servers:
        edges += [(h, u) for u in rng.sample(sw, 1 if rng.random() < 0.8 else 2)]
    edges += [(f"d{j}", rng.choice(sw)) for j in range(rng.randint(0, 2))]
    rng.shuffle(edges)
    nodes = [(s, {"kind": "switch", "tier": 1 + rng.randrange(3)}) for s in sw]
    nodes += [(h, {"kind": "server", "tier": 0, "cpu": 1.0}) for h in servers]
    nodes += [(f"d{j}", {"kind": "switch", "tier": 1}) for j in range(2)]
    rng.shuffle(nodes)
    g = nx.Graph()
    g.add_nodes_from(nodes)
    for u, v in edges:
        if not g.has_edge(u, v):
            g.add_edge(u, v, capacity=1.0)
    g.remove_nodes_from([v for v in list(g) if g.degree(v) == 0])
    return Topology.from_graph(g, name=f"random{seed}", resources=["cpu"])


@pytest.mark.parametrize("seeds", [range(0, 40)], ids=["40-graphs"])
def test_random_graphs_match_networkx(seeds):
    """Every server pair of random graphs with ties, k = 1, 2, 4 (the leaf counts matter
    here: a search that ignored them takes another tied path on some of these graphs)."""
    for seed in seeds:
        topo = random_topology(seed)
        ps = PathService(topo)
        if ps.is_tree:
            continue
        n = topo.n_servers
        check(ps, [(a, b) for a in range(n) for b in range(n)], ks=(1, 2, 4))


@pytest.mark.slow
def test_random_graphs_match_networkx_many():
    test_random_graphs_match_networkx(range(40, 400))


@pytest.mark.slow
@pytest.mark.parametrize("spec", [{"kind": "fabric", "preset": "delta"},
                                  {"kind": "optical", "preset": "authors_large"}],
                         ids=["delta", "authors_large"])
def test_every_rack_pair(spec):
    """Every ordered rack pair of the two largest shipped graphs, k = 4, a random server
    of each rack."""
    topo = build_topology(spec)
    ps = PathService(topo)
    rng = random.Random(4)
    by_rack = [np.flatnonzero(topo.server_rack == r).tolist()
               for r in range(int(topo.server_rack.max()) + 1)]
    for ra in by_rack:
        for rb in by_rack:
            a, b = rng.choice(ra), rng.choice(rb)
            assert [p.tolist() for p in ps.k_paths(a, b, 4)] == reference(topo, a, b, 4)


def leaves_by_lookup(ps: PathService) -> dict:
    """_build_leaves and leaf_servers as they were before the link ends were arrays (each
    link's ends looked up label by label, the leaf servers listed one by one)."""
    idx, n = ps._node_index, len(ps.nodes)
    links = ps.topology.links
    ends = np.array([[idx[u], idx[v]] for u, v in links], dtype=np.int64).reshape(-1, 2)
    degree = np.bincount(ends.ravel(), minlength=n)
    other = np.full(n, -1, dtype=np.int64)
    link = np.full(n, -1, dtype=np.int64)
    for col in (0, 1):
        at = np.flatnonzero(degree[ends[:, col]] == 1)
        other[ends[at, col]] = ends[at, 1 - col]
        link[ends[at, col]] = at
    server_node = np.array([idx[s] for s in ps.topology.servers], dtype=np.int64)
    hub = other[server_node]
    hub[(hub < 0) | (ps.node_server[np.maximum(hub, 0)] >= 0)] = -1
    one = degree[server_node] == 1
    return {"degree": degree, "hub": hub, "server_node": server_node,
            "host_link": np.where(hub >= 0, link[server_node], -1),
            "leaves": frozenset(ps.topology.servers[i] for i in np.flatnonzero(one))}


@pytest.mark.parametrize("topo", [build_topology(s) for s in SHIPPED]
                         + [random_topology(seed) for seed in range(40)],
                         ids=lambda t: t.name)
def test_the_leaf_arrays_equal_the_lookups(topo):
    """The leaves' switches and host links, made from Topology.link_ends, are those the
    label-by-label lookups made."""
    ps = PathService(topo)
    want = leaves_by_lookup(ps)
    assert ps.leaf_servers() == want["leaves"]
    assert np.array_equal(ps.server_node, want["server_node"])
    assert np.array_equal(ps._degree, want["degree"])
    assert np.array_equal(ps._leaf_hub, want["hub"])
    assert np.array_equal(ps._host_link, want["host_link"])


def adjacency_by_lookup(ps: PathService) -> tuple[list, list]:
    """Each node's neighbours and links as NULB/NALB listed them before the CSR arrays:
    per node, its graph adjacency looked up label by label."""
    g, li = ps.topology.graph, ps.topology._link_index
    nbrs = [[ps.node_index(v) for v in g.adj[u]] for u in ps.nodes]
    links = [[li[(u, v)] for v in g.adj[u]] for u in ps.nodes]
    return nbrs, links


@pytest.mark.parametrize("topo", [build_topology(s) for s in SHIPPED]
                         + [random_topology(seed) for seed in range(40)],
                         ids=lambda t: t.name)
def test_the_adjacency_arrays_equal_the_lookups(topo):
    """PathService.adjacency: every node's neighbours in the graph's adjacency order (the
    random graphs insert them in random orders) and the link to each."""
    ps = PathService(topo)
    ptr, nbr, link = ps.adjacency()
    want_nbrs, want_links = adjacency_by_lookup(ps)
    assert ptr.tolist() == [0, *np.cumsum([len(r) for r in want_nbrs]).tolist()]
    for u in range(len(ps.nodes)):
        assert nbr[ptr[u]:ptr[u + 1]].tolist() == want_nbrs[u]
        assert link[ptr[u]:ptr[u + 1]].tolist() == want_links[u]
    assert all(not a.flags.writeable and a.dtype == np.int64 for a in (ptr, nbr, link))
    assert ps.adjacency()[1] is nbr  # made once


def test_the_adjacency_follows_the_node_order_where_the_graph_lists_another(monkeypatch):
    """Where the graph's adjacency lists its nodes in another order than its nodes (not so
    for networkx's graphs; a subclass might), the arrays still follow the node order."""
    topo = random_topology(3)
    ps = PathService(topo)
    want_nbrs, want_links = adjacency_by_lookup(ps)
    rows = list(topo.graph.adjacency())[::-1]
    monkeypatch.setattr(topo.graph, "adjacency", lambda: iter(rows))
    ptr, nbr, link = ps.adjacency()
    for u in range(len(ps.nodes)):
        assert nbr[ptr[u]:ptr[u + 1]].tolist() == want_nbrs[u]
        assert link[ptr[u]:ptr[u + 1]].tolist() == want_links[u]


def test_the_adjacency_of_a_graph_with_a_self_loop():
    g = nx.Graph()
    g.add_node("s", kind="switch", tier=1)
    g.add_node(7, kind="switch", tier=2)
    for h in ("a", "b"):
        g.add_node(h, kind="server", tier=0, cpu=1.0)
        g.add_edge(h, "s", capacity=1.0)
    g.add_edge("s", "s", capacity=2.0)
    g.add_edge(7, "s", capacity=1.0)
    g.add_edge(7, 7, capacity=3.0)
    ps = PathService(Topology.from_graph(g, resources=["cpu"]))
    ptr, nbr, link = ps.adjacency()
    want_nbrs, want_links = adjacency_by_lookup(ps)
    assert [nbr[ptr[u]:ptr[u + 1]].tolist() for u in range(4)] == want_nbrs
    assert [link[ptr[u]:ptr[u + 1]].tolist() for u in range(4)] == want_links
