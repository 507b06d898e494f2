"""OKTOPUS: the first subtree that can hold the whole virtual cluster (Ballani et al. 2011).

Oktopus's VC allocation as the AHAB paper uses it (REFERENCE §1):

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

:func:`oktopus_embed_batch` (AHAB's lookahead) embeds one VC in each of K states at once,
with the same results row by row: the count vectors become uint64 bit sets (N ≤ 63; exact
Minkowski sums by shifts, :mod:`dcsim.allocators.vc_batch`), every level is computed for
all the rows still unplaced, and the greedy descent runs for every row's path together.
"""

from __future__ import annotations

import numpy as np

from dcsim.allocators.vc_base import VCAllocator
from dcsim.allocators.vc_batch import (
    MAX_BITS_N,
    has_bit,
    high_bit,
    hose_sets,
    low_bits,
    slots_rows,
    sum_sets,
)
from dcsim.hookspecs import hookimpl
from dcsim.model.vc import TreeLevels, vm_slots

_EPS = 1e-9


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


def oktopus_embed(levels: TreeLevels, free_cpu: np.ndarray, link_free: np.ndarray, n: int,
                  s: float, b: float) -> np.ndarray | None:
    """VM counts per host: the VC (n, s, b) in the first subtree that holds it, or None."""
    H = levels.height
    slots = np.minimum(vm_slots(free_cpu, s), n)
    counts = np.zeros(levels.n_hosts, dtype=np.int64)
    fits = np.flatnonzero(slots >= n)
    if fits.size:  # a single host: no bandwidth at all
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
            feas.append(inside & (hose[None, :] <= up[:, None] + _EPS))
    return None


