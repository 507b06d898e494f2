"""Batched OKTOPUS and TETRIS (AHAB's lookahead): row by row exactly the one-state embedders."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dcsim.allocators.vc.embedder import VCAllocator, make_embedder
from dcsim.allocators.vc.oktopus import Oktopus, oktopus_embed, oktopus_embed_batch
from dcsim.allocators.vc.oktopus.bitsets import MAX_BITS_N, high_bit, hose_sets, sum_sets
from dcsim.allocators.vc.tetris import (
    ZERO_BANDWIDTH,
    VCTetris,
    tetris_embed,
    tetris_embed_batch,
)
from dcsim.allocators.vc.tetris.all_pairs import _feasible_runs
from dcsim.allocators.vc.tetris.batch import _greedy_batch
from dcsim.allocators.vc.tetris.reference import greedy
from dcsim.model.state import ClusterState, StateView
from dcsim.model.vc import HOST_LINK_RULES
from tests.helpers.trees import ahab_tree, fat_tree

BATCHED = {"oktopus": (oktopus_embed, oktopus_embed_batch),
           "vc_tetris": (tetris_embed, tetris_embed_batch)}

#: every option combination of the batched embedders (the defaults first)
OPTIONS = {
    "oktopus": [{"host_link": h, "host_counts": c}
                for h, c in itertools.product(HOST_LINK_RULES, ("exact", "interval"))],
    "vc_tetris": [{"host_link": h, "zero_bandwidth": z}
                  for h, z in itertools.product(HOST_LINK_RULES, ZERO_BANDWIDTH)],
}
VARIANTS = [(name, opts) for name in sorted(OPTIONS) for opts in OPTIONS[name]]
NON_DEFAULT = [v for v in VARIANTS if v[1] != OPTIONS[v[0]][0]]


def variant_id(v):
    return v[0] + "-" + ",".join(v[1].values())


def states(topo, rng, k):
    """K random states: free CU 0..8 per host, link_free = floor(capacity × U(0, 1))."""
    free = rng.integers(0, 9, (k, topo.n_servers)).astype(float)
    lf = np.floor(topo.link_capacity * rng.random((k, topo.n_links)))
    return free, lf


def assert_rows_equal(name, levels, free, lf, n, s, b, opts=None):
    """Batch = one-row embedder on every row, under the embedder's options ``opts``."""
    one, batch = BATCHED[name]
    opts = opts or {}
    readonly = [a.copy() for a in (free, lf, n, s, b)]
    for a in readonly:
        a.flags.writeable = False  # the batch must not write to its inputs
    counts, ok = batch(levels, *readonly, **opts)
    assert counts.shape == free.shape and counts.dtype == np.int64
    assert ok.shape == n.shape and ok.dtype == bool
    for i in range(len(n)):
        want = one(levels, free[i], lf[i], int(n[i]), float(s[i]), float(b[i]), **opts)
        assert ok[i] == (want is not None), (name, i)
        if want is None:
            assert not counts[i].any()
        else:
            np.testing.assert_array_equal(counts[i], want, err_msg=f"{name} row {i}")
    return ok


# ------------------------------------------------------------------ equality, small trees
@pytest.mark.parametrize("name", sorted(BATCHED))
@settings(max_examples=150, deadline=None)
@given(
    shape=st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3)),
    seed=st.integers(0, 2**32 - 1),
    k=st.integers(1, 8),
)
def test_batch_equals_row_by_row_on_random_trees(name, shape, seed, k):
    """Counts and feasibility of every row equal the one-state embedder's on that row."""
    random_trees_case(name, shape, seed, k, None)


def random_trees_case(name, shape, seed, k, opts):
    topo, levels = fat_tree(*shape)
    rng = np.random.default_rng(seed)
    free, lf = states(topo, rng, k)
    n = rng.integers(1, 15, k)
    s = rng.choice([0.0, 1.0, 2.0, 4.0], k)
    b = rng.choice([0.0, 1.0, 2.0, 4.0], k)
    assert_rows_equal(name, levels, free, lf, n, s, b, opts)


