"""tetris_embed_batch (sparse, ranked keys) = tetris_embed row by row, edge cases included.

The batch skips the one-row code's room filter (hosts' min(slots, N) total ≥ N) where the
feasible runs imply it; these states break that implication on purpose (negative free CU,
tiny S where slots and runs round differently) besides the ordinary loaded k = 12 states.
"""

from __future__ import annotations

import itertools
from functools import cache

import numpy as np
import pytest

from dcsim.allocators.vc.tetris import ZERO_BANDWIDTH, tetris_embed, tetris_embed_batch
from dcsim.model.topologies import build_topology
from dcsim.model.vc import HOST_LINK_RULES, TreeLevels
from tests.helpers.trees import uneven_tree

#: every (host_link, zero_bandwidth), the defaults first
OPTIONS = [{"host_link": h, "zero_bandwidth": z}
           for h, z in itertools.product(HOST_LINK_RULES, ZERO_BANDWIDTH)]


def opts_id(o):
    return ",".join(o.values())


@cache
def k12():
    topo = build_topology({"kind": "fat_tree", "preset": "ahab_k12"})
    return topo, TreeLevels(topo)


@cache
def small():
    topo = build_topology({"kind": "fat_tree", "pods": 2, "racks": 3, "hosts": 3,
                           "server": {"cpu": 8}, "host_link": 8})
    return topo, TreeLevels(topo)


def check(levels, free, lf, n, s, b, opts=None, integral=False):
    opts = opts or {}
    counts, ok = tetris_embed_batch(levels, free, lf, n, s, b, **opts, integral=integral)
    for i in range(len(n)):
        want = tetris_embed(levels, free[i], lf[i], int(n[i]), float(s[i]), float(b[i]),
                            **opts)
        assert ok[i] == (want is not None), i
        if want is None:
            assert not counts[i].any(), i
        else:
            np.testing.assert_array_equal(counts[i], want, err_msg=f"row {i}")
    ok2, r, h, m = tetris_embed_batch(levels, free, lf, n, s, b, **opts, integral=integral,
                                      sparse=True)  # AHAB's lookahead: the same as entries
    assert np.array_equal(ok2, ok) and m.dtype == np.int64 and (m[n[r] > 0] > 0).all()
    dense = np.zeros_like(counts)
    np.add.at(dense, (r, h), m)  # each (row, host) once: add.at would expose a repeat
    np.testing.assert_array_equal(dense, counts)
    return ok


@pytest.mark.parametrize("opts", OPTIONS, ids=opts_id)
@pytest.mark.parametrize("seed", range(3))
def test_loaded_k12_states(seed, opts):
    """Mostly full hosts and links, as in AHAB's lookahead: few active hosts per row; under
    every host_link and zero_bandwidth."""
    topo, levels = k12()
    rng = np.random.default_rng(seed)
    k = 40
    free = rng.choice([0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 4.0, 8.0], (k, topo.n_servers))
    lf = np.floor(topo.link_capacity * rng.random((k, topo.n_links)) ** 2)
    n = rng.integers(3, 61, k)
    s = rng.choice([1.0, 2.0, 4.0, 8.0], k, p=[0.45, 0.3, 0.2, 0.05])
    b = rng.choice([1.0, 2.0, 4.0, 8.0], k, p=[0.45, 0.3, 0.2, 0.05])
    ok = check(levels, free, lf, n, s, b, opts)
    assert 0 < ok.sum() < k


@pytest.mark.parametrize("opts", OPTIONS, ids=opts_id)
@pytest.mark.parametrize("seed", range(6))
def test_room_filter_edge_cases(seed, opts):
    """Negative free CU, tiny and zero S and B, residuals just under a VM's size; under
    every host_link and zero_bandwidth."""
    topo, levels = small()
    rng = np.random.default_rng(100 + seed)
    k = 16
    free = rng.integers(0, 9, (k, topo.n_servers)).astype(float)
    free[rng.random(free.shape) < 0.15] -= rng.choice([1e-9, 5e-10, 0.5, 3.0])
    lf = np.floor(topo.link_capacity * rng.random((k, topo.n_links)))
    n = rng.integers(1, 25, k)
    s = rng.choice([0.0, 1e-3, 0.1, 0.7, 1.0, 2.0, 8.0], k)
    b = rng.choice([0.0, 1e-3, 0.3, 1.0, 2.0], k)
    near = rng.random(k) < 0.5  # free CU a hair under a multiple of S
    mult = rng.integers(0, 4, (near.sum(), topo.n_servers))
    free[near] = s[near, None] * mult - rng.choice([0.0, 5e-10, 2e-9], (near.sum(), 1))
    check(levels, free, lf, n, s, b, opts)


