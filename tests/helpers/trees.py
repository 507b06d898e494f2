"""Small topologies built for tests: servers under one switch, racks under fabric switches
(multi-server), fat and uneven trees with their levels and the AHAB paper's presets (virtual
clusters). The cached ones are shared freely: a topology's arrays are read-only."""

from __future__ import annotations

from functools import cache

import networkx as nx

from dcsim.model import Topology
from dcsim.model.topologies import (
    FABRIC_PRESETS,
    FAT_TREE_PRESETS,
    OPTICAL_PRESETS,
    OPTICAL_RATIOS,
    build_topology,
)
from dcsim.model.vc import TreeLevels

#: every shipped multi-tier topology, as a ``topology:`` section
SHIPPED_TOPOLOGIES = (
    [{"kind": "fabric", "preset": p} for p in FABRIC_PRESETS]
    + [{"kind": "optical", "preset": p} for p in OPTICAL_PRESETS]
    + [{"kind": "optical", "oversubscription": o} for o in OPTICAL_RATIOS]
    + [{"kind": "fat_tree", "preset": p} for p in FAT_TREE_PRESETS]
)


def star_topology(n: int = 6, cpu: float = 8, mem: float = 8, link: float = 10) -> Topology:
    """``n`` servers under one switch, two racks' worth of locality labels."""
    g = nx.Graph()
    g.add_node("sw", kind="switch", tier=1)
    for i in range(n):
        g.add_node(f"h{i}", kind="server", cpu=cpu, mem=mem, rack=i * 2 // n, pod=0)
        g.add_edge(f"h{i}", "sw", capacity=link)
    return Topology.from_graph(g, name="star")


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


@cache
def fat_tree(pods: int, racks: int, hosts: int, cpu: float = 8, link: float = 8):
    """A small fat tree of ``cpu``-CU hosts with ``link``-BU host links, and its TreeLevels."""
    topo = build_topology({"kind": "fat_tree", "pods": pods, "racks": racks, "hosts": hosts,
                           "server": {"cpu": cpu}, "host_link": link})
    return topo, TreeLevels(topo)


@cache
def ahab_tree(preset: str):
    """One of the AHAB paper's fat trees (``ahab_fig1``: 2 pods x 2 racks x 2 hosts of 4 CU,
    links 6 / 12 / 24 BU; ``ahab_k12``) and its TreeLevels."""
    topo = build_topology({"kind": "fat_tree", "preset": preset})
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
