"""VC-TETRIS for many requests at once, the common case: each row tried in its *first*
candidate group only (:func:`embed_first`), with the all-pairs version of
:mod:`dcsim.allocators.vc.tetris.all_pairs` as the fallback; and the exact-floor checks that
AHAB's integral lookahead states allow (:func:`dcsim.allocators.vc.lookahead.whole_numbers`)."""

from __future__ import annotations

import numpy as np

from dcsim.allocators.vc.lookahead import (
    Embedded,
    plain_steps,
    rows_cols,
    slots_rows,
    strict_host_caps,
    whole_numbers,
)
from dcsim.allocators.vc.tetris.all_pairs import (
    embed_rows,
    free_fraction,
    host_runs,
    ironed_keys,
    pick_by_keys,
)
from dcsim.allocators.vc.tetris.reference import EPS, single_hosts, tetris_embed
from dcsim.model.vc import TreeLevels, host_link_vms


def embed_first(levels: TreeLevels, live: np.ndarray, free_cpu: np.ndarray,
                 link_free: np.ndarray, n: np.ndarray, s: np.ndarray, b: np.ndarray,
                 capacity: np.ndarray, out: Embedded, ok: np.ndarray,
                 host_link: str = "hose", zero_bandwidth: str = "least_preferred",
                 integral: bool = False, pre: tuple | None = None) -> None:
    """:func:`embed_rows` (same arguments, same results) trying each row's *first*
    candidate group only, and the all-pairs version only for a row whose first group fails
    the hose check while it has other candidates at that level.

    TETRIS takes the first candidate (most free compute) whose greedy placement passes the
    hose check, and that is almost always the first: on AHAB's lookahead with
    ``per_vm_strict`` (whose runs already respect the host links) it always was. So every
    row goes straight to its lowest level with a candidate (dense per-row sums of runs
    and room, the one-row code's filter, per group), and one greedy
    (:func:`_greedy_batch`) places every row in its first group there; a row whose only
    candidate at that level fails goes on to the next level in another round.

    ``integral``: :func:`tetris_embed_batch`'s; ``pre``: the live rows' slots and runs
    (whole floats, exact floors) when it computed them, slots None where every run and
    slot is ≥ 0.
    """
    H = levels.height
    fr = free_cpu[live]
    nl, sl, bl = n[live], s[live], b[live]
    nn = nl[:, None]
    uh = rows_cols(link_free, live, levels.uplink_cols[0])
    exact = integral or (plain_steps(sl) and plain_steps(bl) and whole_numbers(fr)
                         and whole_numbers(uh))
    if pre is not None:
        slots, runs = pre
    else:
        slots = np.floor(fr * (1.0 / sl)[:, None]) if exact else None
        runs = host_runs(fr, uh, nn, sl[:, None], bl[:, None], host_link, zero_bandwidth, exact,
                     slots)
    # the one-row code's filter: the hosts' min(slots, n) total ≥ n. The shared runs are
    # min(⌊up / b⌋, slots, n) ≥ 0, so with slots ≥ 0 (``pre`` has no slots when no host
    # is overdrawn) they never exceed min(slots, n), and their total ≥ n (the greedy's
    # own condition) implies it.
    room = None
    if pre is None or (slots is not None and slots.min(initial=0.0) < 0):
        if exact:  # slots_rows: ⌊free / s + 1e-9⌋ is ⌊free / s⌋ here (whole floats)
            room = np.minimum(slots, nn)
        else:
            room = np.minimum(slots_rows(fr, sl), nn)
    cand = [None]  # per level: the groups that can hold the row's VC
    free_g = None
    L = live.size
    if integral:  # whole numbers: sums in any order are exact; one child sum per level
        parts = [runs, fr] if room is None else [runs, fr, room]
        g = np.concatenate(parts).astype(np.float64, copy=False)
        free_g = [fr]
        for k in range(1, H + 1):
            g = levels.child_sum(g, k - 1)
            c = g[:L] >= nn
            if room is not None:
                c &= g[2 * L:] >= nn
            cand.append(c)
            free_g.append(g[L:2 * L])
    else:
        run_g, room_g = runs, room
        for k in range(1, H + 1):
            run_g = levels.child_sum(run_g, k - 1)
            room_g = levels.child_sum(room_g, k - 1)
            c = run_g >= nn
            c &= room_g >= nn
            cand.append(c)
    has = np.empty((H, L), dtype=bool)  # (H, L): whether a level has a candidate
    for k in range(1, H + 1):
        np.any(cand[k], axis=1, out=has[k - 1])
    active = runs > 0
    while True:
        level = has.argmax(axis=0) + 1  # each row's lowest level with a candidate
        rows = np.flatnonzero(has.any(axis=0))
        if rows.size == 0:
            return
        level = level[rows]
        # each row's first group there by free fraction (ties: lowest index)
        g = np.zeros(rows.size, dtype=np.int64)
        for k in range(1, H + 1):
            at = np.flatnonzero(level == k) if levels.size[k] > 1 else ()
            if len(at):
                r = rows[at]
                frac = (free_fraction(levels, k, fr[r], capacity) if free_g is None else
                        free_fraction(levels, k, None, capacity, free_g[k][r]))
                g[at] = np.argmax(np.where(cand[k][r], frac, -np.inf), axis=1)
        # the hosts of that group with a run, (pair, host) entries pair by pair in host
        # order; a host without a run gets no VM, reserves nothing, and fails no check
        # (no row here has a link overdrawn)
        act = levels.group_table[level] == g[:, None]
        act &= active[rows]
        pp = np.flatnonzero(act)  # cheaper than a 2-d nonzero
        hh = pp % act.shape[1]
        pp //= act.shape[1]
        rr = rows[pp]
        np_, bp = nl[rows], bl[rows]
        m = _greedy_flat(pp, hh, rr, fr, uh, runs, np_, sl[rows], bp, host_link,
                         zero_bandwidth)
        # hose check of the links inside each row's group (a link without VMs below
        # passes: no row here has one overdrawn)
        mf = m.astype(np.float64)
        P = rows.size
        if exact and host_link == "per_vm_strict":  # m ≤ run ≤ ⌊up / b⌋: m·b ≤ up holds
            bad = np.zeros(P, dtype=bool)
        else:
            fail = ~(host_link_vms(mf, np_[pp], host_link) * bp[pp] <= uh[rr, hh] + EPS)
            bad = np.bincount(pp, weights=fail, minlength=P) > 0
        for j in range(1, int(level.max())):
            size = levels.size[j]
            mj = np.bincount(pp * size + levels.group[j][hh], weights=mf, minlength=P * size)
            mj = mj.reshape(P, size)
            link = rows_cols(link_free, live[rows], levels.uplink_cols[j])
            link += EPS
            over = (~(np.minimum(mj, np_[:, None] - mj) * bp[:, None] <= link)).any(axis=1)
            bad |= over & (level > j)  # level-j links are inside groups above level j
        won = ~bad
        if won.any():
            put = won[pp] & (m > 0)
            out.entries(live[rr[put]], hh[put], m[put])
            ok[live[rows[won]]] = True
            has[:, rows[won]] = False
        if not bad.any():
            return
        lost = np.flatnonzero(bad)  # their first group failed the hose check
        fr_rows, fl = rows[lost], level[lost]
        more = np.zeros(lost.size, dtype=bool)
        for k in range(1, H + 1):
            more = np.where(fl == k, cand[k][fr_rows].sum(axis=1) > 1, more)
        for k in np.unique(fl[more]):  # other candidates: the all-pairs version from there
            r = fr_rows[more & (fl == k)]
            embed_rows(levels, live[r], free_cpu, link_free, n, s, b, capacity, out,
                        ok, host_link, zero_bandwidth, start=int(k))
        has[:, fr_rows[more]] = False
        one = ~more  # the only candidate at that level failed: on to the next level
        has[fl[one] - 1, fr_rows[one]] = False