@pytest.mark.parametrize("opts", OPTIONS, ids=opts_id)
@pytest.mark.parametrize("seed", range(3))
def test_integral_hint(seed, opts):
    """AHAB's hint (whole free CU and BU, sizes powers of two from 1): the shared exact
    floors give the one-row embeddings, including rows whose first group fails the hose
    check (thin rack and pod uplinks) and the single-host stage."""
    topo, levels = k12()
    rng = np.random.default_rng(200 + seed)
    k = 40
    free = rng.choice([0.0, 0.0, 1.0, 2.0, 3.0, 4.0, 8.0], (k, topo.n_servers))
    lf = np.floor(topo.link_capacity * rng.random((k, topo.n_links)) ** 3)
    n = rng.integers(2, 61, k)
    n[:5] = rng.integers(1, 4, 5)  # some fit on one host
    s = rng.choice([1.0, 2.0, 4.0, 8.0], k)
    b = rng.choice([1.0, 2.0, 4.0], k)
    from dcsim.allocators.vc.tetris import VCTetris

    e = VCTetris(VCTetris.parse_options(opts))
    e.levels = levels
    assert e.lookahead_hints(free[0], lf[0], s, b) == {"integral": True}
    check(levels, free, lf, n, s, b, opts, integral=True)


@pytest.mark.parametrize("seed", range(2))
def test_integral_hint_with_overdrawn_hosts(seed):
    """A host with negative free CU (whole) has min(slots, n) < 0, which the one-row
    filter counts in its group's total: the hinted path must not drop that filter then.
    (Racks of five hosts with 2 slots and one overdrawn: runs total 10, room 8 or 9.)"""
    topo, levels = k12()
    rng = np.random.default_rng(300 + seed)
    k = 40
    free = np.full((k, topo.n_servers), 2.0)
    free[:, ::6] = -rng.choice([1.0, 2.0], (k, topo.n_servers // 6))  # one host per rack
    lf = topo.link_capacity * np.ones((k, 1))
    n = rng.integers(6, 13, k)
    s = np.ones(k)
    b = rng.choice([1.0, 2.0], k)
    for opts in ({"host_link": "per_vm_strict", "zero_bandwidth": z}
                 for z in ("least_preferred", "most_preferred")):
        assert check(levels, free, lf, n, s, b, opts, integral=True).all()


def test_integral_hint_only_where_it_holds():
    topo, levels = small()
    from dcsim.allocators.vc.tetris import VCTetris

    e = VCTetris(VCTetris.parse_options({}))
    free, lf = np.full(topo.n_servers, 8.0), np.full(topo.n_links, 8.0)
    one = np.array([1.0, 2.0])
    assert e.lookahead_hints(free, lf, one, one)["integral"]
    assert not e.lookahead_hints(free - 0.5, lf, one, one)["integral"]
    assert not e.lookahead_hints(free, lf, np.array([0.5]), one)["integral"]  # 8 - 0.5 ...
    assert not e.lookahead_hints(free, lf, one, np.array([3.0]))["integral"]
    assert not e.lookahead_hints(free, lf * np.nan, one, one)["integral"]


@pytest.mark.parametrize("opts", OPTIONS[::3], ids=opts_id)
@pytest.mark.parametrize("seed", range(4))
def test_uneven_trees(seed, opts):
    """Groups of different sizes (padded member lists) and scattered uplinks, with and
    without the integral hint."""
    rng = np.random.default_rng(300 + seed)
    topo, levels = uneven_tree(rng)
    k = 24
    free = rng.choice([0.0, 1.0, 2.0, 4.0, 8.0], (k, topo.n_servers))
    lf = np.floor(topo.link_capacity * rng.random((k, topo.n_links)))
    n = rng.integers(1, 3 * topo.n_servers, k)
    s = rng.choice([1.0, 2.0, 4.0], k)
    b = rng.choice([1.0, 2.0], k)
    for integral in (False, True):
        check(levels, free, lf, n, s, b, opts, integral=integral)
