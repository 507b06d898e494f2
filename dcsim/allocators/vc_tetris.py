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
:func:`_greedy_batch`). A host's keys do not depend on the group it is tried in, so they are
computed and ranked once, for the hosts that can take a VM at all; a level is then one sort
of those VMs by (state, group, rank) and a count for every (state, group) pair at once (see
:func:`_embed_rows`).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from dcsim.allocators.jit import rollout, tree_tables
from dcsim.allocators.vc_base import VCAllocator
from dcsim.allocators.vc_batch import (
    Embedded,
    integral_lookahead,
    slots_rows,
    strict_host_caps,
)
from dcsim.allocators.vc_tetris_first import _embed_first
from dcsim.allocators.vc_tetris_score import (  # noqa: F401  (the last two: re-exported)
    _EPS,
    ZERO_BANDWIDTH,
    _greedy,
    tetris_rho,
    zero_bandwidth_blocked,
)
from dcsim.hookspecs import hookimpl
from dcsim.model.vc import HOST_LINK_RULES, TreeLevels, vm_slots


def _single_hosts(slots: np.ndarray, up0: np.ndarray, n, b, host_link: str) -> np.ndarray:
    """Hosts that can take all N VMs (N slots; N·B on the uplink under ``per_vm_strict``,
    nothing otherwise). Elementwise: rows of 2-d arrays too."""
    fits = slots >= n
    if host_link == "per_vm_strict":
        fits &= n * b <= up0 + _EPS
    return fits


def tetris_embed(levels: TreeLevels, free_cpu: np.ndarray, link_free: np.ndarray, n: int,
                 s: float, b: float, capacity: np.ndarray | None = None,
                 host_link: str = "hose",
                 zero_bandwidth: str = "least_preferred") -> np.ndarray | None:
    """VM counts per host of TETRIS's embedding of VC (n, s, b), or None.

    ``capacity`` is each host's total CU (for the racks' and pods' free fractions); default
    the topology's cpu capacity. ``host_link``, ``zero_bandwidth``: the options of
    :class:`VCTetris` (module docstring).
    """
    if free_cpu.sum() + _EPS < n * s:
        return None
    counts = np.zeros(levels.n_hosts, dtype=np.int64)
    slots = vm_slots(free_cpu, s)
    one = np.flatnonzero(_single_hosts(slots, link_free[levels.uplink[0]], n, b, host_link))
    if one.size:  # single hosts, most free CU first
        counts[one[np.argmax(free_cpu[one])]] = n
        return counts
    if capacity is None:
        topo = levels.topology
        capacity = topo.server_capacity[:, topo.resource_index("cpu")]
    up_free = link_free[levels.uplink[0]]
    for k in range(1, levels.height + 1):
        g = levels.group[k]
        size = levels.size[k]
        free_g = np.bincount(g, weights=free_cpu, minlength=size)
        cap_g = np.bincount(g, weights=capacity, minlength=size)
        frac = np.divide(free_g, cap_g, out=np.zeros(size), where=cap_g > 0)
        order = np.lexsort((np.arange(size), -frac))
        room = np.bincount(g, weights=np.minimum(slots, n), minlength=size)
        order = order[room[order] >= n]  # cannot hold N VMs: the greedy would fail anyway
        if order.size == 0:
            continue
        hosts = levels.hosts_of[k][order]
        m, alive = _greedy(hosts, free_cpu, up_free, n, s, b, host_link, zero_bandwidth)
        for i in np.flatnonzero(alive):
            counts[:] = 0
            sel = hosts[i] >= 0
            counts[hosts[i][sel]] = m[i][sel]
            if (levels.hose_loads(counts, n, b, host_link) <= link_free + _EPS).all():
                return counts
    return None