def oktopus_embed_batch(levels: TreeLevels, free_cpu: np.ndarray, link_free: np.ndarray,
                        n: np.ndarray, s: np.ndarray, b: np.ndarray):
    """:func:`oktopus_embed` for K VCs, one per row of K independent states, vectorised.

    ``free_cpu`` (K, hosts), ``link_free`` (K, links), ``n``/``s``/``b`` (K,). Returns VM
    counts (K, hosts) and a feasibility mask (K,): row by row exactly what
    :func:`oktopus_embed` returns. Feasible-count sets are uint64 bit sets (exact, see
    :mod:`dcsim.allocators.vc_batch`); rows with N > 63 go through :func:`oktopus_embed`.
    Each level is computed only for the rows that no lower subtree could hold.
    """
    H = levels.height
    K, n_hosts = free_cpu.shape
    n = np.asarray(n, dtype=np.int64)
    s = np.asarray(s, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    counts = np.zeros((K, n_hosts), dtype=np.int64)
    ok = np.zeros(K, dtype=bool)
    big = n > MAX_BITS_N
    for i in np.flatnonzero(big):  # more counts than one bit set holds: the one-row code
        c = oktopus_embed(levels, free_cpu[i], link_free[i], int(n[i]), float(s[i]),
                          float(b[i]))
        if c is not None:
            counts[i], ok[i] = c, True
    slots = np.minimum(slots_rows(free_cpu, s), n[:, None])
    fits = slots >= n[:, None]
    one = fits.any(axis=1) & ~big  # a single host: no bandwidth at all
    first = np.argmax(fits, axis=1)
    counts[one, first[one]] = n[one]
    ok |= one
    rows = np.flatnonzero(~big & ~one & (slots.sum(axis=1) >= n))
    # feas[k]: bit sets of the level-k nodes of the rows in live[k] (rows no level <= k holds)
    live = [rows]
    feas = [low_bits(slots[rows] + 1)
            & hose_sets(link_free[rows[:, None], levels.uplink[0]], n[rows], b[rows])]
    hit_level = np.zeros(K, dtype=np.int64)  # 0: none
    hit_group = np.zeros(K, dtype=np.int64)
    for k in range(1, H + 1):
        r = live[k - 1]
        if r.size == 0:
            break
        kids = levels.children[k]
        sets = feas[k - 1][:, np.maximum(kids, 0)]
        sets[:, kids < 0] = 1  # padding holds {0}
        inside = _sum_all(sets)
        hit = has_bit(inside, n[r, None])
        new = hit.any(axis=1)
        hit_level[r[new]] = k
        hit_group[r[new]] = np.argmax(hit[new], axis=1)
        if k < H:
            r = r[~new]
            live.append(r)
            feas.append(inside[~new]
                        & hose_sets(link_free[r[:, None], levels.uplink[k]], n[r], b[r]))
    top = int(hit_level.max(initial=0))
    amount = np.zeros((K, levels.size[top]), dtype=np.int64)
    for j in range(top, 0, -1):
        at = np.flatnonzero(hit_level == j)
        amount[at, hit_group[at]] = n[at]
        r = live[j - 1]
        below = np.zeros((K, levels.size[j - 1]), dtype=np.int64)
        below[r] = _split_batch(amount[r], feas[j - 1], levels.children[j])
        amount = below
    got = hit_level > 0
    counts[got] = amount[got]
    ok |= got
    return counts, ok


def _sum_all(sets: np.ndarray) -> np.ndarray:
    """Minkowski sum of the bit sets along the last axis: pairwise halving for small
    arrays (few numpy calls), one child at a time for large ones (fewer shifts)."""
    if sets[..., 0].size >= 256:
        acc = sets[..., 0]
        for j in range(1, sets.shape[-1]):
            acc = sum_sets(acc, sets[..., j])  # shifts by the child's (few) elements
        return acc
    while sets.shape[-1] > 1:
        if sets.shape[-1] % 2:
            pad = np.ones(sets.shape[:-1] + (1,), dtype=np.uint64)
            sets = np.concatenate([sets, pad], axis=-1)
        a, c = sets[..., 0::2], sets[..., 1::2]
        sets = sum_sets(np.maximum(a, c), np.minimum(a, c))
    return sets[..., 0]


def _split_batch(amount: np.ndarray, feas: np.ndarray, kids: np.ndarray) -> np.ndarray:
    """:func:`_split` on bit sets for rows of states: each level-j amount (rows, groups) to
    the children, in order, each the most it can take such that the rest stays feasible
    for the children after it. ``feas`` (rows, children) bit sets; returns (rows,
    children) amounts."""
    out = np.zeros(feas.shape, dtype=np.int64)
    pr, pg = np.nonzero(amount)
    if pr.size == 0:
        return out
    k = kids[pg]
    sets = feas[pr[:, None], np.maximum(k, 0)]
    sets[k < 0] = 1
    # rsuffix[j]: bit 63 - z set iff children j+1.. together can take z (sums reflected)
    rsuffix = [np.full(pr.size, np.uint64(1) << np.uint64(63))]
    for j in range(k.shape[1] - 1, 0, -1):
        rsuffix.append(sum_sets(rsuffix[-1], sets[:, j], right=True))
    rsuffix.reverse()
    rem = amount[pr, pg].astype(np.uint64)
    takes = np.empty(k.shape, dtype=np.int64)
    for j in range(k.shape[1]):
        # x with rem - x in suffix: bit 63 - rem + x of rsuffix, i.e. bit x after >>
        good = sets[:, j] & (rsuffix[j] >> (np.uint64(63) - rem))
        takes[:, j] = high_bit(good)  # the largest feasible x (one always exists)
        rem -= takes[:, j].astype(np.uint64)
    has = k >= 0
    out[np.broadcast_to(pr[:, None], k.shape)[has], k[has]] = takes[has]
    return out


class Oktopus(VCAllocator):
    """Oktopus's greedy VC allocation: the first (lowest, leftmost) subtree that fits."""

    name = "oktopus"
    description = "first subtree that holds the VC, filled greedily (Oktopus, Ballani 2011)"

    def embed(self, free_cpu, link_free, n, s, b):
        return oktopus_embed(self.levels, free_cpu, link_free, n, s, b)

    def embed_batch(self, free_cpu, link_free, n, s, b):
        return oktopus_embed_batch(self.levels, free_cpu, link_free, n, s, b)


@hookimpl
def register_allocators(register):
    register(Oktopus)
