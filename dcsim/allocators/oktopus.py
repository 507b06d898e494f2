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
Minkowski sums by shifts, :mod:`dcsim.allocators.vc_batch`).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from dcsim.allocators.jit import rollout, tree_tables
from dcsim.allocators.oktopus_sets import (
    _ODD,
    _Sets,
    _split_level,
    _sum_level,
    _topology,
)
from dcsim.allocators.vc_base import VCAllocator
from dcsim.allocators.vc_batch import (
    MAX_BITS_N,
    Embedded,
    hose_limit,
    integral_lookahead,
    powers_of_two,
    rows_cols,
    strict_host_caps,
    vm_counts,
)
from dcsim.hookspecs import hookimpl
from dcsim.model.vc import HOST_LINK_RULES, TreeLevels, host_link_vms, vm_slots

_EPS = 1e-9
_ONE = np.uint64(1)
_ALL = np.uint64(0xFFFF_FFFF_FFFF_FFFF)


def _fft_len(n1: int) -> int:
    return 1 << (2 * n1 - 2).bit_length()  # room for sums up to 2n without wrap-around


def minkowski(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise sums of count sets: out[p, z] = ∃ x + y = z with a[p, x] and b[p, y].

    Rows are boolean vectors over counts 0..n; sums above n are dropped. A convolution by
    FFT: entries are small integer pair counts, so thresholding at 0.5 is exact.
    """
    n1 = a.shape[1]
    size = _fft_len(n1)
    return _mul(np.fft.rfft(a, size), np.fft.rfft(b, size), n1, size)


def _mul(fa: np.ndarray, fb: np.ndarray, n1: int, size: int) -> np.ndarray:
    return np.fft.irfft(fa * fb, size)[:, :n1] > 0.5


def _child_sets(feas: np.ndarray, kids: np.ndarray) -> np.ndarray:
    """(rows, W, n+1): each row's children's feasible sets in order; padding gets {0}."""
    sets = feas[kids]
    sets[kids < 0] = False
    sets[kids < 0, 0] = True
    return sets


def _aggregate(feas: np.ndarray, kids: np.ndarray) -> np.ndarray:
    """Counts each parent's subtree can hold with every link below the parent satisfied."""
    n1 = feas.shape[1]
    size = _fft_len(n1)
    spectra = np.fft.rfft(_child_sets(feas, kids), size, axis=2)
    acc = spectra[:, 0]
    out = feas[kids[:, 0]]
    for j in range(1, kids.shape[1]):
        out = _mul(acc, spectra[:, j], n1, size)
        if j + 1 < kids.shape[1]:
            acc = np.fft.rfft(out, size)
    return out


def _split(amount: np.ndarray, feas: np.ndarray, kids: np.ndarray, n_children: int):
    """Give each parent's amount to its children in index order, each child the most it can
    take such that the rest stays feasible for the children after it."""
    out = np.zeros(n_children, dtype=np.int64)
    act = np.flatnonzero(amount)
    if act.size == 0:
        return out
    k = kids[act]
    n1 = feas.shape[1]
    size = _fft_len(n1)
    sets = _child_sets(feas, k)
    spectra = np.fft.rfft(sets[:, 1:], size, axis=2)
    unit = np.zeros((act.size, n1), dtype=bool)
    unit[:, 0] = True
    suffix = [unit]  # suffix[j]: what children j+1.. can take together (built backwards)
    for j in range(spectra.shape[1] - 1, -1, -1):
        suffix.append(_mul(spectra[:, j], np.fft.rfft(suffix[-1], size), n1, size))
    suffix.reverse()
    x = np.arange(n1)
    rows = np.arange(act.size)[:, None]
    rem = amount[act].copy()
    for j in range(k.shape[1]):
        has = k[:, j] >= 0
        left = rem[:, None] - x[None, :]
        ok = sets[:, j] & (left >= 0) & suffix[j][rows, np.maximum(left, 0)]
        take = n1 - 1 - np.argmax(ok[:, ::-1], axis=1)  # largest feasible x (always exists)
        out[k[has, j]] = take[has]
        rem = rem - take
    return out


def _single_host(slots: np.ndarray, up0: np.ndarray, n, b, host_link: str) -> np.ndarray:
    """Hosts that hold the whole VC: N slots, and under ``per_vm_strict`` N·B on the uplink
    (otherwise a VC on one host reserves nothing). Works per row of 2-d arrays too."""
    fits = slots >= n
    if host_link == "per_vm_strict":
        fits &= n * b <= up0 + _EPS
    return fits


def _per_vm_hosts(host_link: str, host_counts: str) -> bool:
    """Whether a host takes at most ⌊residual/B⌋ VMs (an interval of counts)."""
    return host_link != "hose" or host_counts == "interval"


def oktopus_embed(levels: TreeLevels, free_cpu: np.ndarray, link_free: np.ndarray, n: int,
                  s: float, b: float, host_link: str = "hose",
                  host_counts: str = "exact") -> np.ndarray | None:
    """VM counts per host: the VC (n, s, b) in the first subtree that holds it, or None.

    ``host_link``, ``host_counts``: the options of :class:`Oktopus` (module docstring).
    """
    H = levels.height
    slots = np.minimum(vm_slots(free_cpu, s), n)
    counts = np.zeros(levels.n_hosts, dtype=np.int64)
    fits = np.flatnonzero(_single_host(slots, link_free[levels.uplink[0]], n, b, host_link))
    if fits.size:  # a single host: no bandwidth at all (per_vm_strict: N·B)
        counts[fits[0]] = n
        return counts
    if slots.sum() < n:
        return None
    x = np.arange(n + 1)
    hose = np.minimum(x, n - x) * b
    inside = x[None, :] <= slots[:, None]  # level 0: what each host holds
    feas: list[np.ndarray] = []
    for k in range(H + 1):
        if k > 0:
            inside = _aggregate(feas[k - 1], levels.children[k])
            hit = np.flatnonzero(inside[:, n])
            if hit.size:
                amount = np.zeros(levels.size[k], dtype=np.int64)
                amount[hit[0]] = n
                for j in range(k, 0, -1):
                    amount = _split(amount, feas[j - 1], levels.children[j], levels.size[j - 1])
                return amount
        if k < H:
            up = link_free[levels.uplink[k]]
            load = hose
            if k == 0:
                load = host_link_vms(x, n, host_link) * b
                if host_counts == "interval":
                    load = x * b
            feas.append(inside & (load[None, :] <= up[:, None] + _EPS))
    return None


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
    almost every case met (see :class:`_Sets`), and the Minkowski sum of intervals
    {0..a_j} is {0..Σ a_j}: so a level is summed with one matrix-vector product over the
    children's a_j (:func:`_sum_level`). Only a group with a child whose set is not a
    non-empty interval gets the exact sum of uint64 bit sets (N ≤ 63; exact Minkowski sums
    by shifts, :mod:`dcsim.allocators.vc_batch`). The greedy split has a closed form
    likewise (:func:`_split_level`). Every level is computed for all the rows that need
    any (a row's levels above its first hit are computed, but never used).

    ``sparse``: return ``(ok, rows, hosts, VMs)`` triples of the hosts that get VMs instead
    (AHAB's lookahead, :meth:`Oktopus.embed_sparse`). ``integral``: the caller guarantees
    whole free CU and BU and sizes that are powers of two from 1
    (:func:`~dcsim.allocators.vc_batch.integral_lookahead`), so the slots are exact floors
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
    topo = _topology(levels)
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
        fits = _single_host(slots, link_free[:, levels.uplink[0]], n[:, None], b[:, None],
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
    if caps is None and _per_vm_hosts(host_link, host_counts):  # {0..min(slots, c)}
        cap = np.minimum(cap, c)
        c = None  # no hose limit below N
        # with c = N the set is {0..cap}, an interval, wherever cap ≥ 0 (_Sets.sizes)
        known = cap if cap.min(initial=0.0) >= 0 else np.where(cap >= 0, cap, _ODD)
    sets = [_Sets(c, cap, nr, nf, sizes=known)]  # per level: the feasible sets of its nodes
    sizes, odd = [None], [None]  # per level k ≥ 1: children's a (grouped); exact groups
    hit_level = np.zeros(rows.size, dtype=np.int64)  # 0: none yet
    hit_group = np.zeros(rows.size, dtype=np.int64)
    for k in range(1, H + 1):
        live = hit_level == 0
        total, a3, odd_k, exact = _sum_level(sets[k - 1], topo, k, live)
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
        sets.append(_Sets(c, total, nr, nf, exact))
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
        er, eg, ea = _split_level(er, eg, ea, sets[j - 1], sizes[j], odd[j], topo, j)
    out.entries(rows[er], eg, ea.astype(np.int64))
    ok[rows[hit_level > 0]] = True
    return out.result(ok)


def _strict_caps(free_cpu: np.ndarray, up: np.ndarray, n: np.ndarray, s: np.ndarray,
                 b: np.ndarray) -> np.ndarray | None:
    """Under ``per_vm_strict`` on integral states (whole free CU and BU, sizes powers of two
    from 1): what each host holds, {0..cap} with cap = min(⌊free / s⌋, ⌊up / b⌋, N), as
    (K, hosts) floats; None if some cap is negative (an overdrawn host or link: the
    general path).

    :func:`~dcsim.allocators.vc_batch.strict_host_caps` is exact, and its ⌊up / b⌋ is
    :func:`hose_limit`'s ⌊(up + 1e-9) / b⌋. So cap is the general path's min(slots, c),
    a host holds all N VMs iff cap = N (N slots and N·B ≤ up), and a row whose caps total
    less than N embeds nowhere.
    """
    caps = strict_host_caps(free_cpu, up, s, b)
    if caps.min(initial=0.0) < 0:
        return None
    return np.minimum(caps, n[:, None], out=caps)


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
        """``integral`` (:func:`~dcsim.allocators.vc_batch.integral_lookahead`)."""
        return {"integral": integral_lookahead(free_cpu, link_free, s, b)}

    def lookahead_kernel(self, hints):
        """:func:`dcsim.allocators.oktopus_jit.rollouts`, for integral states and N ≤ 63
        (past that, one uint64 bit set cannot hold the counts: the numpy code runs)."""
        if not hints.get("integral"):
            return None
        t = tree_tables(self.levels)
        return rollout("oktopus_jit", HOST_LINK_RULES.index(self.host_link),
                       self.options.host_counts == "interval", t.height, t.sizes, t.parent,
                       t.uplink, t.group, t.child_start,
                       accept=lambda ns: not ns.size or ns.max() <= MAX_BITS_N)


@hookimpl
def register_allocators(register):
    register(Oktopus)
