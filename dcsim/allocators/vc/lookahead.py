"""Helpers for embedding one VC in each of K independent states at once (AHAB's lookahead).

Rows are independent states; every helper works on (K, ...) arrays with per-row N, S, B.

Large temporaries are slow to allocate (fresh pages each time), so the helpers on
(K, hosts) arrays work in place where they can.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dcsim.model.vc import UNLIMITED, TreeLevels, host_link_vms

_EPS = 1e-9


def groupsum(x: np.ndarray, parent: np.ndarray, size: int) -> np.ndarray:
    """Row-wise float sums of x's columns into ``size`` groups (x: (K, m), parent: (m,)).

    The same sums, in the same order, as ``np.bincount(parent, weights=row)`` on each row.
    """
    k = x.shape[0]
    idx = (parent[None, :] + size * np.arange(k)[:, None]).ravel()
    w = x.ravel().astype(np.float64, copy=False)
    return np.bincount(idx, weights=w, minlength=k * size).reshape(k, size)


def slots_rows(free_cpu: np.ndarray, s: np.ndarray) -> np.ndarray:
    """:func:`dcsim.model.vc.vm_slots` per row: (K, hosts) VMs of size s[row] per host."""
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.floor(free_cpu / s[:, None] + 1e-9)
    q = np.where(s[:, None] > 0, q, UNLIMITED)
    return q.astype(np.int64)


def vm_counts(free: np.ndarray, size: np.ndarray, cap: np.ndarray | int) -> np.ndarray:
    """⌊free / size + 1e-9⌋ per row (UNLIMITED where size[row] ≤ 0), at most ``cap`` (float64).

    ``free`` (K, m), ``size`` (K,): the row-wise :func:`dcsim.model.vc.vm_slots` (sizes are
    compute units per VM) or ``link_slots`` (bandwidth per VM), capped, in place where it can.
    """
    pos = size > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.divide(free, size[:, None])
    q += 1e-9
    np.floor(q, out=q)
    if not pos.all():
        q[~pos] = UNLIMITED
    return np.minimum(q, cap, out=q)


def powers_of_two(b: np.ndarray) -> bool:
    """Whether every b is a positive power of two (then u / b and y * b are exact)."""
    return bool((np.frexp(b)[0] == 0.5).all())


def strict_host_caps(free_cpu: np.ndarray, up: np.ndarray, s: np.ndarray,
                     b: np.ndarray) -> np.ndarray:
    """(K, hosts) floats min(⌊free / s⌋, ⌊up / b⌋): the VMs each host takes under
    ``per_vm_strict`` (s per VM of compute, b per VM of its uplink ``up``), for integral
    states (:func:`integral_lookahead`). The quotients by powers of two are exact,
    ⌊min(x, y)⌋ = min(⌊x⌋, ⌊y⌋), and no ε is needed: x / s is a whole number plus at most
    1 − 1/s. Negative where a host or its uplink is overdrawn."""
    caps = free_cpu * (1.0 / s)[:, None]
    np.minimum(caps, up * (1.0 / b)[:, None], out=caps)
    np.floor(caps, out=caps)
    return caps


def rows_cols(x: np.ndarray, rows: np.ndarray, cols) -> np.ndarray:
    """x[rows][:, cols] without copying the other columns (``cols``: a slice or indices)."""
    return x[rows, cols] if isinstance(cols, slice) else x[rows[:, None], cols]


def hose_limit(up: np.ndarray, n: np.ndarray, b: np.ndarray,
               exact_div: bool | None = None, integral: bool = False) -> np.ndarray:
    """(K, m) floats: the largest y in 0..n whose hose y·b fits ``up`` (+1e-9), −1 if none.

    ``up`` (K, m) residual bandwidth of m links per row; n, b (K,). The product y·b grows
    with y, so the y that fit are 0..c. c is found by division, then corrected by the exact
    comparison ``y * b <= up + 1e-9`` the one-row code makes: the division may be off by an
    ulp either way. When every b is a positive power of two (AHAB's workloads;
    ``exact_div``, :func:`powers_of_two` unless given), division and product are exact,
    the quotient's floor is already c and the correction is skipped. ``integral`` (the
    lookahead hint, :func:`integral_lookahead`: whole ``up``, b powers of two from 1):
    up / b is a whole number plus at most 1 − 1/b, so ⌊(up + 1e-9) / b⌋ is ⌊up · (1/b)⌋,
    and a whole up < 0 gives a quotient ≤ −1/b, clamped to −1.
    """
    nn = n[:, None].astype(np.float64)
    if integral:
        c = np.multiply(up, (1.0 / b)[:, None])
        np.floor(c, out=c)
        np.fmin(c, nn, out=c)
        np.fmax(c, -1.0, out=c)
        return c
    bb = b[:, None]
    u = up + _EPS
    if powers_of_two(b) if exact_div is None else exact_div:
        c = np.divide(u, bb)
        np.floor(c, out=c)
        np.fmin(c, nn, out=c)
        np.copyto(c, -1.0, where=~(u >= 0.0))  # u < 0 or NaN: not even y = 0 fits
        return c
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        c = np.divide(u, bb)
    np.floor(c, out=c)
    if not (bb > 0).all():
        c = np.where(bb > 0, c, nn)  # b = 0: every y fits (if y = 0 does)
    np.fmax(c, -1.0, out=c)  # NaN -> -1
    np.fmin(c, nn, out=c)
    np.copyto(c, -1.0, where=~(0.0 <= u))  # not even y = 0 (a hose of 0) fits
    # the division may be off by an ulp either way: one exact step corrects it
    t = np.multiply(c, bb)
    c -= (c >= 0) & ~(t <= u)
    np.multiply(np.add(c, 1.0, out=t), bb, out=t)
    c += (c < nn) & (t <= u)
    return c


def plain_steps(step: np.ndarray) -> bool:
    """Whether every step is a power of two in [2**-10, 2**10] (see :func:`whole_numbers`)."""
    return bool(step.size == 0 or (
        step.min() >= 2.0**-10 and step.max() <= 2.0**10 and powers_of_two(step)))


def whole_numbers(x: np.ndarray) -> bool:
    """Whether every value is a whole number of at most 2**31 in magnitude. With such bases
    and :func:`plain_steps` steps (and counts below 2**16), ``base - y * step`` is exact
    in floating point, a multiple of 2**-10: it is ≥ -1e-9 iff it is ≥ 0, iff y ≤
    ⌊base / step⌋. So every VM count (``vm_counts``, ``_fit_count``) is an exact floor of
    the quotient, and ``x + 1e-9 >= y`` is ``x >= y`` for whole y."""
    with np.errstate(invalid="ignore"):  # the cast of NaN, inf or |x| > 2**31 warns
        return bool((x.astype(np.int32) == x).all())  # NaN, inf and |x| > 2**31 fail


def integral_lookahead(free_cpu: np.ndarray, link_free: np.ndarray, s: np.ndarray,
                       b: np.ndarray) -> bool:
    """Whether every state a lookahead reaches from (free_cpu, link_free) by embedding VCs
    of sizes among s and b keeps whole free CU and BU (:func:`whole_numbers`): they are
    whole now and every size is a power of two from 1 to 2**10. The ``integral`` hint of
    the embedders' ``lookahead_hints``."""
    steps = np.concatenate([np.ravel(s), np.ravel(b)])
    plain = steps.size == 0 or (steps.min() >= 1 and plain_steps(steps))
    return bool(plain and whole_numbers(free_cpu) and whole_numbers(link_free))


