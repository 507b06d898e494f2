"""Small topologies built for tests: racks under fabric switches (multi-server), fat and uneven
trees with their levels (virtual clusters)."""

from __future__ import annotations

from functools import cache

import networkx as nx

from dcsim.model import Topology
from dcsim.model.topologies import build_topology
from dcsim.model.vc import TreeLevels


@cache
def racks_topology(racks: int = 2, per_rack: int = 2, fabrics: int = 1, cpu: float = 10,
                   mem: float = 10, sr: float = 10, rf: float = 10) -> Topology:
    """Servers ``h*`` under rack switches ``r*``; every rack switch linked to every ``f*``."""
    g = nx.Graph()
    for r in range(racks):
        for i in range(per_rack):
            g.add_node(f"h{r * per_rack + i}", kind="server", cpu=cpu, mem=mem, rack=r, pod=0)
    for r in range(racks):
        g.add_node(f"r{r}", kind="switch", tier=1)
    for j in range(fabrics):
        g.add_node(f"f{j}", kind="switch", tier=2)
    for r in range(racks):
        for i in range(per_rack):
            g.add_edge(f"h{r * per_rack + i}", f"r{r}", capacity=sr)
    for r in range(racks):
        for j in range(fabrics):
            g.add_edge(f"r{r}", f"f{j}", capacity=rf)
    return Topology.from_graph(g, name=f"racks{racks}x{per_rack}x{fabrics}")


def fat_tree(pods, racks, hosts):
    topo = build_topology({"kind": "fat_tree", "pods": pods, "racks": racks, "hosts": hosts,
                           "server": {"cpu": 8}, "host_link": 8})
    return topo, TreeLevels(topo)


def uneven_tree(rng):
    """A balanced tree whose groups have different numbers of children, its links listed
    in a shuffled order (uplinks of a level not contiguous)."""
    g = nx.Graph()
    edges = []
    h = 0
    n_pods = int(rng.integers(1, 4))
    for p in range(n_pods):
        g.add_node(f"p{p}", kind="switch", tier=2)
        edges.append((f"p{p}", "core", float(rng.choice([8.0, 20.0, 40.0]))))
        for r in range(int(rng.integers(1, 4))):
            rack = f"r{p}_{r}"
            g.add_node(rack, kind="switch", tier=1)
            edges.append((rack, f"p{p}", float(rng.choice([8.0, 16.0, 24.0]))))
            for _ in range(int(rng.integers(1, 5))):
                g.add_node(f"h{h}", kind="server", tier=0, cpu=8.0)
                edges.append((f"h{h}", rack, 8.0))
                h += 1
    g.add_node("core", kind="switch", tier=3)
    for i in rng.permutation(len(edges)):
        u, v, c = edges[i]
        g.add_edge(u, v, capacity=c)
    topo = Topology.from_graph(g, name="uneven")
    return topo, TreeLevels(topo)
