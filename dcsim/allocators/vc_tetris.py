"""TETRIS for virtual clusters: spread VMs by residual compute/bandwidth ratio (AHAB paper).

Algorithm 1 of Zerwas et al. 2018 (REFERENCE §1). Reject if the free CU of the whole
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

The per-VM loop runs for all groups of a level at once (one row per group), so a level costs
N vectorised steps however many groups it has; the first group in the sorted order that
succeeds wins, as in the sequential algorithm.
"""

from __future__ import annotations

import numpy as np

from dcsim.allocators.oktopus import tree_members
from dcsim.allocators.vc_base import VCAllocator
from dcsim.hookspecs import hookimpl
from dcsim.model.vc import TreeLevels, vm_slots

_EPS = 1e-9


def tetris_rho(c_after: np.ndarray, b_after: np.ndarray, b: float) -> np.ndarray:
    """ρ of placing one more VM, from the residual CU and uplink BU after placing it.

    Only meaningful where both residuals are ≥ 0 (feasible); see the module docstring for
    the zero-denominator rules.
    """
    c_after = np.asarray(c_after, dtype=np.float64)
    b_after = np.asarray(b_after, dtype=np.float64)
    zero_b = b_after <= _EPS
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = c_after / np.where(zero_b, 1.0, b_after)
    if b > 0:
        at_zero = np.where(c_after <= _EPS, np.inf, -np.inf)
    else:
        at_zero = np.full(rho.shape, np.inf)
    return np.where(zero_b, at_zero, rho)


def _greedy(hosts: np.ndarray, free_cpu: np.ndarray, up_free: np.ndarray, n: int, s: float,
            b: float) -> tuple[np.ndarray, np.ndarray]:
    """Place n VMs one by one in each row's hosts (padded -1) by max ρ, ties to the lowest
    position. Returns the (rows, W) VM counts and which rows placed all n VMs.

    A host's ρ for its next VM depends only on how many it holds already, so the whole
    table key[row, host, m] is computed once; each step is then a row-wise argmax. A
    feasible ρ of -inf is stored as -1e300, so it still beats an infeasible host (-inf).
    """
    valid = (hosts >= 0)[:, :, None]
    h = np.maximum(hosts, 0)
    m1 = np.arange(1, n + 2)  # VMs on the host after adding one, for m = 0..n
    c_after = free_cpu[h][:, :, None] - m1 * s
    b_after = up_free[h][:, :, None] - np.minimum(m1, n - m1) * b
    feas = valid & (c_after >= -_EPS) & (b_after >= -_EPS)
    table = np.where(feas, np.maximum(tetris_rho(c_after, b_after, b), -1e300), -np.inf)
    key = table[:, :, 0].copy()
    m = np.zeros(hosts.shape, dtype=np.int64)
    alive = np.ones(hosts.shape[0], dtype=bool)
    rows = np.arange(hosts.shape[0])
    for _ in range(n):
        best = np.argmax(key, axis=1)
        ok = key[rows, best] > -np.inf  # dead rows keep all keys at -inf
        alive &= ok
        mb = m[rows, best] + ok
        m[rows, best] = mb
        key[rows, best] = table[rows, best, mb]
    return m, alive


def tetris_embed(levels: TreeLevels, free_cpu: np.ndarray, link_free: np.ndarray, n: int,
                 s: float, b: float, capacity: np.ndarray | None = None) -> np.ndarray | None:
    """VM counts per host of TETRIS's embedding of VC (n, s, b), or None.

    ``capacity`` is each host's total CU (for the racks' and pods' free fractions); default
    the topology's cpu capacity.
    """
    if free_cpu.sum() + _EPS < n * s:
        return None
    counts = np.zeros(levels.n_hosts, dtype=np.int64)
    slots = vm_slots(free_cpu, s)
    one = np.flatnonzero(slots >= n)
    if one.size:  # single hosts, most free CU first
        counts[one[np.argmax(free_cpu[one])]] = n
        return counts
    if capacity is None:
        topo = levels.topology
        capacity = topo.server_capacity[:, topo.resource_index("cpu")]
    tm = tree_members(levels)
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
        hosts = tm["hosts"][k][order]
        m, alive = _greedy(hosts, free_cpu, up_free, n, s, b)
        for i in np.flatnonzero(alive):
            counts[:] = 0
            sel = hosts[i] >= 0
            counts[hosts[i][sel]] = m[i][sel]
            if (levels.hose_loads(counts, n, b) <= link_free + _EPS).all():
                return counts
    return None


class VCTetris(VCAllocator):
    """TETRIS VC embedding: groups host → rack → pod → root, VMs placed by max ρ."""

    name = "vc_tetris"
    description = ("TETRIS VC embedding of the AHAB paper (Zerwas et al. 2018): spread VMs by "
                   "residual CU/BU ratio")

    def setup(self, view):
        super().setup(view)
        self.capacity = view.topology.server_capacity[:, self.cpu].copy()

    def embed(self, free_cpu, link_free, n, s, b):
        return tetris_embed(self.levels, free_cpu, link_free, n, s, b, self.capacity)


@hookimpl
def register_allocators(register):
    register(VCTetris)
