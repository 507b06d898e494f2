"""VC-TETRIS for many requests at once (:func:`dcsim.allocators.vc.tetris.tetris_embed_batch`):
every row's VMs ranked once per host, a level one sort by (state, group, rank) and a count
for every (state, group) pair (see the :mod:`dcsim.allocators.vc.tetris` docstring)."""

from __future__ import annotations

import numpy as np

from dcsim.allocators.vc.lookahead import Embedded, groupsum, slots_rows
from dcsim.allocators.vc.tetris.reference import (
    EPS,
    zero_bandwidth_blocked,
)
from dcsim.model.vc import UNLIMITED, TreeLevels, host_link_vms


def embed_rows(levels: TreeLevels, live: np.ndarray, free_cpu: np.ndarray,
                link_free: np.ndarray, n: np.ndarray, s: np.ndarray, b: np.ndarray,
                capacity: np.ndarray, out: Embedded, ok: np.ndarray,
                host_link: str = "hose", zero_bandwidth: str = "least_preferred",
                start: int = 1) -> None:
    """The group levels of :func:`tetris_embed_batch` for rows ``live`` (no single host fits,
    no link overdrawn): puts their embeddings in ``out`` and sets their ``ok``.

    Per level, the greedy runs for every (row, group) pair that can hold its row's VC (the
    hosts' ``min(slots, n)`` total ≥ n, the one-row code's filter, and their feasible runs
    total ≥ n, else the greedy dies); each row then takes its first group in TETRIS's order
    (most free compute first) whose placement passes the hose check.

    Every candidate pair's greedy is computed, from level ``start`` on: the fallback of
    :func:`dcsim.allocators.vc.tetris.batch.embed_first`, which tries each row's first
    candidate only.

    Sparse: only the *active* hosts, with a feasible run of one VM or more
    (:func:`_feasible_runs`), take part, a few dozen per row on a loaded cluster; they are
    listed row by row, in host order, as flat indices into (K, hosts) (cheaper to find and
    gather with than (row, host) pairs). A host without a run has 0 ≤ min(slots, n) if its
    free CU is ≥ 0; if every active host also has min(slots, n) ≥ its run, a pair's runs
    total ≥ n implies the filter, which is computed (on all hosts) only for the rows where
    that does not hold. A host's keys do not depend on the group it is tried in, so they
    are computed, ironed and ranked once for all levels (:func:`ironed_keys`,
    :func:`_rank`); a pair's greedy then takes its first n VMs in rank order
    (:func:`_pick_counts`). Sums over the active hosts of a group are bincounts of their
    pair numbers ``row * groups + group``, which never decrease along the list (a group's
    hosts are contiguous).
    """
    K, H = free_cpu.shape
    mask = np.zeros(K, dtype=bool)
    mask[live] = True
    # where a first VM's CU fits: elsewhere the run is 0 (in _fit_count y = 1 fails, so
    # the count stays 0)
    fits = free_cpu - s[:, None] >= -EPS
    fits &= mask[:, None]
    flat = np.flatnonzero(fits)
    ar = flat // H
    ah = flat - ar * H
    up0 = levels.uplink[0]
    fa = np.take(free_cpu, flat)
    ua = np.take(link_free, ar * link_free.shape[1] + up0[ah])
    na, sa, ba = n[ar], s[ar], b[ar]
    ln = host_runs(fa, ua, na, sa, ba, host_link, zero_bandwidth)
    alive = mask & (np.bincount(ar, weights=ln, minlength=K) >= n)  # else the greedy dies
    # where min(slots, n) >= run may fail (slots as slots_rows: floor(free / s + 1e-9))
    with np.errstate(over="ignore"):
        q = np.divide(fa, sa, out=np.zeros(fa.size), where=sa > 0) + 1e-9
    sure = np.where(sa > 0, (q >= ln) & (q < 2.0**62), ln <= UNLIMITED)
    unsure = ~(free_cpu.min(axis=1) >= 0)
    if not sure.all():
        unsure |= np.bincount(ar, weights=~sure, minlength=K) > 0
    room_rows = np.flatnonzero(unsure & alive)
    if room_rows.size:  # the one-row code's filter, on all hosts of those rows
        room = np.minimum(slots_rows(free_cpu[room_rows], s[room_rows]), n[room_rows, None])
        host_starts = levels.host_starts
    on = np.flatnonzero((ln > 0) & alive[ar])
    if on.size == 0:
        return
    flat, ar, ah, ln, ua, na, ba = flat[on], ar[on], ah[on], ln[on], ua[on], na[on], ba[on]
    keys, owner = ironed_keys(fa[on], ua, ln, na, sa[on], ba, host_link, zero_bandwidth)
    rank = _rank(keys)
    up_eps = ua + EPS
    lnf = ln.astype(np.float64)
    nn, bb = n[:, None], b[:, None]
    group = [g[ah] for g in levels.group]  # each active host's group, per level
    pair = [ar * size + gk for gk, size in zip(group, levels.size, strict=True)]
    link = [None] * levels.height  # each row's level-j uplinks' free BU + eps, when needed
    for k in range(start, levels.height + 1):
        size = levels.size[k]
        cand = np.bincount(pair[k], weights=lnf, minlength=K * size).reshape(K, size) >= nn
        cand &= alive[:, None]
        if room_rows.size:
            cand[room_rows] &= np.add.reduceat(room, host_starts[k], axis=1) >= nn[room_rows]
        act = cand.ravel()[pair[k]]
        if not act.any():
            continue
        mi = _pick_counts(rank, owner, pair[k], na, act)
        m = mi.astype(np.float64)
        # hose check of the links inside the groups (a link above carries nothing); a link
        # without VMs below passes (none is overdrawn). bad: failing links per pair.
        fail = ~(host_link_vms(m, na, host_link) * ba <= up_eps)
        bad = np.bincount(pair[1], weights=fail, minlength=K * levels.size[1])
        bad = bad.reshape(K, levels.size[1])
        for j in range(1, k):
            mj = np.bincount(pair[j], weights=m, minlength=K * levels.size[j])
            mj = mj.reshape(K, levels.size[j])
            if link[j] is None:
                link[j] = link_free[:, levels.uplink[j]] + EPS
            bad += ~(np.minimum(mj, nn - mj) * bb <= link[j])
            bad = np.add.reduceat(bad, levels.starts[j], axis=1)
        passed = cand & (bad == 0)
        win = np.flatnonzero(passed.any(axis=1))
        if win.size == 0:
            continue
        gw = np.zeros(win.size, dtype=np.int64)
        if size > 1:  # the first passed group by free fraction (ties: lowest index)
            frac = free_fraction(levels, k, free_cpu[win], capacity)
            gw = np.argmax(np.where(passed[win], frac, -np.inf), axis=1)
        won = np.full(K, -1, dtype=np.int64)
        won[win] = gw
        put = np.flatnonzero((won[ar] == group[k]) & (mi > 0))
        out.flat(flat[put], mi[put])
        ok[win] = True
        alive[win] = False
        if not alive.any():
            break