class Embedded:
    """What a batch embedder found for K rows: dense VM counts (K, hosts), or with
    ``sparse`` (row, host, VMs) entries, each (row, host) once, VMs > 0 if N > 0 (AHAB's
    lookahead reserves only those: :func:`reserve_rows`)."""

    def __init__(self, K: int, n_hosts: int, sparse: bool):
        self.sparse = sparse
        self.n_hosts = n_hosts
        self.counts = None if sparse else np.zeros((K, n_hosts), dtype=np.int64)
        self.parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def entries(self, rows: np.ndarray, hosts: np.ndarray, m: np.ndarray) -> None:
        """Row ``rows[i]`` puts ``m[i]`` VMs on host ``hosts[i]``."""
        if self.sparse:
            self.parts.append((rows, hosts, m))
        else:
            self.counts[rows, hosts] = m

    def flat(self, at: np.ndarray, m: np.ndarray) -> None:
        """:meth:`entries` given as flat indices ``row * hosts + host``."""
        if self.sparse:
            r = at // self.n_hosts
            self.parts.append((r, at - r * self.n_hosts, m))
        else:
            self.counts.ravel()[at] = m

    def rows(self, rows: np.ndarray, counts: np.ndarray) -> None:
        """``rows`` get these VM counts per host (whole numbers, maybe as floats)."""
        if self.sparse:
            r, h = np.nonzero(counts)
            self.parts.append((rows[r], h, counts[r, h]))
        else:
            self.counts[rows] = counts

    def result(self, ok: np.ndarray):
        """(counts, ok), or with ``sparse`` (ok, rows, hosts, VMs), all int64."""
        if not self.sparse:
            return self.counts, ok
        if not self.parts:
            empty = np.zeros(0, dtype=np.int64)
            return ok, empty, empty, empty
        r, h, m = (np.concatenate(x) for x in zip(*self.parts, strict=True))
        return ok, r, h, m.astype(np.int64)


