"""Shared fixtures: tiny topologies and request streams built without any YAML."""

from __future__ import annotations

import os
from functools import cache

import networkx as nx
import numpy as np
import pytest

from dcsim.model import Topology
from dcsim.workload import RequestBatch

# cuBLAS reads its workspace setting when CUDA initialises: set before any test touches CUDA,
# so that the trainings' deterministic mode is bit-reproducible on a GPU machine too
# (dcsim train sets it itself; see dcsim.learn.ppo_core.make_deterministic)
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")


def star_topology(n: int = 6, cpu: float = 8, mem: float = 8, link: float = 10) -> Topology:
    """``n`` servers under one switch, two racks' worth of locality labels."""
    g = nx.Graph()
    g.add_node("sw", kind="switch", tier=1)
    for i in range(n):
        g.add_node(f"h{i}", kind="server", cpu=cpu, mem=mem, rack=i * 2 // n, pod=0)
        g.add_edge(f"h{i}", "sw", capacity=link)
    return Topology.from_graph(g, name="star")


class ListSource:
    """Requests given as arrays, yielded in batches of ``batch``."""

    def __init__(self, arrival, duration, demand, bandwidth=None, batch=7, attrs=None):
        self.arrival = np.asarray(arrival, dtype=float)
        self.duration = np.asarray(duration, dtype=float)
        self.demand = np.asarray(demand, dtype=float)
        n = len(self.arrival)
        self.bandwidth = np.zeros(n) if bandwidth is None else np.asarray(bandwidth, float)
        self.attrs = attrs or {}
        self.batch = batch

    def batches(self, rng):
        for i in range(0, len(self.arrival), self.batch):
            sl = slice(i, i + self.batch)
            yield RequestBatch(
                self.arrival[sl], self.duration[sl], self.demand[sl], self.bandwidth[sl],
                {k: np.asarray(v)[sl] for k, v in self.attrs.items()},
            )


def random_source(rng: np.random.Generator, n: int, rate: float = 2.0, hold: float = 5.0,
                  max_demand: int = 5) -> ListSource:
    arrival = np.cumsum(rng.exponential(1 / rate, n))
    duration = rng.exponential(hold, n)
    demand = rng.integers(0, max_demand + 1, size=(n, 2))
    return ListSource(arrival, duration, demand)


@pytest.fixture
def star():
    return star_topology()


@cache
def vc_tree(pods: int, racks: int, hosts: int, cpu: float = 8, link: float = 8):
    """A small fat-tree of 8-CU hosts and its TreeLevels (cached: topologies are immutable)."""
    from dcsim.model.topologies import build_topology
    from dcsim.model.vc import TreeLevels

    topo = build_topology({"kind": "fat_tree", "pods": pods, "racks": racks, "hosts": hosts,
                           "server": {"cpu": cpu}, "host_link": link})
    return topo, TreeLevels(topo)


def random_vc_state(topo: Topology, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Random free CU per host (integers 0..8) and free bandwidth per link (floored)."""
    rng = np.random.default_rng(seed)
    free = rng.integers(0, 9, topo.n_servers).astype(float)
    return free, np.floor(topo.link_capacity * rng.random(topo.n_links))
