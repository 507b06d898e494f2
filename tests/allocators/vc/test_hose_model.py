"""The hose model every VC embedder reserves by (``dcsim.model.vc``): loads, placements, and
the tree levels (KRAKEN's exact footprint against the DP oracle is in ``test_kraken.py``)."""

from __future__ import annotations

import numpy as np
import pytest

from dcsim.errors import ConfigError
from dcsim.model.topologies import build_topology
from dcsim.model.vc import TreeLevels
from tests.helpers.trees import fat_tree


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


def test_tree_levels_list_children_and_hosts_of_every_group():
    topo, levels = fat_tree(2, 3, 2)
    for k in range(levels.height + 1):
        for g in range(levels.size[k]):
            hosts = levels.hosts_of[k][g]
            assert hosts[hosts >= 0].tolist() == np.flatnonzero(levels.group[k] == g).tolist()
            if k:
                kids = levels.children[k][g]
                want = np.flatnonzero(levels.parent[k - 1] == g).tolist()
                assert kids[kids >= 0].tolist() == want
    assert levels.children[0] is None

