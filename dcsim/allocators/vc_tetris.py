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

:func:`tetris_embed_batch` (AHAB's lookahead) embeds one VC in each of K states at once,
with the same results row by row, and without the per-VM loop: the greedy's picks are the
first N VMs in the order of the keys ironed to their running minimum along each host (see
:func:`_greedy_batch`), so a level is a table, a sort and a count for every (state, group)
pair at once.
"""

from __future__ import annotations

import numpy as np

from dcsim.allocators.vc_base import VCAllocator
from dcsim.allocators.vc_batch import groupsum, slots_rows
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
        m, alive = _greedy(hosts, free_cpu, up_free, n, s, b)
        for i in np.flatnonzero(alive):
            counts[:] = 0
            sel = hosts[i] >= 0
            counts[hosts[i][sel]] = m[i][sel]
            if (levels.hose_loads(counts, n, b) <= link_free + _EPS).all():
                return counts
    return None


def tetris_embed_batch(levels: TreeLevels, free_cpu: np.ndarray, link_free: np.ndarray,
                       n: np.ndarray, s: np.ndarray, b: np.ndarray,
                       capacity: np.ndarray | None = None):
    """:func:`tetris_embed` for K VCs, one per row of K independent states, vectorised.

    ``free_cpu`` (K, hosts), ``link_free`` (K, links), ``n``/``s``/``b`` (K,). Returns VM
    counts (K, hosts) and a feasibility mask (K,): row by row exactly what
    :func:`tetris_embed` returns. Per level, the greedy runs for every (row, group) pair
    that can hold its row's VC at once; each row then takes its first group in TETRIS's
    order (most free compute first) whose placement passes the hose check. A row with a
    link already below -1e-9 free (every hose check fails on it) goes through
    :func:`tetris_embed`.
    """
    K, n_hosts = free_cpu.shape
    n = np.asarray(n, dtype=np.int64)
    s = np.asarray(s, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if capacity is None:
        topo = levels.topology
        capacity = topo.server_capacity[:, topo.resource_index("cpu")]
    counts = np.zeros((K, n_hosts), dtype=np.int64)
    ok = np.zeros(K, dtype=bool)
    enough = ~(free_cpu.sum(axis=1) + _EPS < n * s)
    slots = slots_rows(free_cpu, s)
    fits = slots >= n[:, None]
    one = enough & fits.any(axis=1)  # single hosts, most free CU first
    best = np.argmax(np.where(fits, free_cpu, -np.inf), axis=1)
    counts[one, best[one]] = n[one]
    ok |= one
    todo = enough & ~one
    odd = todo & ~(link_free + _EPS >= 0).all(axis=1)
    for i in np.flatnonzero(odd):
        c = tetris_embed(levels, free_cpu[i], link_free[i], int(n[i]), float(s[i]),
                         float(b[i]), capacity)
        if c is not None:
            counts[i], ok[i] = c, True
    live = np.flatnonzero(todo & ~odd)
    room_w = np.minimum(slots, n[:, None])
    up0 = levels.uplink[0]
    runs = np.zeros((K, n_hosts), dtype=np.int32)  # small: large arrays are slow to allocate
    runs[live] = _feasible_runs(free_cpu[live], link_free[live[:, None], up0], n[live],
                                s[live], b[live])
    live = live[runs[live].sum(axis=1) >= n[live]]  # else the greedy dies in every group
    for k in range(1, levels.height + 1):
        if live.size == 0:
            break
        g, size = levels.group[k], levels.size[k]
        free_g = groupsum(free_cpu[live], g, size)
        cap_g = np.bincount(g, weights=capacity, minlength=size)
        frac = np.divide(free_g, cap_g[None, :], out=np.zeros_like(free_g),
                         where=cap_g[None, :] > 0)
        # room: the one-row code's filter; runs: else the greedy dies (both exact ints)
        starts = np.searchsorted(g, np.arange(size))  # a group's hosts are a run
        both = np.add.reduceat(np.concatenate([room_w[live], runs[live]]), starts, axis=1)
        nl = n[live, None]
        pr, pg = np.nonzero((both[: live.size] >= nl) & (both[live.size :] >= nl))
        if pr.size == 0:
            continue
        rows = live[pr]
        hosts = levels.hosts_of[k][pg]
        m = _greedy_batch(hosts, rows, free_cpu, link_free, up0, runs, n[rows], s[rows],
                          b[rows])
        sel = hosts >= 0
        passed = np.zeros((live.size, size), dtype=bool)
        passed[pr, pg] = _hose_fits(levels, k, rows, hosts, m, link_free, n[rows], b[rows])
        win = passed.any(axis=1)
        if win.any():
            pick = np.full((live.size, size), -1, dtype=np.int64)
            pick[pr, pg] = np.arange(pr.size)
            gw = np.argmax(np.where(passed, frac, -np.inf), axis=1)
            p = pick[np.flatnonzero(win), gw[win]]
            r = np.broadcast_to(live[win][:, None], sel[p].shape)
            counts[r[sel[p]], hosts[p][sel[p]]] = m[p][sel[p]]
            ok[live[win]] = True
            live = live[~win]
    return counts, ok


def _hose_fits(levels: TreeLevels, k: int, rows: np.ndarray, hosts: np.ndarray,
               m: np.ndarray, link_free: np.ndarray, n: np.ndarray,
               b: np.ndarray) -> np.ndarray:
    """Whether each (row, level-k group) pair's placement, m VMs on the group's hosts, fits
    the hose reservations of the links inside the group, compared as
    :meth:`TreeLevels.hose_loads` ``<= link_free + 1e-9``. Links above the group carry
    nothing (all N VMs are inside): the caller checked them with a zero load."""
    sel = hosts >= 0
    h = np.maximum(hosts, 0)
    nn, bb, r = n[:, None], b[:, None], rows[:, None]
    mf = m.astype(np.float64)
    load = np.minimum(mf, nn - mf) * bb
    fits = ((load <= link_free[r, levels.uplink[0][h]] + _EPS) | ~sel).all(axis=1)
    P = rows.size
    for j in range(1, k):  # VMs under each level-j group, per pair (0 outside the group)
        size = levels.size[j]
        idx = (np.arange(P)[:, None] * size + levels.group[j][h]).ravel()
        mj = np.bincount(idx, weights=(mf * sel).ravel(), minlength=P * size)
        mj = mj.reshape(P, size)
        load = np.minimum(mj, nn - mj) * bb
        fits &= (load <= link_free[r, levels.uplink[j][None, :]] + _EPS).all(axis=1)
    return fits


def _greedy_batch(hosts: np.ndarray, rows: np.ndarray, free_cpu: np.ndarray,
                  link_free: np.ndarray, uplink: np.ndarray, runs: np.ndarray,
                  n: np.ndarray, s: np.ndarray, b: np.ndarray) -> np.ndarray:
    """:func:`_greedy` for P (state row, group) pairs, each with its own VC, without a loop
    over the VMs: ``hosts`` (P, W) padded, ``rows`` (P,) the pair's row of ``free_cpu``
    and ``runs`` (K, hosts) (:func:`_feasible_runs`) and of ``link_free`` (K, links),
    ``uplink`` each host's uplink, n/s/b (P,) the pair's VC, where the hosts' ``runs``
    total at least n (else the greedy dies). Returns m (P, W), the VMs per host of the
    greedy, which places all n.

    The greedy (max key among the hosts' next VMs, ties to the lowest position) takes the
    VMs in the order of the keys *ironed* to their running minimum along each host,
    I[h, i] = min(key[h, 0..i]), sorted by (−I, position, i): a host whose key rises after
    it took a VM is the only such host and is picked again at once, which the running
    minimum encodes (``tests/test_vc_batch.py`` checks it against the loop). So m counts
    each host's VMs among the first n in that order. An infeasible VM (key −inf) irons
    every later one of its host to −inf: only each host's run of feasible VMs from the
    first (``runs``) is tabled; the greedy places all n VMs iff the runs total ≥ n.
    """
    P, W = hosts.shape
    h = np.maximum(hosts, 0)
    r = rows[:, None]
    length = np.where(hosts >= 0, runs[r, h], 0)
    fr, up = free_cpu[r, h], link_free[r, uplink[h]]
    # key[i]: the (i+1)-th VM of every host of every pair, as _greedy computes it (the
    # same floats); (T, P, W), a VM at a time (large temporaries are slow to allocate)
    T = int(length.max())
    key = np.empty((T, P, W))
    nq, sq, bq = n[:, None], s[:, None], b[:, None]
    c_after = np.empty((P, W))
    b_after = np.empty((P, W))
    stranded = np.where(bq > 0, -1e300, np.inf)  # tetris_rho at b' = 0, -inf floored
    for i in range(T):
        np.subtract(fr, (i + 1) * sq, out=c_after)
        np.subtract(up, np.minimum(i + 1, nq - (i + 1)) * bq, out=b_after)
        with np.errstate(divide="ignore", invalid="ignore"):
            np.divide(c_after, b_after, out=key[i])
        zero_b = b_after <= _EPS
        np.copyto(key[i], np.where(c_after > _EPS, stranded, np.inf), where=zero_b)
        np.copyto(key[i], -np.inf, where=length <= i)
        if i:  # ironed: the running minimum
            np.minimum(key[i], key[i - 1], out=key[i])
    flat = np.sort(key.transpose(1, 2, 0).reshape(P, W * T), axis=1)  # ascending
    thr = flat[np.arange(P), W * T - n]  # the n-th largest (n <= Σ length <= W·T)
    above = (key > thr[:, None]).sum(axis=0)
    tied = (key == thr[:, None]).sum(axis=0)
    need = nq - above.sum(axis=1, keepdims=True)
    before = np.cumsum(tied, axis=1) - tied
    return above + np.clip(need - before, 0, tied)


def _feasible_runs(free_cpu: np.ndarray, up_free: np.ndarray, n: np.ndarray, s: np.ndarray,
                   b: np.ndarray) -> np.ndarray:
    """(K, hosts): how many VMs each host takes before the first that does not fit (CU
    ``free - m·S >= -eps`` and uplink ``up - min(m, n - m)·B >= -eps`` for m = 1, 2, ...),
    at most n. The greedy never puts more on a host."""
    nn = n[:, None].astype(np.float64)
    run = _fit_count(free_cpu, s[:, None], nn)
    bw = _fit_count(up_free, b[:, None], nn)  # the hose of y VMs fits for 0 < y <= bw
    # VM m needs y = min(m, n - m): up to n/2 that is m; past it y shrinks again, and VM n
    # needs y = 0 (up >= -eps)
    all_fit = bw >= nn // 2
    bw[all_fit] = np.broadcast_to(nn, bw.shape)[all_fit]
    bw[all_fit & ~(up_free >= -_EPS)] = 0
    np.minimum(run, bw, out=run)
    return run.astype(np.int32)


def _fit_count(base: np.ndarray, step: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """How many y = 1, 2, ... (at most ``cap``) pass ``base - y * step >= -1e-9``, the
    comparison the one-row code makes; it fails from some y on (step >= 0). As floats;
    in place where it can (large temporaries are slow to allocate)."""
    q = base + _EPS
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        np.divide(q, step, out=q)
    np.floor(q, out=q)
    if not (step > 0).all():  # step 0: every y or none, as y = 1 says
        q = np.where(step > 0, q, np.where(base >= -_EPS, cap, 0.0))
    np.fmax(q, 0.0, out=q)  # NaN -> 0
    np.fmin(q, cap, out=q)
    # the division may be off by an ulp either way: one exact step corrects it
    t = np.multiply(q, step)
    np.subtract(base, t, out=t)
    q -= (q > 0) & ~(t >= -_EPS)
    np.add(q, 1.0, out=t)
    np.multiply(t, step, out=t)
    np.subtract(base, t, out=t)
    q += (q < cap) & (t >= -_EPS)
    return q


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

    def embed_batch(self, free_cpu, link_free, n, s, b):
        return tetris_embed_batch(self.levels, free_cpu, link_free, n, s, b, self.capacity)


@hookimpl
def register_allocators(register):
    register(VCTetris)
