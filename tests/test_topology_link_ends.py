"""Topology.link_ends, server_nodes and link_servers (issue #37): the graph-order positions
of each link's ends and of each server, and the server at each link end, as numpy arrays
made in from_graph's one pass over the links. They must equal the per-label lookups they
replace (a dict of positions, a link's labels looked up one by one), on every shipped
topology and on random graphs with labels of several types, self-loops, isolated servers
and servers with several links; a Topology without them (made some other way, or
unpickled from before) computes the same arrays when first asked.
"""

from __future__ import annotations

import dataclasses
import pickle

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dcsim.model.topologies import build_topology
from dcsim.model.topology import Topology
from tests.helpers.trees import SHIPPED_TOPOLOGIES

SHIPPED = [*SHIPPED_TOPOLOGIES, {"kind": "flat", "servers": 5}]


def by_lookup(topo: Topology) -> dict[str, np.ndarray]:
    """The arrays as the code before them computed them: label by label."""
    pos = {n: i for i, n in enumerate(topo.graph.nodes)}
    si = topo._server_index
    tier = {n: int(d.get("tier", 0 if d.get("kind", "switch") == "server" else 1))
            for n, d in topo.graph.nodes(data=True)}
    return {
        "link_ends": np.array([[pos[u], pos[v]] for u, v in topo.links],
                              dtype=np.int64).reshape(-1, 2),
        "server_nodes": np.array([pos[s] for s in topo.servers], dtype=np.int64),
        "link_servers": np.array([[si.get(u, -1), si.get(v, -1)] for u, v in topo.links],
                                 dtype=np.int64).reshape(-1, 2),
        "link_tier": np.array([max(tier[u], tier[v]) for u, v in topo.links],
                              dtype=np.int64),
    }


def check(topo: Topology) -> None:
    want = by_lookup(topo)
    got = {"link_ends": topo.link_ends(), "server_nodes": topo.server_nodes(),
           "link_servers": topo.link_servers(), "link_tier": topo.link_tier}
    for name, a in got.items():
        assert a.dtype == np.int64, name
        assert a.shape == want[name].shape, name
        assert np.array_equal(a, want[name]), name
        assert not a.flags.writeable, name
    # made lazily (a Topology built without them): the same arrays
    bare = dataclasses.replace(topo, _link_ends=None, _server_nodes=None)
    for name in ("link_ends", "server_nodes", "link_servers"):
        a = getattr(bare, name)()
        assert np.array_equal(a, want[name]), name
        assert a.dtype == np.int64 and not a.flags.writeable, name
        assert getattr(bare, name)() is a  # cached


@pytest.mark.parametrize("spec", SHIPPED, ids=lambda s: "-".join(map(str, s.values())))
def test_the_arrays_equal_the_lookups_on_every_shipped_topology(spec):
    check(build_topology(spec))


LABELS = st.one_of(st.integers(-5, 40), st.text("abc", min_size=1, max_size=3),
                   st.tuples(st.integers(0, 3), st.integers(0, 3)))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_arrays_equal_the_lookups_on_random_graphs(data):
    labels = data.draw(st.lists(LABELS, min_size=2, max_size=25, unique=True))
    g = nx.Graph()
    for x in labels:
        if data.draw(st.booleans()):
            attrs = {"kind": "server", "cpu": 1.0}
            if data.draw(st.booleans()):
                attrs["tier"] = data.draw(st.integers(0, 2))
        else:
            attrs = {"kind": "switch"}
            if data.draw(st.booleans()):
                attrs["tier"] = data.draw(st.integers(1, 4))
        g.add_node(x, **attrs)
    if not any(d["kind"] == "server" for _, d in g.nodes(data=True)):
        g.nodes[labels[0]].update(kind="server", cpu=1.0)
    pairs = st.tuples(st.sampled_from(labels), st.sampled_from(labels))  # self-loops too
    for u, v in data.draw(st.lists(pairs, max_size=40)):
        g.add_edge(u, v, capacity=float(data.draw(st.integers(0, 3))))
    check(Topology.from_graph(g, allow_disconnected=True))


def test_an_unpickled_topology_from_before_the_arrays_computes_them():
    topo = build_topology({"kind": "fabric", "preset": "alpha"})
    want = by_lookup(topo)
    state = dict(topo.__dict__)
    for key in ("_link_ends", "_server_nodes", "_dcsim_link_servers"):
        state.pop(key, None)
    old = Topology.__new__(Topology)
    old.__dict__.update(state)  # what unpickling a Topology pickled before them gives
    assert np.array_equal(old.link_ends(), want["link_ends"])
    assert np.array_equal(old.server_nodes(), want["server_nodes"])
    assert np.array_equal(old.link_servers(), want["link_servers"])
    again = pickle.loads(pickle.dumps(topo))
    assert np.array_equal(again.link_ends(), want["link_ends"])
