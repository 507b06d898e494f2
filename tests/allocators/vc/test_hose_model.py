"""Virtual clusters: the hose model, the DP oracle, and KRAKEN's exact minimum footprint."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dcsim.allocators.vc.kraken import kraken_embed
from dcsim.errors import ConfigError
from dcsim.model.topologies import build_topology
from dcsim.model.vc import TreeLevels
from tests.helpers.trees import fat_tree
from tests.helpers.vc import random_vc_state
from tests.naive import optimal_footprint


@pytest.fixture(scope="module")
def fig1():
    topo = build_topology({"kind": "fat_tree", "preset": "ahab_fig1"})
    return topo, TreeLevels(topo)


def test_paper_fig1_worked_example(fig1):
    """AHAB Fig. 1: VC (3, 4, 2) on 2x2x2 hosts of 4 CU, links 6/12/24: footprint 10, 5 links."""
    topo, levels = fig1
    free, lf = topo.server_capacity[:, 0].copy(), topo.link_capacity.copy()
    assert optimal_footprint(levels, free, lf, 3, 4, 2) == 10
    counts = kraken_embed(levels, free, lf, 3, 4, 2)
    loads = levels.hose_loads(counts, 3, 2)
    assert loads.sum() == 10 and np.count_nonzero(loads) == 5
    assert counts.sum() == 3 and counts.max() == 1  # 4-CU VMs: one per host


def test_hose_model_reserves_min_m_n_minus_m(fig1):
    """A link with m of N VMs below it reserves min(m, N - m) * B."""
    topo, levels = fig1
    counts = np.array([3, 0, 0, 0, 1, 0, 0, 0])  # 3 VMs on h0, 1 on h4 (other pod)
    loads = levels.hose_loads(counts, 4, 2.0)
    assert loads[levels.uplink[0][0]] == 2 and loads[levels.uplink[0][4]] == 2
    assert loads[levels.uplink[1][0]] == 2 and loads[levels.uplink[2][1]] == 2
    # host, rack and pod uplinks on both sides: 6 links of min(3, 1) * 2 = min(1, 3) * 2
    assert loads.sum() == 12 and np.count_nonzero(loads) == 6


def test_placement_carries_vms_and_links(fig1):
    """The placement holds count*S per host and the hose loads on exactly the used links."""
    topo, levels = fig1
    p = levels.placement(np.array([2, 1, 0, 0, 0, 0, 0, 0]), np.array([4.0]), 3, 2.0)
    assert p.servers.tolist() == [0, 1] and p.amounts[:, 0].tolist() == [8, 4]
    assert p.footprint == 4 and len(p.links) == 2


def test_non_tree_topology_is_refused():
    """Hose-model embedders need a balanced tree."""
    with pytest.raises(ConfigError, match="tree"):
        TreeLevels(build_topology({"kind": "fabric", "preset": "alpha"}))


def test_kraken_rejects_when_nothing_fits(fig1):
    """No embedding: too little compute, or no bandwidth to spread over hosts."""
    topo, levels = fig1
    assert kraken_embed(levels, np.zeros(8), topo.link_capacity.copy(), 2, 1, 1) is None
    free = np.full(8, 4.0)
    assert kraken_embed(levels, free, np.zeros(14), 2, 4, 1) is None  # needs two hosts
    assert kraken_embed(levels, free, np.zeros(14), 2, 2, 1) is not None  # fits on one


@settings(max_examples=150, deadline=None)
@given(
    shape=st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(1, 4)),
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 14),
    s=st.sampled_from([1.0, 2.0, 4.0, 8.0]),
    b=st.sampled_from([0.0, 1.0, 2.0, 4.0, 8.0]),
)
def test_kraken_footprint_equals_the_tree_dp_optimum(shape, seed, n, s, b):
    """On random trees and states KRAKEN finds an embedding iff one exists, of minimum
    footprint, within every host's compute and every link's free bandwidth."""
    topo, levels = fat_tree(*shape)
    free, link_free = random_vc_state(topo, seed)
    opt = optimal_footprint(levels, free, link_free, n, s, b)
    counts = kraken_embed(levels, free, link_free, n, s, b)
    if counts is None:
        assert opt == np.inf
        return
    loads = levels.hose_loads(counts, n, b)
    assert counts.sum() == n and (counts >= 0).all()
    assert (counts * s <= free + 1e-9).all()
    assert (loads <= link_free + 1e-9).all()
    assert loads.sum() == pytest.approx(opt)