def tetris_embed_batch(levels: TreeLevels, free_cpu: np.ndarray, link_free: np.ndarray,
                       n: np.ndarray, s: np.ndarray, b: np.ndarray,
                       capacity: np.ndarray | None = None, host_link: str = "hose",
                       zero_bandwidth: str = "least_preferred", integral: bool = False,
                       sparse: bool = False):
    """:func:`tetris_embed` for K VCs, one per row of K independent states, vectorised.

    ``free_cpu`` (K, hosts), ``link_free`` (K, links), ``n``/``s``/``b`` (K,). Returns VM
    counts (K, hosts) and a feasibility mask (K,): row by row exactly what
    :func:`tetris_embed` returns. A row with a link already below -1e-9 free (every hose
    check fails on it) goes through :func:`tetris_embed`; the rows that no single host
    can hold through :func:`_embed_first`.

    Single hosts: a host's VM slots grow with its free CU, so some host holds all N VMs iff
    one with the most free CU does (the first such, as the one-row code picks; free CU is
    finite).

    ``integral``: the caller guarantees whole free CU and BU (below 2**31) and sizes that
    are powers of two from 1 to 2**10 (:meth:`VCTetris.lookahead_hints`); then every VM
    count is an exact floor of a quotient, computed once for the single hosts and the runs.
    ``sparse``: return ``(ok, rows, hosts, VMs)`` entries instead (:class:`Embedded`).
    """
    K, n_hosts = free_cpu.shape
    n = np.asarray(n, dtype=np.int64)
    s = np.asarray(s, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if capacity is None:
        topo = levels.topology
        capacity = topo.server_capacity[:, topo.resource_index("cpu")]
    out = Embedded(K, n_hosts, sparse)
    ok = np.zeros(K, dtype=bool)
    if K == 0:
        return out.result(ok)
    enough = ~(free_cpu.sum(axis=1) + _EPS < n * s)
    pre = None  # (slots, runs) of every row, when they can be shared with _embed_first
    if integral and host_link == "per_vm_strict" and zero_bandwidth in (
            "least_preferred", "most_preferred"):
        # every count is an exact floor (_fit_count's exact case): the runs are
        # min(⌊free / s⌋, ⌊uplink / b⌋) in 0..n (⌊min(x, y)⌋ = min(⌊x⌋, ⌊y⌋)), and a
        # host holds the whole VC (N slots, N·B on its uplink) iff its run is N
        runs = strict_host_caps(free_cpu, link_free[:, levels.uplink_cols[0]], s, b)
        slots = None  # no host overdrawn: _embed_first needs no slots
        if runs.min(initial=0.0) < 0:
            slots = np.floor(free_cpu * (1.0 / s)[:, None])
            np.fmax(runs, 0.0, out=runs)
        nn = n[:, None]
        np.fmin(runs, nn, out=runs)
        fit = runs >= nn
        pre = slots, runs  # float runs (whole numbers)
    elif host_link == "per_vm_strict":  # the hosts with N slots and N·B on the uplink
        fit = _single_hosts(slots_rows(free_cpu, s), link_free[:, levels.uplink[0]],
                            n[:, None], b[:, None], host_link)
    if host_link == "per_vm_strict":
        one = enough & fit.any(axis=1)
        on = np.flatnonzero(one)
        best = np.argmax(np.where(fit[on], free_cpu[on], -np.inf), axis=1)
    else:
        best = np.argmax(free_cpu, axis=1)
        top = free_cpu[np.arange(K), best]
        one = enough & (slots_rows(top[:, None], s)[:, 0] >= n)  # single hosts
        on = np.flatnonzero(one)
        best = best[on]
    out.entries(on, best, n[on])
    ok |= one
    todo = enough & ~one
    if pre is not None:  # runs totalling less than N: no candidate group at any level
        todo &= pre[1].sum(axis=1) >= n
    odd = todo & ~(link_free.min(axis=1) + _EPS >= 0)  # NaN too, as the one-row check
    for i in np.flatnonzero(odd):
        c = tetris_embed(levels, free_cpu[i], link_free[i], int(n[i]), float(s[i]),
                         float(b[i]), capacity, host_link, zero_bandwidth)
        if c is not None:
            out.rows(np.array([i]), c[None, :])
            ok[i] = True
    live = np.flatnonzero(todo & ~odd)
    if live.size:
        _embed_first(levels, live, free_cpu, link_free, n, s, b, capacity, out, ok,
                     host_link, zero_bandwidth, integral,
                     None if pre is None else
                     (None if pre[0] is None else pre[0][live], pre[1][live]))
    return out.result(ok)


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
        """:func:`dcsim.allocators.tetris_jit.rollouts`, for integral states."""
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
        return rollout("tetris_jit", HOST_LINK_RULES.index(self.host_link),
                       ZERO_BANDWIDTH.index(self.options.zero_bandwidth), t.height, t.sizes,
                       t.parent, t.uplink, t.group, t.host_start, cap_g)


@hookimpl
def register_allocators(register):
    register(VCTetris)