@pytest.mark.parametrize("variant", NON_DEFAULT, ids=variant_id)
@settings(max_examples=30, deadline=None)
@given(
    shape=st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3)),
    seed=st.integers(0, 2**32 - 1),
    k=st.integers(1, 8),
)
def test_batch_equals_row_by_row_under_every_option(variant, shape, seed, k):
    """The same under every other value of host_link, host_counts and zero_bandwidth."""
    random_trees_case(variant[0], shape, seed, k, variant[1])


@pytest.mark.parametrize("variant", VARIANTS, ids=variant_id)
def test_batch_equals_row_by_row_on_half_loaded_k12_tree(variant):
    """K = 40 half-loaded states of the AHAB k = 12 tree, VCs of the paper's sizes."""
    name, opts = variant
    topo, levels = ahab_tree("ahab_k12")
    rng = np.random.default_rng(12)
    k = 40
    free = rng.integers(0, 9, (k, topo.n_servers)).astype(float)
    free[rng.random(free.shape) < 0.5] = 0.0
    lf = np.floor(topo.link_capacity * (0.2 + 0.8 * rng.random((k, topo.n_links))))
    n = rng.integers(3, 61, k)
    s = rng.choice([1.0, 2.0, 4.0, 8.0], k, p=[0.45, 0.3, 0.2, 0.05])
    b = rng.choice([1.0, 2.0, 4.0, 8.0], k, p=[0.45, 0.3, 0.2, 0.05])
    ok = assert_rows_equal(name, levels, free, lf, n, s, b, opts)
    assert 0 < ok.sum() < k  # the instance exercises both outcomes


@pytest.mark.parametrize("variant", VARIANTS, ids=variant_id)
def test_batch_equals_row_by_row_with_fractional_sizes(variant):
    """Non-integer S, B and residuals (the ulp corrections of the count formulas)."""
    name, opts = variant
    topo, levels = fat_tree(2, 3, 3)
    rng = np.random.default_rng(5)
    for _ in range(20):
        k = 10
        free = np.round(rng.random((k, topo.n_servers)) * 8, 1)
        lf = np.round(topo.link_capacity * rng.random((k, topo.n_links)), 1)
        n = rng.integers(1, 20, k)
        s = rng.choice([0.1, 0.3, 0.7, 1.5, 2.5], k)
        b = rng.choice([0.0, 0.1, 0.3, 0.7, 1.1], k)
        assert_rows_equal(name, levels, free, lf, n, s, b, opts)


def test_oktopus_rows_past_64_counts_use_the_one_row_code():
    """N > 63 does not fit one bit set: those rows go through oktopus_embed, still exact."""
    topo, levels = fat_tree(3, 3, 3)
    rng = np.random.default_rng(3)
    free = rng.integers(4, 9, (6, topo.n_servers)).astype(float)
    lf = np.floor(topo.link_capacity * (0.5 + 0.5 * rng.random((6, topo.n_links))))
    n = np.array([MAX_BITS_N, MAX_BITS_N + 1, 70, 5, 100, 64])
    s = np.array([1.0, 1.0, 1.0, 2.0, 0.0, 1.0])
    b = np.array([1.0, 0.0, 1.0, 1.0, 1.0, 2.0])
    ok = assert_rows_equal("oktopus", levels, free, lf, n, s, b)
    assert ok[:3].any()


def test_tetris_rows_with_an_overdrawn_link_use_the_one_row_code():
    """A link below -1e-9 free fails every hose check: such rows go through tetris_embed."""
    topo, levels = fat_tree(2, 2, 3)
    rng = np.random.default_rng(4)
    free, lf = states(topo, rng, 8)
    lf[::2, -1] = -1.0
    n = rng.integers(2, 15, 8)
    s = rng.choice([1.0, 2.0], 8)
    b = rng.choice([0.0, 1.0], 8)
    assert_rows_equal("vc_tetris", levels, free, lf, n, s, b)


