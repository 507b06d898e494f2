"""The sparse batched KRAKEN (issue #19) embeds exactly as the dense level-by-level version
it replaced (``tests/kraken_reference.py``) and as the one-row embedder, row by row.

The fast version scores every centre of every level at once and hands the VMs down only to
subtrees that get some; these tests drive regular trees (strided child sums, uplinks as
slices) and uneven ones with shuffled links (``reduceat``, gathered uplinks), every
``host_link`` rule, sizes that are powers of two (multiplied by the reciprocal) and not,
zero S or B, and loaded states with many rows.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dcsim.allocators.vc.kraken import kraken_embed
from dcsim.allocators.vc.kraken.batch import (
    hose_loads_batch,
    kraken_embed_batch,
    kraken_embed_sparse,
    plain_sizes,
)
from dcsim.allocators.vc.lookahead import integral_lookahead
from dcsim.model.vc import HOST_LINK_RULES, TreeLevels
from tests.helpers.trees import fat_tree, uneven_tree
from tests.helpers.vc import SIZES, fresh, random_rows, random_vc_state, vc_cases
from tests.kraken_reference import kraken_embed_batch_reference
from tests.naive import optimal_footprint


def check(levels, free, lf, n, s, b, host_link):
    counts, ok = kraken_embed_batch(levels, free, lf, n, s, b, host_link)
    want, want_ok = kraken_embed_batch_reference(levels, free, lf, n, s, b, host_link)
    assert np.array_equal(ok, want_ok)
    assert np.array_equal(counts, want)
    hints = {(False, False), (plain_sizes(levels, s, b), False)}  # AHAB's, where they hold
    if hints != {(False, False)} and integral_lookahead(free, lf, s, b):
        hints.add((True, True))
    for plain, integral in hints:
        ok2, r, h, m = kraken_embed_sparse(levels, free, lf, n, s, b, host_link, plain,
                                           integral)
        assert np.array_equal(ok2, ok) and (m > 0).all()
        dense = np.zeros_like(counts)
        np.add.at(dense, (r, h), m)  # each (row, host) once: add.at would expose a repeat
        assert np.array_equal(dense, counts)
    assert (counts[ok].sum(axis=1) == n[ok]).all() and not counts[~ok].any()
    for i in range(len(n)):  # the one-row embedder (a batch of one) agrees
        one = kraken_embed(levels, free[i], lf[i], int(n[i]), float(s[i]), float(b[i]),
                           host_link)
        assert (one is None) == (not ok[i])
        if one is not None:
            assert np.array_equal(one, counts[i])


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(1, 12),
       host_link=st.sampled_from(HOST_LINK_RULES), sizes=st.sampled_from(sorted(SIZES)),
       shape=st.sampled_from([(2, 2, 3), (3, 2, 2), (1, 1, 4), (2, 3, 1)]))
def test_regular_trees(seed, k, host_link, sizes, shape):
    _, levels = fat_tree(*shape)
    assert all(a is not None for a in levels.arity)
    rng = np.random.default_rng(seed)
    check(levels, *random_rows(levels, rng, k, sizes), host_link)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(1, 12),
       host_link=st.sampled_from(HOST_LINK_RULES), sizes=st.sampled_from(sorted(SIZES)))
def test_uneven_trees_with_scattered_uplinks(seed, k, host_link, sizes):
    rng = np.random.default_rng(seed)
    _, levels = uneven_tree(rng)
    check(levels, *random_rows(levels, rng, k, sizes), host_link)


@pytest.mark.parametrize("host_link", HOST_LINK_RULES)
def test_many_rows_on_the_ahab_fat_tree(host_link):
    """40 rows (AHAB's lookahead) on the paper's k = 12 fat-tree, loaded and not."""
    from dcsim.model.topologies import build_topology

    levels = TreeLevels(build_topology({"kind": "fat_tree", "preset": "ahab_k12"}))
    rng = np.random.default_rng(12)
    for full in (True, False):
        free, lf, n, s, b = random_rows(levels, rng, 40, "plain", full=full)
        n = rng.integers(3, 61, 40)
        check(levels, free, lf, n, s, b, host_link)


def test_as_many_links_above_the_hosts_as_hosts():
    """Hypothesis's example (seed 1430): 3 hosts under 3 upper links. The upper links'
    counts once shared the host counts' scratch buffer and overwrote them."""
    rng = np.random.default_rng(1430)
    _, levels = uneven_tree(rng)
    assert levels.n_hosts == sum(levels.size[1:levels.height])  # links above the hosts
    check(levels, *random_rows(levels, rng, 2, "plain"), "per_vm_strict")


@pytest.mark.parametrize("host_link", HOST_LINK_RULES)
def test_integral_states_on_the_ahab_fat_tree(host_link):
    """The shipped experiments' sizes on whole states: the integral hint's floors without
    the ε give the same embeddings."""
    from dcsim.model.topologies import build_topology

    levels = TreeLevels(build_topology({"kind": "fat_tree", "preset": "ahab_k12"}))
    rng = np.random.default_rng(13)
    for full in (True, False):
        free, lf, n, s, b = random_rows(levels, rng, 40, "whole", full=full)
        n = rng.integers(3, 61, 40)
        assert integral_lookahead(free, lf, s, b)
        check(levels, free, lf, n, s, b, host_link)


def test_child_sum_equals_reduceat():
    """TreeLevels.child_sum (strided adds on regular trees) = np.add.reduceat."""
    rng = np.random.default_rng(1)
    for levels in (fat_tree(3, 4, 5)[1], uneven_tree(rng)[1]):
        for k in range(levels.height):
            x = rng.integers(0, 50, (7, levels.size[k])).astype(np.int32)
            got = levels.child_sum(x, k)
            assert got.dtype == x.dtype
            assert np.array_equal(got, np.add.reduceat(x, levels.starts[k], axis=1))


@pytest.mark.parametrize("host_link", HOST_LINK_RULES)
def test_reserving_the_triples_equals_subtracting_dense_loads(host_link):
    """AHAB's reserve_rows on the sparse result leaves exactly the floats of subtracting
    the dense counts' compute and hose_loads_batch from every row (x - 0.0 is x)."""
    from dcsim.allocators.vc.lookahead import reserve_rows

    for levels in (fat_tree(2, 3, 4)[1], uneven_tree(np.random.default_rng(3))[1]):
        rng = np.random.default_rng(5)
        free, lf, n, s, b = random_rows(levels, rng, 9, "any", full=True)
        ok, r, h, m = kraken_embed_sparse(levels, free, lf, n, s, b, host_link)
        counts, _ = kraken_embed_batch(levels, free, lf, n, s, b, host_link)
        cpu, links = free.copy(), lf.copy()
        reserve_rows(levels, cpu, links, r, h, m, n, s, b, host_link)
        want_cpu = free - counts * s[:, None]
        want_links = lf - hose_loads_batch(levels, counts, n, b, host_link)
        assert ok.any()
        np.testing.assert_array_equal(cpu, want_cpu)
        np.testing.assert_array_equal(links, want_links)
        for i in np.flatnonzero(ok):  # and the dense loads are the one-row ones
            np.testing.assert_array_equal(
                want_links[i], lf[i] - levels.hose_loads(counts[i], int(n[i]), b[i], host_link))


@pytest.mark.parametrize("host_link", HOST_LINK_RULES)
def test_a_row_without_an_embedding_gets_no_vms_below_an_overdrawn_link(host_link):
    """An overdrawn link's count is negative; handing down a failed row's zero VMs once
    gave its hosts negative counts, which AHAB's lookahead then reserved."""
    rng = np.random.default_rng(0)
    _, levels = fat_tree(2, 2, 3)
    free, lf, n, s, b = random_rows(levels, rng, 30, "plain")
    lf -= rng.random(lf.shape) < 0.2  # some links below zero
    assert (lf < 0).any()
    ok, r, h, m = kraken_embed_sparse(levels, free, lf, n, s, b, host_link, True, False)
    assert not ok.all()
    assert ok[r].all()


# ------------------------------------------------------------------ the one-row embedder
def test_paper_fig1_worked_example(fig1):
    """AHAB Fig. 1: VC (3, 4, 2) on 2x2x2 hosts of 4 CU, links 6/12/24: footprint 10, 5 links."""
    topo, levels = fig1
    free, lf = fresh(topo)
    assert optimal_footprint(levels, free, lf, 3, 4, 2) == 10
    counts = kraken_embed(levels, free, lf, 3, 4, 2)
    loads = levels.hose_loads(counts, 3, 2)
    assert loads.sum() == 10 and np.count_nonzero(loads) == 5
    assert counts.sum() == 3 and counts.max() == 1  # 4-CU VMs: one per host


def test_kraken_rejects_when_nothing_fits(fig1):
    """No embedding: too little compute, or no bandwidth to spread over hosts."""
    topo, levels = fig1
    assert kraken_embed(levels, np.zeros(8), topo.link_capacity.copy(), 2, 1, 1) is None
    free = np.full(8, 4.0)
    assert kraken_embed(levels, free, np.zeros(14), 2, 4, 1) is None  # needs two hosts
    assert kraken_embed(levels, free, np.zeros(14), 2, 2, 1) is not None  # fits on one


@settings(max_examples=150, deadline=None)
@given(**vc_cases())
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

