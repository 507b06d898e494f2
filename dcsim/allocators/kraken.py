"""KRAKEN: the minimum-footprint embedding of one virtual cluster, in time linear in hosts.

Why this is exact (the "centre of gravity" of the AHAB paper, made precise):

* Route every VM's traffic to a centre node c. A link then carries B per VM on its far side
  from c, so the *star cost* Σ_VM B·dist(host, c) bounds the hose footprint from above, with
  equality when c is the VMs' centre of gravity (every link's c-side holds ≥ N/2 VMs, so the
  far side holds min(m, N − m)). Minimising the star cost over all centres and placements
  therefore gives exactly the minimum hose footprint.
* For a fixed c, the capacity constraints — host slots ⌊free/S⌋ and, for each link, "VMs on
  its far side ≤ ⌊free bandwidth / B⌋" — form a laminar family, and every VM at the same
  distance costs the same. Filling the nearest distance class first is optimal (greedy on a
  laminar matroid; nearer classes are cheaper and use a subset of the constraints).

So for every node as centre (hosts, racks, pods, root) the algorithm computes in closed form
how many VMs each distance class takes, vectorised over all centres of a level; keeps the
cheapest feasible centre; and distributes each class's VMs to hosts in index order. The
footprint equals the tree DP optimum (``dcsim.model.vc.optimal_footprint``) on every instance;
the property test checks it. Ties between centres go to the lowest level, then lowest index.
"""

from __future__ import annotations

import numpy as np

from dcsim.allocators.vc_base import VCAllocator
from dcsim.hookspecs import hookimpl
from dcsim.model.vc import UNLIMITED, TreeLevels, link_slots, vm_slots


def _supplies(levels: TreeLevels, slots: np.ndarray, lcap: np.ndarray):
    """s[k][g]: VMs level-k group g can host as seen from above its uplink; child sums."""
    H = levels.height
    sup = [np.minimum(slots, lcap[levels.uplink[0]])]
    childsum = [slots]  # level 0 "children" = the host itself
    for k in range(1, H + 1):
        cs = np.bincount(levels.parent[k - 1], weights=sup[k - 1],
                         minlength=levels.size[k]).astype(np.int64)
        childsum.append(cs)
        if k < H:
            sup.append(np.minimum(cs, lcap[levels.uplink[k]]))
    return sup, childsum


def _split(amount: np.ndarray, parent: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """Give each parent's amount to its children in index order, each up to its cap."""
    order = np.argsort(parent, kind="stable")
    p = parent[order]
    c = cap[order]
    before = np.cumsum(c) - c
    starts = np.searchsorted(p, p)  # first child of the same parent
    before = before - before[starts]
    out = np.empty_like(cap)
    out[order] = np.clip(amount[p] - before, 0, c)
    return out


def kraken_plan(levels: TreeLevels, free_cpu: np.ndarray, link_free: np.ndarray, n: int,
                s: float, b: float):
    """Best centre: (footprint, level, group, VMs per distance class) or None."""
    H = levels.height
    slots = np.minimum(vm_slots(free_cpu, s), n)
    lcap = np.minimum(link_slots(link_free, b), UNLIMITED)
    sup, childsum = _supplies(levels, slots, lcap)
    if slots.sum() < n:  # not enough compute anywhere
        return None
    best = None
    for j in range(H + 1):
        up = levels.up[j]
        take0 = np.minimum(n, childsum[j])  # inside the centre's own subtree, distance j
        rest = n - take0
        cost = take0 * j
        res = [lcap[levels.uplink[m][up[m]]] for m in range(j, H)]  # residual per uplink
        takes = [take0]
        for k in range(j + 1, H + 1):
            avail = childsum[k][up[k]] - sup[k - 1][up[k - 1]]
            lim = res[0]
            for r in res[1 : k - j]:
                lim = np.minimum(lim, r)
            t = np.minimum(np.minimum(rest, avail), lim)
            for i in range(k - j):
                res[i] = res[i] - t
            rest = rest - t
            cost = cost + t * (2 * k - j)
            takes.append(t)
        ok = np.flatnonzero(rest == 0)
        if ok.size:
            g = int(ok[np.argmin(cost[ok])])
            c = float(cost[g]) * b
            if best is None or c < best[0] - 1e-9:
                best = (c, j, g, [int(t[g]) for t in takes], sup)
    return best


def kraken_embed(levels: TreeLevels, free_cpu: np.ndarray, link_free: np.ndarray, n: int,
                 s: float, b: float) -> np.ndarray | None:
    """VM counts per host of a minimum-footprint embedding of VC (n, s, b), or None."""
    plan = kraken_plan(levels, free_cpu, link_free, n, s, b)
    if plan is None:
        return None
    _, j, g, takes, sup = plan
    H = levels.height
    path = [int(levels.up[j][k][g]) for k in range(j, H + 1)]  # centre's ancestors
    amount = np.zeros(levels.size[H], dtype=np.int64)
    amount[0] = takes[H - j]  # the root's class (the centre's own class if it is the root)
    for k in range(H, 0, -1):  # top-down: split level k amounts over level k-1 groups
        cap = sup[k - 1].copy()
        if k - 1 >= j:
            cap[path[k - 1 - j]] = 0  # the centre's own branch is filled by its own class
        amount = _split(amount, levels.parent[k - 1], cap)
        if k - 1 >= j:
            amount[path[k - 1 - j]] += takes[k - 1 - j]
    return amount


class Kraken(VCAllocator):
    """Minimum-footprint embedding of each VC for the current state (no admission control)."""

    name = "kraken"
    description = "minimum-footprint VC embedding (centre of gravity, exact, linear in hosts)"

    def embed(self, free_cpu, link_free, n, s, b):
        return kraken_embed(self.levels, free_cpu, link_free, n, s, b)


@hookimpl
def register_allocators(register):
    register(Kraken)