@pytest.mark.parametrize("name", sorted(BATCHED))
def test_an_empty_batch_embeds_nothing(name):
    topo, levels = fat_tree(2, 2, 2)
    counts, ok = BATCHED[name][1](levels, np.zeros((0, topo.n_servers)),
                                  np.zeros((0, topo.n_links)), np.zeros(0, dtype=np.int64),
                                  np.zeros(0), np.zeros(0))
    assert counts.shape == (0, topo.n_servers) and ok.shape == (0,)


@pytest.mark.parametrize("variant", VARIANTS, ids=variant_id)
def test_embedders_embed_through_their_batch_with_the_one_row_result(variant):
    """Oktopus/VCTetris.embed (the batch code on one row, with its hints) and .embed_batch
    equal the one-row reference function row by row, under every option (the classes pass
    their options on), on fractional states too."""
    name, opts = variant
    cls = {"oktopus": Oktopus, "vc_tetris": VCTetris}[name]
    topo, levels = fat_tree(2, 3, 2)
    e = make_embedder(cls.name, "test", topology=topo, options=opts)
    e.setup(StateView(ClusterState(topo)))
    assert type(e).embed_batch is not VCAllocator.embed_batch
    one = BATCHED[name][0]
    extra = (e.capacity,) if name == "vc_tetris" else ()
    rng = np.random.default_rng(8)
    free, lf = states(topo, rng, 12)
    free[6:] -= 0.5 * rng.random((6, topo.n_servers))  # not whole: no integral hint
    n, s, b = rng.integers(1, 13, 12), rng.choice([1.0, 2.0], 12), rng.choice([1.0, 2.0], 12)
    counts, ok = e.embed_batch(free, lf, n, s, b)
    for i in range(12):
        args = (free[i], lf[i], int(n[i]), float(s[i]), float(b[i]))
        want = one(levels, *args[:5], *extra, **opts)
        got = e.embed(*args)
        assert ok[i] == (want is not None) == (got is not None), i
        if want is not None:
            np.testing.assert_array_equal(got, want)
            np.testing.assert_array_equal(counts[i], want)


# ------------------------------------------------------------------ TETRIS's greedy
@pytest.mark.parametrize("host_link,zero_bandwidth",
                         list(itertools.product(HOST_LINK_RULES, ZERO_BANDWIDTH)))
@settings(max_examples=40, deadline=None)
@given(
    shape=st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(1, 4)),
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 16),
    s=st.sampled_from([0.0, 1.0, 2.0, 3.0]),
    b=st.sampled_from([0.0, 1.0, 2.0, 3.0]),
)
def test_ironed_greedy_equals_the_vm_by_vm_loop(host_link, zero_bandwidth, shape, seed, n, s,
                                                b):
    """_greedy_batch (sort by running-minimum keys) = greedy (argmax per VM), ties included.

    Why: the loop picks the max key (ties: lowest host); call a host *raised* when its
    current key exceeds its running minimum I. By induction on the picks taken so far
    being a prefix of the order (−I, host, i): every unpicked I is ≤ the last picked I = v,
    a raised host's I equals v and its key exceeds v, and only the host just picked can
    become raised — so there is at most one, the loop picks it, and no unraised host with
    I = v precedes it (that head would have preceded the pick that raised it). Without a
    raised host, key = I everywhere and both pick the same. Integer residuals give many
    ties, zero bandwidth residuals give the ±inf keys.
    """
    topo, levels = fat_tree(*shape)
    rng = np.random.default_rng(seed)
    free = rng.integers(0, 9, topo.n_servers).astype(float)
    up = rng.integers(0, 9, topo.n_servers).astype(float)
    for k in range(1, levels.height + 1):
        hosts = levels.hosts_of[k]
        m, alive = greedy(hosts, free, up, n, s, b, host_link, zero_bandwidth)
        P = hosts.shape[0]
        one = np.ones(1, dtype=np.int64)
        runs = _feasible_runs(free[None], up[None], n * one, s * one.astype(float),
                              b * one.astype(float), host_link, zero_bandwidth)
        total = np.where(hosts >= 0, runs[0][np.maximum(hosts, 0)], 0).sum(axis=1)
        np.testing.assert_array_equal(total >= n, alive)
        go = np.flatnonzero(alive)
        if go.size:
            got = _greedy_batch(hosts[go], np.zeros(go.size, dtype=np.int64), free[None],
                                up[None], np.arange(up.size), runs, np.full(go.size, n),
                                np.full(go.size, float(s)), np.full(go.size, float(b)),
                                host_link, zero_bandwidth)
            np.testing.assert_array_equal(got, m[go])
        assert P == levels.size[k]


