"""Random virtual-cluster rows (free compute, free links, requests) for the batch embedders."""

from __future__ import annotations

import numpy as np

SIZES = {"pow2": [0.0, 1.0, 2.0, 4.0, 8.0], "any": [0.0, 0.5, 1.0, 1.5, 3.0, 2.5],
         "plain": [0.5, 1.0, 2.0, 4.0, 8.0],  # plain: AHAB's fast path (plain_sizes)
         "whole": [1.0, 2.0, 4.0, 8.0]}  # ... on integral states (integral_lookahead)


def random_rows(levels, rng, k, sizes, full=False):
    topo = levels.topology
    free = rng.integers(0, 9, (k, topo.n_servers)).astype(float)
    if not full:
        free *= rng.random((k, 1)) < 0.7  # some rows nearly empty of free compute
        free = np.where(rng.random(free.shape) < 0.4, 0.0, free)
    lf = np.floor(topo.link_capacity * rng.random((k, topo.n_links)))
    n = rng.integers(1, 3 * topo.n_servers // 2 + 2, k)
    s = rng.choice(SIZES[sizes], k)
    b = rng.choice(SIZES[sizes], k)
    return free, lf, n, s, b


def random_vc_state(topo, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """One random state: free CU per host (integers 0..8) and free bandwidth per link
    (floored)."""
    rng = np.random.default_rng(seed)
    free = rng.integers(0, 9, topo.n_servers).astype(float)
    return free, np.floor(topo.link_capacity * rng.random(topo.n_links))
