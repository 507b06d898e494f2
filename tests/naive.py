"""Slow, obvious references that the tests compare dcsim's fast code against (as STUMPY's
``tests/naive.py``): they are never used by dcsim itself.

- :func:`optimal_footprint`: KRAKEN's minimum-footprint embedding of one virtual cluster by
  the exact tree dynamic program (Fuerst et al. 2016), the oracle of the KRAKEN embedder
  (``dcsim/allocators/vc/kraken``) and of AHAB's lookahead with it.
"""

from __future__ import annotations

import numpy as np

from dcsim.model.vc import TreeLevels, host_link_vms, vm_slots


def optimal_footprint(levels: TreeLevels, free_cpu: np.ndarray, link_free: np.ndarray,
                      n: int, s: float, b: float, host_link: str = "hose") -> float:
    """Minimum footprint of VC (n, s, b) on the current state, by the tree DP; inf if none.

    f(v, x) = min over splits of x among v's children of Σ f(w, x_w), plus v's uplink cost
    min(x, n - x)·b (host links: ``host_link_vms(x, n, host_link)·b``), infinite where that
    exceeds the uplink's free bandwidth. Exact and O(nodes · n²): a test oracle, not an
    embedder.
    """
    inf = np.inf
    x = np.arange(n + 1)
    slots = np.minimum(vm_slots(free_cpu, s), n)
    cost = np.where(x[None, :] <= slots[:, None], 0.0, inf)  # hosts, before uplinks
    for k in range(levels.height):
        up_free = link_free[levels.uplink[k]]
        if k == 0:
            hose = host_link_vms(x, n, host_link) * b
        else:
            hose = np.minimum(x, n - x) * b
        cost = cost + hose[None, :]
        cost[hose[None, :] > up_free[:, None] + 1e-9] = inf
        nxt = np.full((levels.size[k + 1], n + 1), inf)
        nxt[:, 0] = 0.0
        for g in range(levels.size[k]):
            p = levels.parent[k][g]
            acc = nxt[p]
            merged = np.full(n + 1, inf)
            for y in range(n + 1):  # min-plus convolution
                if np.isfinite(cost[g, y]):
                    merged[y:] = np.minimum(merged[y:], acc[: n + 1 - y] + cost[g, y])
            nxt[p] = merged
        cost = nxt
    return float(cost[0, n])