# ------------------------------------------------------------------ bit-set helpers
def as_set(x: int) -> set[int]:
    return {i for i in range(64) if x >> i & 1}


@pytest.mark.parametrize("size", [5, 2000])  # one broadcast pass; a loop over shifts
@pytest.mark.parametrize("right", [False, True])
def test_sum_sets_is_the_minkowski_sum(size, right):
    rng = np.random.default_rng(size)
    a = rng.integers(0, 1 << 40, size, dtype=np.uint64) & rng.integers(0, 1 << 63, size,
                                                                       dtype=np.uint64)
    b = rng.integers(0, 1 << 20, size, dtype=np.uint64)
    out = sum_sets(a, b, right=right)
    for i in range(0, size, max(1, size // 50)):
        bs = as_set(int(b[i]))
        if right:  # reflected: bit 63 - x stands for x
            xs = {63 - x for x in as_set(int(a[i]))}
            want = {63 - (x + y) for x in xs for y in bs if x + y <= 63}
        else:
            want = {x + y for x in as_set(int(a[i])) for y in bs if x + y <= 63}
        assert as_set(int(out[i])) == want


def test_high_bit_is_exact_past_float_precision():
    xs = [1, 2, 3, 255, 256, (1 << 53) - 1, 1 << 53, (1 << 54) - 1, (1 << 63) + 5,
          (1 << 64) - 1]
    got = high_bit(np.array(xs, dtype=np.uint64))
    assert got.tolist() == [x.bit_length() - 1 for x in xs]


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), hosts=st.integers(1, 30), segs=st.integers(1, 5))
def test_one_lexsort_picks_as_rank_then_sort(seed, hosts, segs):
    """The first-group greedy's single lexsort by (segment, −key) picks what ranking the
    keys and sorting by (segment, rank) picks, with many equal keys and ±inf."""
    from dcsim.allocators.vc.tetris.all_pairs import _pick_counts, _rank, pick_by_keys

    rng = np.random.default_rng(seed)
    seg = np.sort(rng.integers(0, segs, hosts))
    ln = rng.integers(1, 5, hosts)
    owner = np.repeat(np.arange(hosts), ln)
    keys = rng.choice([-np.inf, -1e300, 0.0, 0.5, 1.0, 2.0, np.inf], owner.size)
    n = rng.integers(1, 8, segs)[seg]  # one n per segment, given per host
    np.testing.assert_array_equal(pick_by_keys(keys, owner, seg, n),
                                  _pick_counts(_rank(keys), owner, seg, n, None))


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, MAX_BITS_N))
def test_hose_sets_are_the_counts_whose_hose_fits(seed, n):
    """Bit x set iff min(x, n − x)·b <= up + 1e-9, computed exactly as the one-row code."""
    rng = np.random.default_rng(seed)
    up = np.concatenate([rng.random(20) * 30, np.floor(rng.random(20) * 30), [-1e-9, -1.0]])
    b = rng.choice([0.0, 0.1, 0.3, 1.0, 2.0, 7.0], 1)
    got = hose_sets(up[None, :], np.array([n]), b)[0]
    x = np.arange(n + 1)
    for j, u in enumerate(up):
        want = {int(v) for v in x[np.minimum(x, n - x) * b[0] <= u + 1e-9]}
        assert as_set(int(got[j])) == want