def free_fraction(levels: TreeLevels, k: int, free_cpu: np.ndarray | None,
                   capacity: np.ndarray, free_g: np.ndarray | None = None) -> np.ndarray:
    """(R, groups): each level-k group's free CU over its capacity (0 where none), per row;
    ``free_g``: the groups' free CU, when the caller has it."""
    size = levels.size[k]
    g = levels.group[k]
    if free_g is None:
        free_g = groupsum(free_cpu, g, size)
    cap_g = np.bincount(g, weights=capacity, minlength=size)
    return np.divide(free_g, cap_g[None, :], out=np.zeros_like(free_g),
                     where=cap_g[None, :] > 0)


def ironed_keys(fr: np.ndarray, up: np.ndarray, ln: np.ndarray, n: np.ndarray,
                 s: np.ndarray, b: np.ndarray, host_link: str = "hose",
                 zero_bandwidth: str = "least_preferred") -> tuple[np.ndarray, np.ndarray]:
    """The ironed keys of the VMs of A hosts, flat: host by host, the host's 1st, 2nd, ...,
    ``ln``-th VM; and each VM's host (0..A-1). ``fr``/``up`` (A,) free CU and uplink BU,
    ``ln`` (A,) the host's feasible run (:func:`_feasible_runs`, ≥ 1), n/s/b (A,) its VC.

    The (i+1)-th VM's key is its ρ as :func:`~.reference.greedy` computes it (the same floats; a
    feasible −inf is −1e300), ironed to the running minimum over the host's VMs 1..i+1
    (see :func:`dcsim.allocators.vc.tetris.batch._greedy_batch`). The table is (max run,
    A), VM-major so that every numpy call runs over the A hosts (a short inner axis is
    slow); its entries past a host's run are computed but not read.
    """
    A = ln.size
    T = int(ln.max())
    y = np.arange(1, T + 1)[:, None]
    c_after = fr - y * s
    b_after = up - host_link_vms(y, n, host_link) * b
    zero_b = b_after <= EPS
    # tetris_rho at b' = 0, floored (infeasible*: blocked VMs are past the runs, never read)
    if zero_bandwidth == "most_preferred":  # +inf, stranded or not
        key = np.full(c_after.shape, np.inf)
    else:
        stranded = np.where(b > 0, -1e300, np.inf)
        key = np.where(c_after > EPS, stranded, np.inf)  # where b' = 0; divide elsewhere
    np.divide(c_after, b_after, out=key, where=~zero_b)
    for i in range(1, T):  # ironed: the running minimum
        np.minimum(key[i], key[i - 1], out=key[i])
    owner = np.repeat(np.arange(A), ln)
    start = np.cumsum(ln) - ln  # each host's first VM in the flat list
    i = np.arange(owner.size) - np.repeat(start, ln)
    return np.take(key, i * A + owner), owner


