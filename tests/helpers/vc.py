"""Virtual clusters in a test: the small tree and workload the engine runs use (written once
here), random states and rows (free compute, free links, requests), and the hypothesis
strategies for one VC request on a random tree."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

#: 2 pods x 2 racks x 3 hosts of 8 CU, 8-BU host links: the engine tests' tree
VC_TREE = {"kind": "fat_tree", "pods": 2, "racks": 2, "hosts": 3, "server": {"cpu": 8},
           "host_link": 8}


def vc_workload(requests: int = 250, rate: float = 4, offered_load: float = 2.0, *,
                mean: float = 6, low: int = 2, high: int = 12) -> dict:
    """Poisson arrivals of VCs (N VMs of S CU, B BU each), the AHAB paper's size mix; N is
    exponential with ``mean``, whole, within ``low``..``high``."""
    return {
        "requests": requests,
        "arrival": {"process": "poisson", "rate": rate},
        "attrs": {
            "N": {"dist": "exponential", "mean": mean, "integer": True, "min": low,
                  "max": high},
            "S": {"dist": "discrete", "values": [1, 2, 4, 8], "probs": [0.45, 0.3, 0.2, 0.05]},
            "B": {"dist": "discrete", "values": [1, 2, 4, 8], "probs": [0.45, 0.3, 0.2, 0.05]},
        },
        "demand": {"cpu": "N*S"},
        "bandwidth": "B",
        "duration": {"dist": "exponential", "offered_load": offered_load,
                     "load_resource": "cpu"},
    }


def vc_cases(hosts: int = 4, max_n: int = 14) -> dict:
    """Strategies for ``@given(**vc_cases())``: a tree shape (up to 3 pods, 3 racks and
    ``hosts`` hosts), a state seed, and a VC (n up to ``max_n``, S and B)."""
    return {"shape": st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(1, hosts)),
            "seed": st.integers(0, 2**32 - 1),
            "n": st.integers(1, max_n),
            "s": st.sampled_from([1.0, 2.0, 4.0, 8.0]),
            "b": st.sampled_from([0.0, 1.0, 2.0, 4.0, 8.0])}

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


def fresh(topo) -> tuple[np.ndarray, np.ndarray]:
    """An empty tree's state: every host's CU and every link's BU free (copies)."""
    return topo.server_capacity[:, 0].copy(), topo.link_capacity.copy()
