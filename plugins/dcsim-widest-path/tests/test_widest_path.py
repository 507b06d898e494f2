"""WidestPath on a hand-built eight-server tree, without the engine, and once inside it.

The tree: 2 pods x 2 racks x 2 hosts of 4 cpu; host links 10, rack uplinks 20, pod uplinks
40. Rack ``r`` holds servers ``2r`` and ``2r + 1``; racks 0, 1 are pod 0, racks 2, 3 pod 1.
"""

from __future__ import annotations

import numpy as np
import pytest
from dcsim import ClusterState, ConfigError, Placement, Request, StateView
from dcsim.model.topologies import build_topology
from dcsim.modes.loss import Engine
from dcsim.workload import build_source

from dcsim_widest_path import WidestPath

TREE = {"kind": "fat_tree", "pods": 2, "racks": 2, "hosts": 2, "server": {"cpu": 4},
        "host_link": 10}


def cluster(used=(), links=()) -> StateView:
    """The tree with ``used`` (server, cpu) taken and ``links`` ((u, v), bandwidth) taken."""
    topo = build_topology(TREE)
    state = ClusterState(topo)
    for server, cpu in used:
        state.reserve(Placement.single(server, np.array([float(cpu)])))
    for (u, v), bw in links:
        state.reserve(Placement.build([0], [[0.0]], [topo.link_index(u, v)], [bw]))
    return StateView(state)


def request(cpu: float, bandwidth: float) -> Request:
    return Request(id=0, arrival=0.0, duration=1.0, demand=np.array([float(cpu)]),
                   bandwidth=bandwidth)


def allocate(view: StateView, req: Request, **options) -> Placement | None:
    alloc = WidestPath(WidestPath.parse_options(options), topology=view.topology)
    return alloc.allocate(req, view)


def test_a_request_that_fits_a_rack_goes_to_the_fullest_rack_that_holds_it():
    """Racks 0 and 2 can hold 6 cpu, rack 2 with less left over; in it, server 5 gives the
    most (4 cpu), then server 4 the last 2. Each pair reserves the bandwidth on its path."""
    view = cluster(used=[(0, 1), (4, 2), (6, 3), (7, 3)])
    p = allocate(view, request(6, 1.0))
    assert p.servers.tolist() == [5, 4]
    assert p.amounts.ravel().tolist() == [4.0, 2.0]
    topo = view.topology
    assert sorted(p.links.tolist()) == sorted([topo.link_index("h4", "r2"),
                                              topo.link_index("h5", "r2")])
    assert p.bandwidth.tolist() == [1.0, 1.0]


def test_a_request_no_rack_holds_starts_in_the_rack_with_the_freest_uplinks():
    """10 cpu needs three servers; rack 3's uplink has all its 20 free, the others less.
    Then the first server's rack (server 7), then its pod (server 4, the lowest index of
    the two with the widest paths)."""
    view = cluster(links=[(("r0", "p0"), 15), (("r1", "p0"), 5), (("r2", "p1"), 10)])
    assert view.topology.rack_uplinks(3).tolist() == [view.topology.link_index("r3", "p1")]
    p = allocate(view, request(10, 1.0))
    assert p.servers.tolist() == [6, 7, 4]


def test_without_locality_the_widest_path_decides():
    """locality: false: after server 6, every server with a path of 10 free ties (server
    0's path crosses rack 0's uplink, 5 free): the lowest index, server 2, wins."""
    view = cluster(links=[(("r0", "p0"), 15), (("r1", "p0"), 5), (("r2", "p1"), 10)])
    p = allocate(view, request(10, 1.0), locality=False)
    assert p.servers.tolist()[:2] == [6, 2]


def test_a_server_whose_path_lacks_the_bandwidth_is_skipped():
    """Server 1's host link has 2 free, less than the 3 asked: after server 0 the request
    goes to server 2 (same pod), not to server 1 (same rack)."""
    view = cluster(links=[(("h1", "r0"), 8)])
    p = allocate(view, request(6, 3.0))
    assert p.servers.tolist() == [0, 2]


def test_no_path_wide_enough_rejects():
    """11 per flow is more than any host link carries: the request is rejected."""
    assert allocate(cluster(), request(6, 11.0)) is None


def test_a_request_one_server_holds_needs_no_path():
    """3 cpu fits on one server: one server, no link reserved."""
    p = allocate(cluster(used=[(0, 2)]), request(3, 5.0))
    assert p.servers.size == 1 and p.links.size == 0


def test_a_flat_cluster_without_racks_or_links():
    """No racks, no links: the servers that give the most, in index order."""
    topo = build_topology({"kind": "flat", "servers": 4, "server": {"cpu": 4}})
    view = StateView(ClusterState(topo))
    p = WidestPath(topology=topo).allocate(request(10, 0.0), view)
    assert p.servers.tolist() == [0, 1, 2]
    assert p.amounts.ravel().tolist() == [4.0, 4.0, 2.0]


def test_runs_in_the_engine():
    """A whole simulation: every request is decided and no choice is invalid (the engine
    raises PluginError on one)."""
    topo = build_topology(TREE)
    workload = {"requests": 300, "arrival": {"process": "poisson", "rate": 1},
                "demand": {"cpu": {"dist": "uniform_int", "low": 1, "high": 12}},
                "bandwidth": {"dist": "uniform", "low": 1, "high": 6},
                "duration": {"dist": "exponential", "mean": 5}}
    alloc = WidestPath(rng=np.random.default_rng(1), topology=topo)
    summary = Engine(topo, build_source(workload, topo), alloc, np.random.default_rng(0)).run()
    assert summary["received"] == 300
    assert 0 < summary["acceptance_ratio"] <= 1


def test_options_label_and_errors():
    """locality defaults to true; the label names options that differ; typos are errors."""
    assert WidestPath().options.locality is True
    assert WidestPath().label == "widest_path"
    assert WidestPath(WidestPath.parse_options({"locality": False})).label == \
        "widest_path(locality=False)"
    with pytest.raises(ConfigError, match="options.localty"):
        WidestPath.parse_options({"localty": False})