def _rank(keys: np.ndarray) -> np.ndarray:
    """Each key's position in the greedy's order: key descending, ties in the given order
    (host, then VM)."""
    rank = np.empty(keys.size, dtype=np.int64)
    rank[np.argsort(-keys, kind="stable")] = np.arange(keys.size)
    return rank


def _pick_counts(rank: np.ndarray, owner: np.ndarray, seg: np.ndarray, n: np.ndarray,
                 act: np.ndarray | None) -> np.ndarray:
    """How many VMs each of A hosts gets when each segment (a (row, group) pair) takes
    its first n VMs in ``rank`` order. ``rank`` (E,) and ``owner`` (E,) per VM, its rank
    (:func:`_rank`) and host; ``seg`` (A,), non-decreasing, and ``n`` (A,) per host, its
    segment and that segment's n; ``act`` (A,) which hosts take part (None: all).

    One sort by (segment, rank) puts every segment's VMs in order, in the positions the
    segment holds in the flat list (segments are contiguous there): position j is picked
    iff j − (the segment's first position) < n. The sort keys are almost in order already
    (by segment), which the stable sort (timsort) is quick on.
    """
    big = rank.size  # ranks are below it
    if act is not None:
        on = act[owner]
        owner, rank = owner[on], rank[on]
    sv = seg[owner]
    return _first_n(np.argsort(sv * big + rank, kind="stable"), sv, owner, seg, n)


def pick_by_keys(keys: np.ndarray, owner: np.ndarray, seg: np.ndarray,
                  n: np.ndarray) -> np.ndarray:
    """``_pick_counts(_rank(keys), owner, seg, n, None)`` with one sort: numpy's lexsort by
    (segment, −key) is stable, so equal keys keep the list order, as the rank does."""
    sv = seg[owner]
    return _first_n(np.lexsort((-keys, sv)), sv, owner, seg, n)


def _first_n(order: np.ndarray, sv: np.ndarray, owner: np.ndarray, seg: np.ndarray,
             n: np.ndarray) -> np.ndarray:
    """Each host's VMs among its segment's first n in ``order`` (VMs sorted by segment,
    then in the greedy's order): position j is picked iff j − (the segment's first
    position) < n."""
    size = np.bincount(sv)
    first = np.cumsum(size) - size  # each segment's first position
    take = np.arange(sv.size) - first[sv] < n[owner]
    return np.bincount(owner[order[take]], minlength=seg.size)


def _feasible_runs(free_cpu: np.ndarray, up_free: np.ndarray, n: np.ndarray, s: np.ndarray,
                   b: np.ndarray, host_link: str = "hose",
                   zero_bandwidth: str = "least_preferred") -> np.ndarray:
    """(K, hosts): how many VMs each host takes before the first that does not fit (CU
    ``free - m·S >= -eps`` and uplink ``up - host_link_vms(m, n)·B >= -eps`` for m = 1, 2,
    ..., and not blocked by ``zero_bandwidth``), at most n. The greedy never
    puts more on a host. (:func:`host_runs`, per row.)"""
    return host_runs(free_cpu, up_free, n[:, None], s[:, None], b[:, None], host_link,
                 zero_bandwidth)


