"""OKTOPUS: the first subtree that can hold the whole virtual cluster (Ballani et al. 2011).

Oktopus's VC allocation as the AHAB paper (Zerwas et al. 2018) uses it:

* A host with k = ⌊free/S⌋ slots can take m VMs if m ≤ k and the hose reservation
  min(m, N − m)·B fits its uplink's residual bandwidth. A switch can take m VMs if its
  children can split m among themselves, each child feasibly, and min(m, N − m)·B fits the
  switch's own uplink (the root has none).
* Levels are searched host → rack → pod → root; the VC goes to the *first* subtree (lowest
  level, then lowest index) that can hold all N VMs. Inside it, children are filled greedily
  in index order, each taking as many VMs as it can, recursively down to the hosts. Dense
  and cheap; not footprint-optimal (that is KRAKEN).

Faithful feasibility. Oktopus's paper summarises a node by one number, the largest count
M_v, as if every count 0..M_v were feasible. Under the hose model that is false: a host
with 6 slots whose uplink carries one VM's worth (c = 1) can take {0, 1, 5, 6} VMs of a
6-VM VC (min(m, 6 − m) ≤ 1) but not 2..4, and sums of such sets have gaps too. A
"take M_v" allocation built on the interval assumption can then be invalid. Here every node
carries the exact boolean vector of feasible counts 0..N (a Minkowski sum of its children's
vectors, masked by its uplink), computed for all nodes of a level at once by FFT
convolution. The greedy descent gives each child the largest feasible count that leaves
the remainder feasible for the children after it, so the embedding is always valid, and
OKTOPUS finds one whenever any exists (the root's vector is exact).

Options (besides every embedder's ``host_link``, :mod:`dcsim.model.vc`):

* ``host_counts: exact`` (default) — a host's feasible counts are the exact set above
  (under ``host_link: per_vm``/``per_vm_strict`` that set is {0..min(slots, ⌊residual/B⌋)}
  anyway, since every VM reserves B on the host link).
* ``host_counts: interval`` — a host takes any of 0..min(slots, ⌊residual/B⌋) VMs and no
  more: the Oktopus paper's M_v read as one number (each VM as if it needed B on the host
  link), while the reservation stays the hose amount. Hosts then take fewer VMs of a large
  VC than they could (the count past N/2 that would free hose bandwidth is never used), and
  OKTOPUS spreads wider than KRAKEN; it may now fail where an embedding exists.

:func:`oktopus_embed_batch` (AHAB's lookahead) embeds one VC in each of K states at once,
with the same results row by row. Nearly every count set met is an interval {0..a}, whose
sums and greedy splits are arithmetic: a level costs a few array operations for all rows
at once, and only the few groups with other sets use exact uint64 bit sets (N ≤ 63; exact
Minkowski sums by shifts, :mod:`dcsim.allocators.vc.lookahead`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from dcsim.allocators.vc.embedder import VCAllocator
from dcsim.allocators.vc.kernel_tables import rollout, tree_tables
from dcsim.allocators.vc.lookahead import integral_lookahead
from dcsim.allocators.vc.oktopus.batch import oktopus_embed_batch
from dcsim.allocators.vc.oktopus.bitsets import MAX_BITS_N
from dcsim.allocators.vc.oktopus.reference import oktopus_embed  # noqa: F401  (re-exported)
from dcsim.hookspecs import hookimpl
from dcsim.model.vc import HOST_LINK_RULES


class Oktopus(VCAllocator):
    """Oktopus's greedy VC allocation: the first (lowest, leftmost) subtree that fits."""

    name = "oktopus"
    description = "first subtree that holds the VC, filled greedily (Oktopus, Ballani 2011)"

    class Options(VCAllocator.Options):
        host_counts: Literal["exact", "interval"] = Field(
            "exact", description="a host's feasible VM counts: the exact hose set, or "
            "interval 0..min(slots, floor(residual/B)) (Oktopus's M_v as one number)")

    def embed(self, free_cpu, link_free, n, s, b):
        """:func:`oktopus_embed`, computed by the batch code on one row (the same counts,
        about five times cheaper: no FFT)."""
        return self.embed_by_batch(free_cpu, link_free, n, s, b)

    def embed_batch(self, free_cpu, link_free, n, s, b, integral=False):
        return oktopus_embed_batch(self.levels, free_cpu, link_free, n, s, b, self.host_link,
                                   self.options.host_counts, integral=integral)

    def embed_sparse(self, free_cpu, link_free, n, s, b, integral=False):
        """:meth:`embed_batch` as (ok, rows, hosts, VMs) triples (AHAB's lookahead)."""
        return oktopus_embed_batch(self.levels, free_cpu, link_free, n, s, b, self.host_link,
                                   self.options.host_counts, sparse=True, integral=integral)

    def lookahead_hints(self, free_cpu, link_free, s, b):
        """``integral`` (:func:`~dcsim.allocators.vc.lookahead.integral_lookahead`)."""
        return {"integral": integral_lookahead(free_cpu, link_free, s, b)}

    def lookahead_kernel(self, hints):
        """:func:`dcsim.allocators.vc.oktopus.kernel.rollouts`, for integral states and N ≤ 63
        (past that, one uint64 bit set cannot hold the counts: the numpy code runs)."""
        if not hints.get("integral"):
            return None
        t = tree_tables(self.levels)
        return rollout("vc.oktopus.kernel", HOST_LINK_RULES.index(self.host_link),
                       self.options.host_counts == "interval", t.height, t.sizes, t.parent,
                       t.uplink, t.group, t.child_start,
                       accept=lambda ns: not ns.size or ns.max() <= MAX_BITS_N)


@hookimpl
def register_allocators(register):
    register(Oktopus)