def _greedy_batch(hosts: np.ndarray, rows: np.ndarray, free_cpu: np.ndarray,
                  link_free: np.ndarray, uplink: np.ndarray, runs: np.ndarray,
                  n: np.ndarray, s: np.ndarray, b: np.ndarray, host_link: str = "hose",
                  zero_bandwidth: str = "least_preferred") -> np.ndarray:
    """:func:`~dcsim.allocators.vc.tetris.reference.greedy` for P (state row, group) pairs,
    each with its own VC, without a loop over the VMs: ``hosts`` (P, W) padded, ``rows``
    (P,) the pair's row of ``free_cpu`` and ``runs`` (K, hosts)
    (:func:`~dcsim.allocators.vc.tetris.all_pairs._feasible_runs`) and of ``link_free`` (K, links),
    ``uplink`` each host's uplink, n/s/b (P,) the pair's VC, where the hosts' ``runs``
    total at least n (else the greedy dies). Returns m (P, W), the VMs per host of the
    greedy, which places all n (through :func:`_greedy_flat`, which the batches use).

    The greedy (max key among the hosts' next VMs, ties to the lowest position) takes the
    VMs in the order of the keys *ironed* to their running minimum along each host,
    I[h, i] = min(key[h, 0..i]), sorted by (−I, position, i): a host whose key rises after
    it took a VM is the only such host and is picked again at once, which the running
    minimum encodes (``tests/allocators/vc/test_batch.py`` checks it against the loop). So m counts
    each host's VMs among the first n in that order. An infeasible VM (key −inf) irons
    every later one of its host to −inf: only each host's run of feasible VMs from the
    first (``runs``) takes part; the greedy places all n VMs iff the runs total ≥ n.
    """
    h = np.maximum(hosts, 0)
    length = np.where(hosts >= 0, runs[rows[:, None], h], 0)
    pp, pw = np.nonzero(length)  # pair by pair, in position order
    m = np.zeros(hosts.shape, dtype=np.int64)
    m[pp, pw] = _greedy_flat(pp, hosts[pp, pw], rows[pp], free_cpu, link_free[:, uplink],
                             runs, n, s, b, host_link, zero_bandwidth)
    return m


