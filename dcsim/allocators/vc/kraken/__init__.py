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
footprint equals the tree DP optimum (``optimal_footprint`` in the repository's
``tests/naive.py``) on every instance; the property test checks it. Ties between centres
go to the lowest level, then lowest index.

Per-VM host links (``host_link: per_vm`` / ``per_vm_strict``, :mod:`dcsim.model.vc`): every
VM reserves B on its host link, so a host holds at most ⌊free bandwidth / B⌋ VMs and every
VM costs B there — exactly a centre above the hosts, whose star cost charges each VM its
host link. The links above are still hose links, so the same argument (on the tree cut
below the racks) makes the cheapest centre at level ≥ 1 exact. A host as centre is only
kept when it holds the whole VC (``per_vm``: that reserves nothing, cost 0); under
``per_vm_strict`` a host is never a centre (a VC on one host reserves N·B like any other).
"""

from __future__ import annotations

import numpy as np

from dcsim.allocators.vc.embedder import VCAllocator
from dcsim.allocators.vc.kernel_tables import rollout, tree_tables
from dcsim.allocators.vc.kraken.batch import kraken_embed_batch, kraken_embed_sparse, plain_sizes
from dcsim.allocators.vc.lookahead import integral_lookahead
from dcsim.hookspecs import hookimpl
from dcsim.model.vc import HOST_LINK_RULES, TreeLevels


def kraken_embed(levels: TreeLevels, free_cpu: np.ndarray, link_free: np.ndarray, n: int,
                 s: float, b: float, host_link: str = "hose") -> np.ndarray | None:
    """VM counts per host of a minimum-footprint embedding of VC (n, s, b), or None."""
    counts, ok = kraken_embed_batch(levels, free_cpu[None, :], link_free[None, :],
                                    np.array([n]), np.array([s], dtype=np.float64),
                                    np.array([b], dtype=np.float64), host_link)
    return counts[0] if ok[0] else None


class Kraken(VCAllocator):
    """Minimum-footprint embedding of each VC for the current state (no admission control)."""

    name = "kraken"
    description = "minimum-footprint VC embedding (centre of gravity, exact, linear in hosts)"

    def embed(self, free_cpu, link_free, n, s, b):
        return kraken_embed(self.levels, free_cpu, link_free, n, s, b, self.host_link)

    def embed_batch(self, free_cpu, link_free, n, s, b):
        return kraken_embed_batch(self.levels, free_cpu, link_free, n, s, b, self.host_link)

    def embed_sparse(self, free_cpu, link_free, n, s, b, plain=False, integral=False):
        """:meth:`embed_batch` as (ok, rows, hosts, VMs) triples (AHAB's lookahead);
        ``plain``: the sizes passed :func:`plain_sizes`; ``integral``: the states are
        integral (:func:`~dcsim.allocators.vc.lookahead.integral_lookahead`)."""
        return kraken_embed_sparse(self.levels, free_cpu, link_free, n, s, b, self.host_link,
                                   plain, integral)

    def lookahead_hints(self, free_cpu, link_free, s, b):
        """``plain`` (:func:`plain_sizes`) and ``integral`` for :meth:`embed_sparse`."""
        return {"plain": plain_sizes(self.levels, s, b),
                "integral": integral_lookahead(free_cpu, link_free, s, b)}

    def lookahead_kernel(self, hints):
        """:func:`dcsim.allocators.vc.kraken.kernel.rollouts`, for plain sizes."""
        if not hints.get("plain"):
            return None
        t = tree_tables(self.levels)
        # the numpy code leaves out the 1e-9 only on its per_vm_strict path for integral
        # states (which needs the host links as one slice); the floors are the same anyway
        eps = not (self.host_link == "per_vm_strict" and t.host_links_slice
                   and hints.get("integral", False))
        return rollout("vc.kraken.kernel", HOST_LINK_RULES.index(self.host_link), eps, t.height,
                       t.sizes, t.parent, t.uplink, t.group)


@hookimpl
def register_allocators(register):
    register(Kraken)