def advance(embedder, levels: TreeLevels, cpu: np.ndarray, lf: np.ndarray, ns: np.ndarray,
            ss: np.ndarray, bs: np.ndarray, reward: np.ndarray, hints: dict[str, Any],
            kernels: bool = False) -> None:
    """Advance K lookahead states (rows of ``cpu`` and ``lf``, C-contiguous, in place)
    through VCs (ns[j], ss[j], bs[j]) step by step (``ns``/``ss``/``bs`` (steps, K)),
    each embedded by ``embedder`` in every row at once and reserved where it fits, adding
    its N·S to ``reward`` there. ``hints``: the embedder's ``lookahead_hints``;
    ``kernels``: use the embedder's compiled rollout when it has one (the same floats)."""
    gain = ns * ss
    kernel = embedder.lookahead_kernel(hints) if kernels else None
    if kernel is not None and kernel(  # every step of every row in one compiled call
            cpu, lf, ns.astype(np.int64), ss.astype(np.float64), bs.astype(np.float64),
            gain.astype(np.float64), reward):
        return
    embed = embedder.embed_sparse
    host_link = embedder.host_link
    for j in range(ns.shape[0]):
        nj, sj, bj = ns[j], ss[j], bs[j]
        ok, r, h, m = embed(cpu, lf, nj, sj, bj, **hints)
        if r.size:  # under load about half the futures' VCs do not fit
            reserve_rows(levels, cpu, lf, r, h, m, nj, sj, bj, host_link)
        np.add(reward, gain[j], out=reward, where=ok)


def reserve_rows(levels: TreeLevels, cpu: np.ndarray, lf: np.ndarray, r: np.ndarray,
                 h: np.ndarray, m: np.ndarray, n: np.ndarray, s: np.ndarray, b: np.ndarray,
                 host_link: str = "hose") -> None:
    """Reserve, in K states at once, the VCs (n, s, b per row) that put m[i] VMs on host
    h[i] of row r[i] (each (row, host) once): compute on those hosts, and the hose loads
    (:meth:`TreeLevels.hose_loads`) on the links with VMs below them, in place.

    The same floats as subtracting ``hose_loads_batch`` of the dense counts from every
    link of those rows (a link without VMs below reserves 0, and x - 0.0 is x).
    """
    if not (cpu.flags.c_contiguous and lf.flags.c_contiguous):
        raise ValueError("reserve_rows updates C-contiguous arrays in place")
    K, hosts = cpu.shape
    at = r * hosts  # flat indices: cheaper than (row, host) pairs
    at += h
    cpu.ravel()[at] -= m * s[r]
    at = r * lf.shape[1]
    at += levels.uplink[0][h]
    lf.ravel()[at] -= host_link_vms(m, n[r], host_link) * b[r]
    for k in range(1, levels.height):
        size = levels.size[k]
        mk = np.bincount(r * size + levels.group[k][h], weights=m, minlength=K * size)
        mk = mk.reshape(K, size)
        loads = np.minimum(mk, n[:, None] - mk)
        loads *= b[:, None]
        lf[:, levels.uplink_cols[k]] -= loads
