"""The fast paths of the batched OKTOPUS give exactly the one-row embedder's results.

``oktopus_embed_batch`` sums intervals by matrix products and keeps exact bit sets only for
the groups that need them, summed and split in Python ints when few, in numpy when many.
These tests drive each path (and trees with uneven groups and scattered uplinks).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dcsim.allocators.vc.lookahead import hose_limit, integral_lookahead
from dcsim.allocators.vc.oktopus import oktopus_embed, oktopus_embed_batch
from dcsim.allocators.vc.oktopus import sets as oktopus_sets
from dcsim.allocators.vc.oktopus.bitsets import _popcount_swar, hose_bits, popcount, sum_sets
from dcsim.model.vc import HOST_LINK_RULES, TreeLevels
from tests.helpers.trees import fat_tree, uneven_tree
from tests.helpers.vc import fresh

#: every (host_link, host_counts), the defaults first
OPTIONS = [{"host_link": h, "host_counts": c}
           for h in HOST_LINK_RULES for c in ("exact", "interval")]


def opts_id(o):
    return ",".join(o.values())


def check_rows(levels, free, lf, n, s, b, opts=None):
    opts = opts or {}
    counts, ok = oktopus_embed_batch(levels, free, lf, n, s, b, **opts)
    assert counts.dtype == np.int64 and ok.dtype == bool
    for i in range(len(n)):
        want = oktopus_embed(levels, free[i], lf[i], int(n[i]), float(s[i]), float(b[i]),
                             **opts)
        assert ok[i] == (want is not None), i
        np.testing.assert_array_equal(counts[i], 0 if want is None else want, err_msg=str(i))
    ok2, r, h, m = oktopus_embed_batch(levels, free, lf, n, s, b, **opts, sparse=True)
    assert np.array_equal(ok2, ok) and (m > 0).all() and m.dtype == np.int64
    dense = np.zeros_like(counts)
    np.add.at(dense, (r, h), m)  # each (row, host) once: add.at would expose a repeat
    np.testing.assert_array_equal(dense, counts)
    if integral_lookahead(free, lf, s, b):  # AHAB's hint, where it holds
        hinted, ok3 = oktopus_embed_batch(levels, free, lf, n, s, b, **opts, integral=True)
        assert np.array_equal(ok3, ok)
        np.testing.assert_array_equal(hinted, counts)
    return ok


def random_states(topo, rng, k, tight):
    free = rng.integers(0, 9, (k, topo.n_servers)).astype(float)
    free[rng.random(free.shape) < 0.3] = 0.0
    scale = rng.random((k, topo.n_links)) * (0.3 if tight else 1.0)
    lf = np.floor(topo.link_capacity * scale)
    return free, lf


@pytest.fixture(params=["python", "numpy"])
def exact_path(request, monkeypatch):
    """Few exactly summed groups go through Python ints, many through numpy: force each."""
    monkeypatch.setattr(oktopus_sets, "_PY_MAX", 10**9 if request.param == "python" else 0)
    return request.param


@pytest.mark.parametrize("opts", OPTIONS, ids=opts_id)
@pytest.mark.parametrize("seed", range(2))
def test_k12_with_tight_links_on_both_exact_paths(exact_path, seed, opts):
    """Tight uplinks and small N make many hosts' sets two intervals (the exact paths);
    under every host_link and host_counts."""
    topo, levels = fat_tree(12, 6, 6)
    rng = np.random.default_rng(seed)
    k = 40
    free, lf = random_states(topo, rng, k, tight=seed % 2 == 0)
    n = rng.integers(3, 25 if seed % 2 == 0 else 61, k)
    s = rng.choice([1.0, 2.0, 4.0, 8.0], k)
    b = rng.choice([1.0, 2.0, 4.0, 8.0], k)
    check_rows(levels, free, lf, n, s, b, opts)


@pytest.mark.parametrize("opts", OPTIONS, ids=opts_id)
@pytest.mark.parametrize("seed", range(2))
def test_two_interval_sets_everywhere(exact_path, seed, opts):
    """Hosts that hold almost N behind uplinks that carry one or two VMs' hose: their sets
    are {0..c} ∪ {N − c..slots}, and so are many racks' and pods'."""
    topo, levels = fat_tree(4, 3, 4)
    rng = np.random.default_rng(seed)
    k = 40
    n = rng.integers(6, 16, k)
    b = rng.choice([1.0, 2.0], k)
    s = np.ones(k)
    free = np.minimum(n[:, None] - rng.integers(1, 3, (k, topo.n_servers)), 8).astype(float)
    lf = topo.link_capacity * (0.5 + rng.random((k, topo.n_links)))
    lf = np.minimum(lf, b[:, None] * rng.integers(0, 4, (k, topo.n_links)))
    ok = check_rows(levels, free, lf, n, s, b, opts)
    assert ok.any()


@pytest.mark.parametrize("seed", range(3))
def test_integral_states_with_overdrawn_host_links(seed):
    """The integral hint under per_vm_strict reads each host's cap min(⌊free/s⌋, ⌊up/b⌋,
    N) in one pass; an overdrawn host link (whole, negative) must still make that host
    hold nothing at all, as on the general path."""
    topo, levels = fat_tree(4, 3, 4)
    rng = np.random.default_rng(seed)
    k = 30
    free, lf = random_states(topo, rng, k, tight=False)
    hosts = TreeLevels(topo).uplink[0]
    over = rng.random((k, hosts.size)) < 0.2
    lf[:, hosts] = np.where(over, -rng.integers(1, 3, over.shape), lf[:, hosts])
    n = rng.integers(2, 30, k)
    s = rng.choice([1.0, 2.0], k)
    b = rng.choice([1.0, 2.0], k)
    assert integral_lookahead(free, lf, s, b)
    ok = check_rows(levels, free, lf, n, s, b, {"host_link": "per_vm_strict"})
    assert ok.any() and not ok.all()


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(1, 10), pow2=st.booleans(),
       python=st.booleans(), opts=st.sampled_from(OPTIONS))
def test_uneven_trees_with_scattered_uplinks(seed, k, pow2, python, opts):
    rng = np.random.default_rng(seed)
    topo, levels = uneven_tree(rng)
    free, lf = random_states(topo, rng, k, tight=bool(rng.random() < 0.5))
    lf[rng.random(lf.shape) < 0.05] -= 1.0  # an overdrawn link: not even 0 VMs' hose fits
    n = rng.integers(1, 20, k)
    s = rng.choice([0.0, 1.0, 2.0, 4.0] if pow2 else [0.0, 0.3, 1.5, 2.5], k)
    b = rng.choice([1.0, 2.0, 4.0] if pow2 else [0.0, 0.1, 0.7, 1.1], k)
    old = oktopus_sets._PY_MAX
    oktopus_sets._PY_MAX = 10**9 if python else 0
    try:
        check_rows(levels, free, lf, n, s, b, opts)
    finally:
        oktopus_sets._PY_MAX = old


@settings(max_examples=300, deadline=None)
@given(a=st.integers(0, 2**64 - 1), b=st.integers(0, 2**64 - 1), shift=st.integers(0, 63))
def test_python_minkowski_sum_equals_the_numpy_one(a, b, shift):
    b >>= shift  # sets of every width
    want = int(sum_sets(np.array([a], dtype=np.uint64), np.array([b], dtype=np.uint64))[0])
    assert oktopus_sets._py_sum(a, b) == want


def test_popcount_fallback_counts_bits():
    rng = np.random.default_rng(1)
    x = rng.integers(0, 2**63, 5000, dtype=np.uint64) << np.uint64(1)
    x |= rng.integers(0, 2, 5000, dtype=np.uint64)
    x >>= rng.integers(0, 64, 5000).astype(np.uint64)
    x[:3] = [0, 1, 2**64 - 1]
    want = np.array([bin(int(v)).count("1") for v in x])
    np.testing.assert_array_equal(_popcount_swar(x), want)
    np.testing.assert_array_equal(popcount(x), want)


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 63))
def test_hose_limit_skips_the_correction_only_where_exact(seed, n):
    """Powers of two: the uncorrected quotient equals the corrected one."""
    rng = np.random.default_rng(seed)
    up = np.concatenate([rng.random(30) * 70, np.floor(rng.random(30) * 70),
                         [-1e-9, -1.0, 0.0, np.inf, -2e-9]])[None, :].repeat(4, axis=0)
    b = np.array([0.25, 1.0, 2.0, 8.0])
    nn = np.full(4, n)
    np.testing.assert_array_equal(hose_limit(up, nn, b, exact_div=True),
                                  hose_limit(up, nn, b, exact_div=False))


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 63))
def test_hose_limit_on_integral_states(seed, n):
    """The lookahead's integral hint (whole residuals, overdrawn ones included, B powers of
    two from 1): one floor of up · (1/b) gives the corrected limit."""
    rng = np.random.default_rng(seed)
    up = np.floor(rng.random((6, 40)) * 140) - 4.0  # -4..135
    b = np.array([1.0, 2.0, 4.0, 8.0, 16.0, 1024.0])
    nn = np.full(6, n)
    np.testing.assert_array_equal(hose_limit(up, nn, b, integral=True),
                                  hose_limit(up, nn, b, exact_div=False))


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 63))
def test_hose_bits_with_a_cap(seed, n):
    """{x ≤ cap : x ≤ c or x ≥ n − c}, shifts of 64 or more included (c = −1, cap < 0)."""
    rng = np.random.default_rng(seed)
    c = rng.integers(-1, n + 1, 50)
    cap = rng.integers(-3, n + 1, 50)
    got = hose_bits(c[None, :], np.array([[n]]), cap[None, :])[0]
    for ci, ki, g in zip(c.tolist(), cap.tolist(), got.tolist(), strict=True):
        want = sum(1 << x for x in range(0, max(ki + 1, 0)) if x <= ci or x >= n - ci)
        assert g == want


# ------------------------------------------------------------------ the one-row embedder
def test_oktopus_takes_the_first_subtree_that_fits(fig1):
    """Host 0 if it fits there, else the first rack, else the first pod (AHAB Fig. 1 tree)."""
    topo, levels = fig1
    free, lf = fresh(topo)
    assert oktopus_embed(levels, free, lf, 2, 2, 1).tolist() == [2, 0, 0, 0, 0, 0, 0, 0]
    assert oktopus_embed(levels, free, lf, 2, 4, 2).tolist() == [1, 1, 0, 0, 0, 0, 0, 0]
    assert oktopus_embed(levels, free, lf, 3, 4, 2).tolist() == [1, 1, 1, 0, 0, 0, 0, 0]
    free[0] = 0  # host 0 busy: the next host, the rack with room, ...
    assert oktopus_embed(levels, free, lf, 2, 2, 1).tolist() == [0, 2, 0, 0, 0, 0, 0, 0]
    assert oktopus_embed(levels, free, lf, 2, 4, 2).tolist() == [0, 0, 1, 1, 0, 0, 0, 0]


def test_oktopus_fills_children_greedily_in_index_order(fig1):
    """Inside the chosen pod, the first rack takes all it can before the next gets any."""
    topo, levels = fig1
    free, lf = np.full(8, 4.0), topo.link_capacity.copy()
    counts = oktopus_embed(levels, free, lf, 10, 1, 1)  # 10 VMs of 1 CU: a pod holds 16
    assert counts.tolist() == [4, 4, 2, 0, 0, 0, 0, 0]


def test_oktopus_respects_gaps_in_the_feasible_counts(fig1):
    """A host that can take {0, 1, 4} of 5 VMs never gets the gap count 2 (interval M_v would)."""
    topo, levels = fig1
    free, lf = np.full(8, 4.0), topo.link_capacity.copy()
    free[0] = 3
    lf[levels.uplink[0][0]] = 2  # host 0: 3 slots, any of 0..3 VMs (min(3, 2) = 2)
    lf[levels.uplink[0][1]] = 1  # host 1: {0, 1, 4}
    naive = np.array([3, 2, 0, 0, 0, 0, 0, 0])  # host 0 takes its max 3, host 1 the rest
    assert levels.hose_loads(naive, 5, 1)[levels.uplink[0][1]] > 1
    assert oktopus_embed(levels, free, lf, 5, 1, 1).tolist() == [1, 4, 0, 0, 0, 0, 0, 0]


def test_oktopus_rejects_only_when_nothing_fits(fig1):
    """Too little compute, or VMs that must spread over links with no bandwidth: None."""
    topo, levels = fig1
    assert oktopus_embed(levels, np.zeros(8), topo.link_capacity.copy(), 2, 1, 1) is None
    assert oktopus_embed(levels, np.full(8, 4.0), np.zeros(14), 2, 4, 1) is None
    assert oktopus_embed(levels, np.full(8, 4.0), np.zeros(14), 2, 2, 1) is not None


def test_oktopus_interval_host_counts_by_hand(fig1):
    """h0: 3 slots, 2 BU; h1: 4 slots, 1 BU; (5, 1, 1). Exact sets: h0 {0..3}, h1 {0, 1, 4}:
    rack 0 holds 1 + 4. Interval: h0 {0..2}, h1 {0, 1}: rack 0 holds 3 < 5, so rack 1
    (4 + 1)."""
    topo, levels = fig1
    free, lf = np.full(8, 4.0), topo.link_capacity.copy()
    free[0] = 3
    lf[levels.uplink[0][0]] = 2
    lf[levels.uplink[0][1]] = 1
    assert oktopus_embed(levels, free, lf, 5, 1, 1).tolist() == [1, 4, 0, 0, 0, 0, 0, 0]
    got = oktopus_embed(levels, free, lf, 5, 1, 1, "hose", "interval")
    assert got.tolist() == [0, 0, 4, 1, 0, 0, 0, 0]
    # the reservation stays the hose amount: h2's link carries min(4, 1) = 1 BU
    assert levels.hose_loads(got, 5, 1)[levels.uplink[0][2]] == 1

