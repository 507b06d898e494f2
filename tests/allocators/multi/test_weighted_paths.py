"""The weighted k shortest paths (NALB/NULB's ``path_weight``) are networkx's, found
without networkx (issue #51 item 1), in Python and compiled (numba): the same paths in the
same order, ties included, as
``networkx.shortest_simple_paths`` with the same edge weights and the same one-link
servers skipped (the function below is the one dcsim ran before), on every shipped kind of
multi-path topology and on random graphs with tied and unusable links."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dcsim.allocators.multi.paths import weighted_k_paths
from dcsim.allocators.multi.paths_reference import networkx_k_paths as reference
from dcsim.model.paths import PathService
from dcsim.model.topologies import build_topology
from dcsim.model.topology import Topology


def networkx_k_paths(paths: PathService, a: int, b: int, k: int, weight) -> list[list[int]]:
    """What dcsim computed before: networkx's search, one-link servers hidden."""
    return [p.tolist() for p in reference(paths, a, b, k, weight)]


SHIPPED = [{"kind": "fabric", "preset": p} for p in ("alpha", "gamma")] + [
    {"kind": "optical", "channels": 4, "oversubscription": o} for o in ("1:16", "1:4")] + [
    {"kind": "fabric", "preset": "alpha", "pods": 2, "racks": 3, "servers": 2}]
_BUILT: dict[int, PathService] = {}


def service(i: int) -> PathService:
    if i not in _BUILT:
        _BUILT[i] = PathService(build_topology(SHIPPED[i]))
    return _BUILT[i]


@settings(max_examples=150, deadline=None)
@given(st.integers(0, len(SHIPPED) - 1), st.integers(0, 2**32 - 1), st.integers(1, 6),
       st.data())
def test_the_same_paths_as_networkx_on_the_shipped_topologies(i, seed, k, data):
    ps = service(i)
    n = ps.topology.n_servers
    a, b = data.draw(st.integers(0, n - 1)), data.draw(st.integers(0, n - 1))
    rng = np.random.default_rng(seed)
    # few distinct values: many ties; inf and NaN remove links
    w = rng.choice([1.0, 2.0, 0.5, 3.0, np.inf, np.nan], size=ps.topology.n_links,
                   p=[0.35, 0.25, 0.15, 0.1, 0.1, 0.05])
    want = networkx_k_paths(ps, a, b, k, w)
    for weight, kernel in ((w, False), (lambda j: float(w[j]), False), (w, True)):
        got = weighted_k_paths(ps, a, b, k, weight, kernel=kernel)
        assert [p.tolist() for p in got] == want
        assert all(p.dtype == np.int64 for p in got)


def random_topology(seed: int) -> Topology:
    """A connected random graph of switches with servers hung on one or two of them (a
    two-link server may lie inside a path), unit capacities."""
    rng = np.random.default_rng(seed)
    n_sw = int(rng.integers(3, 9))
    g = nx.connected_watts_strogatz_graph(n_sw, 2 if n_sw < 5 else 4, 0.5,
                                          seed=int(rng.integers(1 << 30)))
    g = nx.relabel_nodes(g, {v: f"s{v}" for v in g})
    for v in g:
        g.nodes[v].update(kind="switch", tier=1)
    for u, v in g.edges:
        g.edges[u, v]["capacity"] = 1.0
    for h in range(int(rng.integers(3, 8))):
        name = f"h{h}"
        g.add_node(name, kind="server", tier=0, cpu=1.0)
        for sw in rng.choice(n_sw, size=int(rng.integers(1, 3)), replace=False):
            g.add_edge(name, f"s{sw}", capacity=1.0)
    return Topology.from_graph(g, name="random", resources=["cpu"])


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 8), st.data())
def test_the_same_paths_as_networkx_on_random_graphs_with_ties(seed, k, data):
    ps = PathService(random_topology(seed))
    n = ps.topology.n_servers
    a, b = data.draw(st.integers(0, n - 1)), data.draw(st.integers(0, n - 1))
    w = np.random.default_rng(seed + 1).choice([1.0, 1.0, 2.0, np.inf],
                                               size=ps.topology.n_links)
    want = networkx_k_paths(ps, a, b, k, w)
    for kernel in (False, True):
        got = weighted_k_paths(ps, a, b, k, w, kernel=kernel)
        assert [p.tolist() for p in got] == want


def test_no_path_and_one_switch_cases():
    ps = service(0)
    w = np.full(ps.topology.n_links, np.inf)
    assert weighted_k_paths(ps, 0, 25, 3, w) == []  # every link unusable
    w[:] = 1.0
    same_rack = weighted_k_paths(ps, 0, 1, 3, w)
    assert len(same_rack) == 1 and same_rack[0].tolist() == networkx_k_paths(ps, 0, 1, 3, w)[0]
    for kernel in (False, True):
        assert weighted_k_paths(ps, 0, 25, 3, np.full(ps.topology.n_links, np.inf),
                                kernel=kernel) == []
        with pytest.raises(ValueError, match="negative"):
            weighted_k_paths(ps, 0, 25, 2, np.full(ps.topology.n_links, -1.0), kernel=kernel)
