"""The dragonfly's structure, counted from its parameters (Kim et al. 2008), its refusals,
and one run of a network-aware allocator on it."""

from __future__ import annotations

import itertools
from pathlib import Path

import networkx as nx
import pytest
from dcsim import ConfigError
from dcsim.model.topologies import build_topology

from dcsim_dragonfly import Dragonfly

EXPERIMENT = Path(__file__).resolve().parents[1] / "experiment.yaml"


def dragonfly(**options):
    return build_topology({"kind": "dragonfly", **options})


def router_links(topo, groups_apart: bool):
    """The router-router links (u, v, capacity), local or global."""
    g = topo.graph
    return [(u, v, d["capacity"]) for u, v, d in g.edges(data=True)
            if g.nodes[u]["kind"] == g.nodes[v]["kind"] == "switch"
            and (g.nodes[u]["pod"] != g.nodes[v]["pod"]) == groups_apart]


@pytest.mark.parametrize(("a", "p", "h", "groups"), [
    (4, 2, 2, None),   # the paper's balanced a = 2p = 2h, maximal: 9 groups
    (4, 2, 2, 5),      # 8 ports, 4 peers: 2 links between every two groups
    (3, 1, 2, 4),      # 6 ports, 3 peers: 2 links per pair
    (2, 3, 3, 5),      # 6 ports, 4 peers: 1 link per pair, 2 ports unused
])
def test_counts_follow_the_parameters(a, p, h, groups):
    topo = dragonfly(routers=a, hosts=p, global_links=h,
                     **({} if groups is None else {"groups": groups}))
    g = groups if groups is not None else a * h + 1
    per_pair = (a * h) // (g - 1)
    assert topo.n_servers == g * a * p
    switches = [n for n, d in topo.graph.nodes(data=True) if d["kind"] == "switch"]
    assert len(switches) == g * a
    local = router_links(topo, groups_apart=False)
    assert len(local) == g * a * (a - 1) // 2          # all-to-all in each group
    glob = router_links(topo, groups_apart=True)
    # parallel links between the same two routers merge: the capacity keeps the count
    assert sum(c for _, _, c in glob) == pytest.approx(
        g * (g - 1) // 2 * per_pair * topo.params["global_link"])
    host = [e for e in topo.links if topo.graph.nodes[e[0]]["kind"] == "server"
            or topo.graph.nodes[e[1]]["kind"] == "server"]
    assert len(host) == g * a * p
    assert topo.n_links == len(local) + len(glob) + len(host)


@pytest.mark.parametrize("groups", [None, 3, 6])
def test_every_group_links_to_every_other_and_no_router_has_too_many_ports(groups):
    topo = dragonfly(routers=4, hosts=2, global_links=2,
                     **({} if groups is None else {"groups": groups}))
    glob = router_links(topo, groups_apart=True)
    pod = nx.get_node_attributes(topo.graph, "pod")
    pairs = {frozenset((pod[u], pod[v])) for u, v, _ in glob}
    n = len(set(topo.server_pod.tolist()))
    assert pairs == {frozenset(p) for p in itertools.combinations(range(n), 2)}
    per_pair = (4 * 2) // (n - 1)
    ports: dict[str, float] = {}
    for u, v, c in glob:
        for r in (u, v):
            ports[r] = ports.get(r, 0.0) + c / topo.params["global_link"]
    assert max(ports.values()) <= 2                      # global_links ports per router
    assert sum(ports.values()) == n * (n - 1) * per_pair


def test_it_is_connected_with_a_short_diameter():
    """Kim et al.: minimal routes are at most local, global, local: 3 router hops, 5 with
    the two host links."""
    topo = dragonfly()
    assert nx.is_connected(topo.graph)
    routers = topo.graph.subgraph(n for n, d in topo.graph.nodes(data=True)
                                  if d["kind"] == "switch")
    assert nx.diameter(routers) <= 3
    assert nx.diameter(topo.graph) <= 5


def test_racks_are_routers_and_pods_are_groups():
    topo = dragonfly(routers=3, hosts=2, global_links=1)       # 4 groups
    assert topo.racks().tolist() == list(range(12))
    assert topo.pods().tolist() == list(range(4))
    assert topo.rack_servers(4).tolist() == [8, 9]
    assert topo.rack_switches(4) == ["r4"]
    # router r4's uplinks: its 2 local links and its 1 global link
    assert len(topo.rack_uplinks(4)) == 3
    assert topo.locality(topo.rack_servers(4)) == 1
    assert topo.locality([0, 5]) == 2 and topo.locality([0, 6]) == 3


def test_capacities_are_the_options():
    topo = dragonfly(host_link=5, local_link=7, global_link=11, server={"cpu": 3})
    assert set(topo.link_capacity.tolist()) == {5.0, 7.0, 11.0}
    assert topo.resources == ("cpu",) and set(topo.server_capacity[:, 0]) == {3.0}


@pytest.mark.parametrize(("options", "field"), [
    ({"groups": 10}, "groups"),
    ({"groups": 1}, "groups"),
    ({"routers": 0}, "routers"),
    ({"host_link": -1}, "host_link"),
    ({"server": {}}, "server"),
])
def test_bad_options_name_the_field(options, field):
    with pytest.raises(ConfigError, match=rf"^topology\.{field}: "):
        dragonfly(**options)


def test_the_spec_is_a_dcsim_topology_builder():
    spec = Dragonfly(routers=2, hosts=1, global_links=1)
    assert spec.groups == 3 and spec.build().n_servers == 6


def test_a_network_aware_allocator_runs_on_it(tmp_path):
    """best_fit_multi reserves bandwidth on paths between a request's servers: some
    requests span routers and use the router links."""
    import pandas as pd
    from dcsim.runner import load_experiment, run_experiment

    exp = load_experiment(EXPERIMENT, seeds=1, sets=["workload.requests=200",
                                                     "allocators=[best_fit_multi]"])
    summary = pd.read_parquet(run_experiment(exp, tmp_path, jobs=1) / "summary.parquet")
    assert len(summary) == 1
    row = summary.iloc[0]
    assert 0 < row["acceptance_ratio"] <= 1 and row["util_bw_router"] > 0
