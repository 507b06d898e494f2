"""OKTOPUS for many requests at once (:func:`oktopus_embed_batch`, AHAB's lookahead): the
feasible counts of :mod:`.sets` summed level by level, rows it cannot take going to
:func:`~dcsim.allocators.vc.oktopus.reference.oktopus_embed`."""

from __future__ import annotations

import numpy as np

from dcsim.allocators.vc.lookahead import (
    Embedded,
    hose_limit,
    powers_of_two,
    rows_cols,
    strict_host_caps,
    vm_counts,
)
from dcsim.allocators.vc.oktopus.bitsets import MAX_BITS_N
from dcsim.allocators.vc.oktopus.reference import oktopus_embed, per_vm_hosts, single_host
from dcsim.allocators.vc.oktopus.sets import (
    ODD,
    Sets,
    sets_topology,
    split_level,
    sum_level,
)
from dcsim.model.vc import TreeLevels

_ONE = np.uint64(1)


def oktopus_embed_batch(levels: TreeLevels, free_cpu: np.ndarray, link_free: np.ndarray,
                        n: np.ndarray, s: np.ndarray, b: np.ndarray, host_link: str = "hose",
                        host_counts: str = "exact", sparse: bool = False,
                        integral: bool = False):
    """:func:`oktopus_embed` for K VCs, one per row of K independent states, vectorised.

    ``free_cpu`` (K, hosts), ``link_free`` (K, links), ``n``/``s``/``b`` (K,). Returns VM
    counts (K, hosts) and a feasibility mask (K,): row by row exactly what
    :func:`oktopus_embed` returns. Rows with N > 63 go through :func:`oktopus_embed`.

    Intervals. A node's feasible counts are {x ≤ cap : x ≤ c or x ≥ N − c}, where c is
    the most VMs whose hose fits its uplink and cap the top of the interval {0..cap} its
    subtree holds (its slots for a host). Such a set is itself an interval {0..a} in
    almost every case met (see :class:`Sets`), and the Minkowski sum of intervals
    {0..a_j} is {0..Σ a_j}: so a level is summed with one matrix-vector product over the
    children's a_j (:func:`sum_level`). Only a group with a child whose set is not a
    non-empty interval gets the exact sum of uint64 bit sets (N ≤ 63; exact Minkowski sums
    by shifts, :mod:`dcsim.allocators.vc.lookahead`). The greedy split has a closed form
    likewise (:func:`split_level`). Every level is computed for all the rows that need
    any (a row's levels above its first hit are computed, but never used).

    ``sparse``: return ``(ok, rows, hosts, VMs)`` triples of the hosts that get VMs instead
    (AHAB's lookahead, :meth:`Oktopus.embed_sparse`). ``integral``: the caller guarantees
    whole free CU and BU and sizes that are powers of two from 1
    (:func:`~dcsim.allocators.vc.lookahead.integral_lookahead`), so the slots are exact floors
    and the single-host test needs no tolerance.
    """
    H = levels.height
    K, n_hosts = free_cpu.shape
    n = np.asarray(n, dtype=np.int64)
    s = np.asarray(s, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    out = Embedded(K, n_hosts, sparse)
    ok = np.zeros(K, dtype=bool)
    big = n > MAX_BITS_N
    any_big = big.any()
    for i in np.flatnonzero(big) if any_big else ():  # N past one bit set: the one-row code
        c = oktopus_embed(levels, free_cpu[i], link_free[i], int(n[i]), float(s[i]),
                          float(b[i]), host_link, host_counts)
        if c is not None:
            out.rows(np.array([i]), c[None, :])
            ok[i] = True
    topo = sets_topology(levels)
    caps = None
    if integral and host_link == "per_vm_strict":
        caps = _strict_caps(free_cpu, link_free[:, topo.uplink[0]], n, s, b)
    if caps is not None:  # a host holds {0..cap}: all N VMs iff cap = N
        slots = caps
        fits = caps >= n[:, None]
    elif integral:  # ⌊free / s + 1e-9⌋ = ⌊free / s⌋, and N·B ≤ up + 1e-9 iff N·B ≤ up
        slots = np.floor(free_cpu * (1.0 / s)[:, None])
        np.minimum(slots, n[:, None], out=slots)
        fits = slots >= n[:, None]
        if host_link == "per_vm_strict":
            fits &= (n * b)[:, None] <= link_free[:, topo.uplink[0]]
    else:
        slots = vm_counts(free_cpu, s, n[:, None])  # float, ≤ n
        fits = single_host(slots, link_free[:, levels.uplink[0]], n[:, None], b[:, None],
                            host_link)
    one = fits.any(axis=1)  # a single host: no bandwidth at all (per_vm_strict: N·B)
    if any_big:
        one &= ~big
    if one.any():
        first = np.argmax(fits, axis=1)
        on = np.flatnonzero(one)
        out.entries(on, first[on], n[on])
        ok |= one
    need = slots @ topo.ones_hosts >= n  # what all hosts hold (exact float sums)
    need &= ~one
    if any_big:
        need &= ~big
    rows = np.flatnonzero(need)
    if rows.size == 0:
        return out.result(ok)
    nr, br = n[rows], b[rows]
    nf = nr[:, None].astype(np.float64)
    exact_div = powers_of_two(br)
    cap = slots[rows]
    known = None  # the hosts' sizes, when they are plain
    if caps is not None:
        c = None  # no hose limit below N
        known = cap
    else:
        c = hose_limit(rows_cols(link_free, rows, topo.uplink[0]), nr, br, exact_div,
                           integral)
    if caps is None and per_vm_hosts(host_link, host_counts):  # {0..min(slots, c)}
        cap = np.minimum(cap, c)
        c = None  # no hose limit below N
        # with c = N the set is {0..cap}, an interval, wherever cap ≥ 0 (Sets.sizes)
        known = cap if cap.min(initial=0.0) >= 0 else np.where(cap >= 0, cap, ODD)
    sets = [Sets(c, cap, nr, nf, sizes=known)]  # per level: the feasible sets of its nodes
    sizes, odd = [None], [None]  # per level k ≥ 1: children's a (grouped); exact groups
    hit_level = np.zeros(rows.size, dtype=np.int64)  # 0: none yet
    hit_group = np.zeros(rows.size, dtype=np.int64)
    for k in range(1, H + 1):
        live = hit_level == 0
        total, a3, odd_k, exact = sum_level(sets[k - 1], topo, k, live)
        sizes.append(a3)
        odd.append(odd_k)
        hit = total >= nf  # {0..total} holds N
        if exact is not None:
            rr, gg, bits = exact
            hit[rr, gg] = (bits >> nr[rr].astype(np.uint64)) & _ONE
        new = hit.any(axis=1)
        new &= live
        if new.any():
            hit_level[new] = k
            hit_group[new] = np.argmax(hit[new], axis=1)
        if k == H or hit_level.all():
            break
        np.minimum(total, 63.0, out=total)
        c = hose_limit(rows_cols(link_free, rows, topo.uplink[k]), nr, br, exact_div,
                       integral)
        sets.append(Sets(c, total, nr, nf, exact))
    top = int(hit_level.max())
    if top == 0:
        return out.result(ok)
    # (row, node, VMs) entries, from each row's hit group down to its hosts
    er = eg = np.zeros(0, dtype=np.int64)
    ea = np.zeros(0)
    for j in range(top, 0, -1):
        at = np.flatnonzero(hit_level == j)
        if at.size:
            er = np.concatenate([er, at])
            eg = np.concatenate([eg, hit_group[at]])
            ea = np.concatenate([ea, nr[at].astype(np.float64)])
        er, eg, ea = split_level(er, eg, ea, sets[j - 1], sizes[j], odd[j], topo, j)
    out.entries(rows[er], eg, ea.astype(np.int64))
    ok[rows[hit_level > 0]] = True
    return out.result(ok)


def _strict_caps(free_cpu: np.ndarray, up: np.ndarray, n: np.ndarray, s: np.ndarray,
                 b: np.ndarray) -> np.ndarray | None:
    """Under ``per_vm_strict`` on integral states (whole free CU and BU, sizes powers of two
    from 1): what each host holds, {0..cap} with cap = min(⌊free / s⌋, ⌊up / b⌋, N), as
    (K, hosts) floats; None if some cap is negative (an overdrawn host or link: the
    general path).

    :func:`~dcsim.allocators.vc.lookahead.strict_host_caps` is exact, and its ⌊up / b⌋ is
    :func:`hose_limit`'s ⌊(up + 1e-9) / b⌋. So cap is the general path's min(slots, c),
    a host holds all N VMs iff cap = N (N slots and N·B ≤ up), and a row whose caps total
    less than N embeds nowhere.
    """
    caps = strict_host_caps(free_cpu, up, s, b)
    if caps.min(initial=0.0) < 0:
        return None
    return np.minimum(caps, n[:, None], out=caps)


