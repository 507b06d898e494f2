"""TETRIS for virtual clusters: spread VMs by residual compute/bandwidth ratio (AHAB paper).

Algorithm 1 of Zerwas et al. 2018 (the AHAB paper). Reject if the free CU of the whole
cluster is below N·S. Then try host groups in order, each attempt starting from the
unchanged state:

1. every single host, most free CU first (ties: lowest index) — all N VMs on one host, no
   bandwidth needed (Table I: "Hosts(C) ... sorted by avail. CUs");
2. every rack, by fraction of free compute (free CU / capacity, descending; ties: lowest
   index); then every pod, same order; then the root (all hosts);
3. inside a group, place the VMs one at a time, each on the feasible host with the largest
   ρ (ties: lowest host index); if some VM fits nowhere in the group, give up the group;
4. with all VMs placed, check the hose reservations min(m, N − m)·B on every link (rack and
   pod uplinks included); if one does not fit, give up the group and go on.

The paper reserves "S, B" per placed VM. Here, within an attempt, a host holding m VMs of
this VC has C_h = free CU − m·S and reserves min(m, N − m)·B on its uplink (the hose model,
which is what the final reservation is). A VM is *feasible* on h if, after adding it,
C' = C_h − S ≥ 0 and B' = uplink free − min(m + 1, N − m − 1)·B ≥ 0. ρ is the ratio of
these residuals "after allocating one VM" (paper Table I): while m + 1 ≤ N/2 that is
exactly the paper's (C_h − S)/(B_h − B); past N/2 a further VM frees hose bandwidth and
B' is the true residual.

ρ edge cases (comparisons use a 1e-9 tolerance):

* B' > 0: ρ = C'/B' (C' = 0 gives ρ = 0).
* C' = 0 and B' = 0 (a perfect fit, nothing stranded): ρ = +inf, the most preferred.
* C' > 0, B' = 0 and B > 0 (this VM would exhaust the uplink and strand the host's compute):
  ρ = −inf, the least preferred, though still feasible. Reading x/0 as +inf instead packs
  VMs until the uplink is full — exactly the KRAKEN behaviour of the paper's Fig. 2 that
  TETRIS is meant to avoid (with +inf, R¹ = (9, 1, 2) lands 3/3/3 on three hosts, each
  left with 3 CU and no bandwidth).
* B = 0 (the VC needs no bandwidth): B' is the host's uplink free bandwidth unchanged; ρ =
  C'/B' if that is > 0, else +inf (using compute that no bandwidth-needing VC could use).
* Infeasible hosts (C' < 0 or B' < 0) are excluded, never scored.

Options (``VCTetris.Options``):

* ``zero_bandwidth`` — a VM that would leave its host link with B' = 0 (B > 0), where the
  paper's ρ has a zero denominator: ``least_preferred`` (default: C' > 0 is −inf as
  described above, the perfect fit C' = 0 is +inf), ``most_preferred`` (x/0 read as +inf:
  such a host is taken first), ``infeasible`` (ρ undefined, so the VM may not go there, the
  perfect fit included: a host link is never exhausted by a VC spread over several hosts),
  or ``infeasible_if_stranded`` (only C' > 0 is excluded; the perfect fit stays +inf).
  B = 0 keeps its rule under every value; the single-host stage scores nothing, so the
  option does not apply there.
* ``host_link`` (every embedder's, :mod:`dcsim.model.vc`) — what a host with m VMs reserves
  on its uplink. Under ``per_vm``/``per_vm_strict`` B' = uplink free − (m + 1)·B, exactly
  the paper's (C_h − S)/(B_h − B) with "Reserve S, B on host(vm)" (Algorithm 1 line 9); the
  single-host stage needs N·B on the uplink under ``per_vm_strict`` and nothing otherwise.

The per-VM loop runs for all groups of a level at once (one row per group), so a level costs
N vectorised steps however many groups it has; the first group in the sorted order that
succeeds wins, as in the sequential algorithm.

:func:`tetris_embed_batch` (AHAB's lookahead) embeds one VC in each of K states at once,
with the same results row by row, and without the per-VM loop: the greedy's picks are the
first N VMs in the order of the keys ironed to their running minimum along each host (see
:func:`~.batch._greedy_batch`). A host's keys do not depend on the group it is tried in, so they are
computed and ranked once, for the hosts that can take a VM at all; a level is then one sort
of those VMs by (state, group, rank) and a count for every (state, group) pair at once (see
:func:`~.all_pairs.embed_rows`).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from dcsim.allocators.vc.embedder import VCAllocator
from dcsim.allocators.vc.kernel_tables import rollout, tree_tables
from dcsim.allocators.vc.lookahead import integral_lookahead
from dcsim.allocators.vc.tetris.batch import tetris_embed_batch
from dcsim.allocators.vc.tetris.reference import (  # noqa: F401  (re-exported)
    ZERO_BANDWIDTH,
    tetris_embed,
    tetris_rho,
    zero_bandwidth_blocked,
)
from dcsim.hookspecs import hookimpl
from dcsim.model.vc import HOST_LINK_RULES


class VCTetris(VCAllocator):
    """TETRIS VC embedding: groups host → rack → pod → root, VMs placed by max ρ."""

    name = "vc_tetris"
    description = ("TETRIS VC embedding of the AHAB paper (Zerwas et al. 2018): spread VMs by "
                   "residual CU/BU ratio")

    class Options(VCAllocator.Options):
        zero_bandwidth: Literal[ZERO_BANDWIDTH] = Field(  # type: ignore[valid-type]
            "least_preferred", description="ρ when a VM would leave its host link with no "
            "bandwidth and compute behind it: least_preferred (−inf), most_preferred (+inf), "
            "infeasible (no VM may exhaust a host link, perfect fits included) or "
            "infeasible_if_stranded (only with compute left)")

    def setup(self, view):
        super().setup(view)
        self.capacity = view.topology.server_capacity[:, self.cpu].copy()

    def embed(self, free_cpu, link_free, n, s, b):
        """:func:`tetris_embed`, computed by the batch code on one row (the same counts,
        about 1.5 times cheaper)."""
        return self.embed_by_batch(free_cpu, link_free, n, s, b)

    def embed_batch(self, free_cpu, link_free, n, s, b, integral=False):
        return tetris_embed_batch(self.levels, free_cpu, link_free, n, s, b, self.capacity,
                                  self.host_link, self.options.zero_bandwidth, integral)

    def embed_sparse(self, free_cpu, link_free, n, s, b, integral=False):
        """:meth:`embed_batch` as (ok, rows, hosts, VMs) entries (AHAB's lookahead)."""
        return tetris_embed_batch(self.levels, free_cpu, link_free, n, s, b, self.capacity,
                                  self.host_link, self.options.zero_bandwidth, integral,
                                  sparse=True)

    def lookahead_hints(self, free_cpu, link_free, s, b):
        """``integral`` for :meth:`embed_batch` when every state stays integral: whole
        free CU and BU now, and sizes that are powers of two from 1 to 2**10."""
        return {"integral": integral_lookahead(free_cpu, link_free, s, b)}

    def lookahead_kernel(self, hints):
        """:func:`dcsim.allocators.vc.tetris.kernel.rollouts`, for integral states."""
        if not hints.get("integral"):
            return None
        t = tree_tables(self.levels)
        cap_g = self.__dict__.get("_cap_g")
        if cap_g is None:  # each group's capacity, summed as the numpy code sums it
            cap_g = np.zeros((t.height + 1, int(t.sizes.max())))
            for k in range(t.height + 1):
                cap_g[k, :t.sizes[k]] = np.bincount(self.levels.group[k],
                                                    weights=self.capacity,
                                                    minlength=int(t.sizes[k]))
            self._cap_g = cap_g
        return rollout("vc.tetris.kernel", HOST_LINK_RULES.index(self.host_link),
                       ZERO_BANDWIDTH.index(self.options.zero_bandwidth), t.height, t.sizes,
                       t.parent, t.uplink, t.group, t.host_start, cap_g)


@hookimpl
def register_allocators(register):
    register(VCTetris)
