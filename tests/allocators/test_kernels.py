"""The compiled lookahead kernels (issue #19, :mod:`dcsim.kernels`) advance AHAB's
lookahead states exactly as the numpy batch code does: the same rewards and the same
final states, bit for bit, on regular and uneven trees, every ``host_link`` rule, plain
sizes on integral states and not, many rows and steps.

Skipped without numba (the ``fast`` extra); the numpy path is the reference and is what
every other test runs when numba is missing.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dcsim.allocators.vc.lookahead import advance, integral_lookahead
from dcsim.errors import ConfigError
from dcsim.model import ClusterState, StateView
from dcsim.model.vc import HOST_LINK_RULES
from dcsim.plugins import get_allocator_class
from tests.helpers.trees import fat_tree, uneven_tree
from tests.helpers.vc import SIZES, random_rows

pytest.importorskip("numba")

#: embedders with a lookahead kernel
KERNEL_EMBEDDERS = ["kraken", "vc_tetris", "oktopus"]
ZERO_BANDWIDTH = ["least_preferred", "most_preferred", "infeasible", "infeasible_if_stranded"]


def embedder_on(name, topo, host_link, **options):
    cls = get_allocator_class(name)
    e = cls(cls.parse_options({"host_link": host_link, **options}))
    e.setup(StateView(ClusterState(topo)))
    return e


def futures(rng, K, steps, hosts, sizes):
    ns = rng.integers(1, max(3, 3 * hosts // 2), (steps, K)).astype(np.int64)
    ss = rng.choice(SIZES[sizes], (steps, K))
    bs = rng.choice(SIZES[sizes], (steps, K))
    return ns, ss, bs


def both_ways(embedder, free, lf, ns, ss, bs, expect_kernel=True):
    """Advance copies of the states with the numpy code and with the kernel; assert the
    same rewards and states, bit for bit."""
    hints = embedder.lookahead_hints(free, lf, ss.T, bs.T)
    assert (embedder.lookahead_kernel(hints) is not None) == expect_kernel, hints
    out = []
    for kernels in (False, True):
        cpu, links = free.copy(), lf.copy()
        reward = np.zeros(free.shape[0])
        advance(embedder, embedder.levels, cpu, links, ns, ss, bs, reward, hints, kernels)
        out.append((reward, cpu, links))
    (r0, c0, l0), (r1, c1, l1) = out
    assert r0.tobytes() == r1.tobytes()
    assert c0.tobytes() == c1.tobytes()
    assert l0.tobytes() == l1.tobytes()
    return r0


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), K=st.integers(1, 10), steps=st.integers(1, 6),
       host_link=st.sampled_from(HOST_LINK_RULES), sizes=st.sampled_from(["plain", "whole"]),
       name=st.sampled_from(KERNEL_EMBEDDERS), uneven=st.booleans(),
       zero_bandwidth=st.sampled_from(ZERO_BANDWIDTH), overdrawn=st.booleans(),
       host_counts=st.sampled_from(["exact", "interval"]),
       shape=st.sampled_from([(2, 2, 3), (3, 2, 2), (1, 1, 4), (2, 3, 1)]))
def test_kernels_advance_the_states_as_numpy_does(seed, K, steps, host_link, sizes, name,
                                                 uneven, zero_bandwidth, overdrawn,
                                                 host_counts, shape):
    rng = np.random.default_rng(seed)
    topo, levels = uneven_tree(rng) if uneven else fat_tree(*shape)
    free, lf, _, _, _ = random_rows(levels, rng, K, sizes, full=bool(seed % 2))
    if overdrawn:  # a few hosts and links below zero (whole numbers still)
        free -= rng.random(free.shape) < 0.1
        lf -= rng.random(lf.shape) < 0.1
    ns, ss, bs = futures(rng, K, steps, topo.n_servers, sizes)
    # KRAKEN's kernel takes plain sizes (powers of two); VC-TETRIS's and OKTOPUS's
    # integral states (sizes from 1, whole free CU and BU), which "plain" (with 0.5) may
    # not give
    expect = name == "kraken" or integral_lookahead(free, lf, ss, bs)
    assert expect or sizes == "plain"
    options = {"vc_tetris": {"zero_bandwidth": zero_bandwidth},
               "oktopus": {"host_counts": host_counts}}.get(name, {})
    both_ways(embedder_on(name, topo, host_link, **options), free, lf, ns, ss, bs, expect)


@pytest.mark.parametrize("name", KERNEL_EMBEDDERS)
@pytest.mark.parametrize("host_link", HOST_LINK_RULES)
def test_kernels_on_the_ahab_fat_tree(name, host_link):
    """AHAB's lookahead: 40 rows, 15 steps, the paper's VC sizes, loaded states."""
    from dcsim.model.topologies import build_topology

    topo = build_topology({"kind": "fat_tree", "preset": "ahab_k12"})
    e = embedder_on(name, topo, host_link)
    rng = np.random.default_rng(19)
    for full in (True, False):
        free, lf, _, _, _ = random_rows(e.levels, rng, 40, "whole", full=full)
        ns = rng.integers(3, 61, (15, 40))
        ss = rng.choice([1.0, 2.0, 4.0, 8.0], (15, 40))
        bs = rng.choice([1.0, 2.0, 4.0, 8.0], (15, 40))
        reward = both_ways(e, free, lf, ns, ss, bs)
        assert reward.any()  # some VCs embedded: the states really moved


@pytest.mark.parametrize("name", KERNEL_EMBEDDERS)
def test_sizes_that_are_not_plain_take_the_numpy_code(name):
    topo, _ = fat_tree(2, 2, 3)
    e = embedder_on(name, topo, "hose")
    rng = np.random.default_rng(4)
    free, lf, _, _, _ = random_rows(e.levels, rng, 3, "any", full=True)
    ns, ss, bs = futures(rng, 3, 2, topo.n_servers, "any")
    ss[0, 0] = 1.5  # not a power of two
    both_ways(e, free, lf, ns, ss, bs, expect_kernel=False)


def test_oktopus_declines_vcs_past_one_bit_set():
    """N > 63 does not fit OKTOPUS's uint64 count sets: its kernel leaves the lookahead to
    the numpy code (which sends those rows to the one-row embedder)."""
    topo, _ = fat_tree(2, 3, 4)
    e = embedder_on("oktopus", topo, "hose")
    rng = np.random.default_rng(8)
    free, lf, _, _, _ = random_rows(e.levels, rng, 4, "whole", full=True)
    free[:] = 8.0
    lf[:] = topo.link_capacity
    ns = np.array([[70, 3, 2, 64], [2, 2, 2, 2]])
    ss = np.ones((2, 4))
    bs = np.ones((2, 4))
    hints = e.lookahead_hints(free, lf, ss.T, bs.T)
    reward = np.zeros(4)
    assert not e.lookahead_kernel(hints)(free.copy(), lf.copy(), ns, ss, bs, ns * ss, reward)
    assert not reward.any()
    assert both_ways(e, free, lf, ns, ss, bs)[0] == 72.0  # 70 VMs of 1 CU, then 2 more


def test_the_kernels_setting(monkeypatch):
    from dcsim.kernels import kernels_on

    monkeypatch.setenv("DCSIM_KERNELS", "numpy")
    assert not kernels_on()
    monkeypatch.setenv("DCSIM_KERNELS", "numba")
    assert kernels_on()
    monkeypatch.setenv("DCSIM_KERNELS", "auto")
    assert kernels_on()
    monkeypatch.setenv("DCSIM_KERNELS", "fast")
    with pytest.raises(ConfigError, match="DCSIM_KERNELS"):
        kernels_on()