def host_runs(free: np.ndarray, up: np.ndarray, n: np.ndarray, s: np.ndarray,
          b: np.ndarray, host_link: str = "hose",
          zero_bandwidth: str = "least_preferred", exact: bool = False,
          slots: np.ndarray | None = None) -> np.ndarray:
    """:func:`_feasible_runs` elementwise (arguments broadcast together): int32.
    ``exact``: :func:`_fit_count`'s; then ``slots``, if given, is ⌊free / s⌋."""
    nn = n.astype(np.float64)
    exact = exact and bool((nn < 2**16).all())
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if exact and slots is not None:
            run = np.fmin(np.fmax(slots, 0.0), nn)
        else:
            run = _fit_count(free, s, nn, exact)
        bw = _fit_count(up, b, nn, exact)  # the hose of y VMs fits for 0 < y <= bw
    if host_link == "hose":
        # VM m needs y = min(m, n - m): up to n/2 that is m; past it y shrinks again, and
        # VM n needs y = 0 (up >= -eps)
        all_fit = bw >= n // 2
    elif host_link == "per_vm":  # VM m < n needs m, VM n (the whole VC) needs 0
        all_fit = bw >= n - 1
    else:  # per_vm_strict: VM m needs m
        all_fit = None
    if all_fit is not None:
        np.copyto(bw, np.where(up >= -EPS, nn, 0.0), where=all_fit)
    np.minimum(run, bw, out=run)
    if zero_bandwidth in ("infeasible", "infeasible_if_stranded"):
        run = _cut_zero_bandwidth(free, up, n, s, b, run, host_link, zero_bandwidth)
    return run.astype(np.int32)


def _cut_zero_bandwidth(free, up, n, s, b, run, host_link: str,
                        zero_bandwidth: str) -> np.ndarray:
    """Runs ended before the first VM that ``zero_bandwidth`` blocks (the same floats as
    :func:`~.reference.greedy`'s check), one vectorised step per VM position."""
    out = np.array(run, dtype=np.float64)
    top = int(out.max()) if out.size else 0
    for y in range(1, top + 1):
        c_after = free - y * s
        b_after = up - host_link_vms(y, n, host_link) * b
        blocked = zero_bandwidth_blocked(c_after, b_after, b, zero_bandwidth)
        blocked &= out >= y
        if blocked.any():
            out = np.where(blocked, y - 1.0, out)
    return out


def _fit_count(base: np.ndarray, step: np.ndarray, cap: np.ndarray,
               exact: bool = False) -> np.ndarray:
    """How many y = 1, 2, ... (at most ``cap``) pass ``base - y * step >= -1e-9``, the
    comparison the one-row code makes; it fails from some y on (step >= 0). As floats, of
    ``base``'s shape (``step`` and ``cap`` broadcast to it); in place where it can (large
    temporaries are slow to allocate). Divides by 0: the caller ignores those warnings.
    ``exact``: the bases are whole (:func:`~dcsim.allocators.vc.lookahead.whole_numbers`), the
    steps :func:`~dcsim.allocators.vc.lookahead.plain_steps` and the caps
    below 2**16, so the count is ⌊base / step⌋ clipped to 0..cap, with no correction."""
    if exact:
        q = np.multiply(base, 1.0 / step)
        np.floor(q, out=q)
        np.fmax(q, 0.0, out=q)
        return np.fmin(q, cap, out=q)
    q = base + EPS
    np.divide(q, step, out=q)
    np.floor(q, out=q)
    if not (step > 0).all():  # step 0: every y or none, as y = 1 says
        q = np.where(step > 0, q, np.where(base >= -EPS, cap, 0.0))
    np.fmax(q, 0.0, out=q)  # NaN -> 0
    np.fmin(q, cap, out=q)
    # the division may be off by an ulp either way: one exact step corrects it
    t = np.multiply(q, step)
    np.subtract(base, t, out=t)
    q -= (q > 0) & ~(t >= -EPS)
    np.add(q, 1.0, out=t)
    np.multiply(t, step, out=t)
    np.subtract(base, t, out=t)
    q += (q < cap) & (t >= -EPS)
    return q