def _greedy_flat(pp: np.ndarray, hh: np.ndarray, rr: np.ndarray, free_cpu: np.ndarray,
                 up_free: np.ndarray, runs: np.ndarray, n: np.ndarray, s: np.ndarray,
                 b: np.ndarray, host_link: str, zero_bandwidth: str) -> np.ndarray:
    """:func:`_greedy_batch` on a flat list of (pair, host) entries, pair by pair: ``pp``
    the pair (non-decreasing), ``hh`` the host, ``rr`` the pair's row of ``free_cpu``,
    ``up_free`` (each row's host uplinks' free BU) and ``runs`` (every entry's > 0); n/s/b
    per pair. Returns each entry's VMs."""
    ln = runs[rr, hh].astype(np.int64)  # whole floats when the caller shared its runs
    keys, owner = ironed_keys(free_cpu[rr, hh], up_free[rr, hh], ln, n[pp], s[pp], b[pp],
                               host_link, zero_bandwidth)
    return pick_by_keys(keys, owner, pp, n[pp])


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
    can hold through :func:`embed_first`.

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
    enough = ~(free_cpu.sum(axis=1) + EPS < n * s)
    pre = None  # (slots, runs) of every row, when they can be shared with embed_first
    if integral and host_link == "per_vm_strict" and zero_bandwidth in (
            "least_preferred", "most_preferred"):
        # every count is an exact floor (_fit_count's exact case): the runs are
        # min(⌊free / s⌋, ⌊uplink / b⌋) in 0..n (⌊min(x, y)⌋ = min(⌊x⌋, ⌊y⌋)), and a
        # host holds the whole VC (N slots, N·B on its uplink) iff its run is N
        runs = strict_host_caps(free_cpu, link_free[:, levels.uplink_cols[0]], s, b)
        slots = None  # no host overdrawn: embed_first needs no slots
        if runs.min(initial=0.0) < 0:
            slots = np.floor(free_cpu * (1.0 / s)[:, None])
            np.fmax(runs, 0.0, out=runs)
        nn = n[:, None]
        np.fmin(runs, nn, out=runs)
        fit = runs >= nn
        pre = slots, runs  # float runs (whole numbers)
    elif host_link == "per_vm_strict":  # the hosts with N slots and N·B on the uplink
        fit = single_hosts(slots_rows(free_cpu, s), link_free[:, levels.uplink[0]],
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
    odd = todo & ~(link_free.min(axis=1) + EPS >= 0)  # NaN too, as the one-row check
    for i in np.flatnonzero(odd):
        c = tetris_embed(levels, free_cpu[i], link_free[i], int(n[i]), float(s[i]),
                         float(b[i]), capacity, host_link, zero_bandwidth)
        if c is not None:
            out.rows(np.array([i]), c[None, :])
            ok[i] = True
    live = np.flatnonzero(todo & ~odd)
    if live.size:
        embed_first(levels, live, free_cpu, link_free, n, s, b, capacity, out, ok,
                     host_link, zero_bandwidth, integral,
                     None if pre is None else
                     (None if pre[0] is None else pre[0][live], pre[1][live]))
    return out.result(ok)
