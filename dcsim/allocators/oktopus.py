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
"""

from __future__ import annotations

from weakref import WeakKeyDictionary

import numpy as np

from dcsim.allocators.vc_base import VCAllocator
from dcsim.hookspecs import hookimpl
from dcsim.model.vc import TreeLevels, vm_slots

_EPS = 1e-9
_MEMBERS: WeakKeyDictionary = WeakKeyDictionary()


def members(parent: np.ndarray, n_parents: int) -> np.ndarray:
    """(n_parents, W) matrix listing each parent's items in index order, padded with -1."""
    order = np.argsort(parent, kind="stable")
    p = parent[order]
    starts = np.searchsorted(p, np.arange(n_parents))
    pos = np.arange(p.size) - starts[p]
    out = np.full((n_parents, int(pos.max()) + 1 if p.size else 0), -1, dtype=np.int64)
    out[p, pos] = order
    return out


def tree_members(levels: TreeLevels) -> dict[str, list[np.ndarray | None]]:
    """Cached per tree: ``kids[k]`` level-(k-1) children of each level-k group (k ≥ 1) and
    ``hosts[k]`` the hosts of each level-k group, both as padded :func:`members` matrices."""
    got = _MEMBERS.get(levels)
    if got is None:
        H = levels.height
        got = {
            "kids": [None] + [members(levels.parent[k - 1], levels.size[k])
                              for k in range(1, H + 1)],
            "hosts": [members(levels.group[k], levels.size[k]) for k in range(H + 1)],
        }
        _MEMBERS[levels] = got
    return got


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
    tm = tree_members(levels)
    inside = x[None, :] <= slots[:, None]  # level 0: what each host holds
    feas: list[np.ndarray] = []
    for k in range(H + 1):
        if k > 0:
            inside = _aggregate(feas[k - 1], tm["kids"][k])
            hit = np.flatnonzero(inside[:, n])
            if hit.size:
                amount = np.zeros(levels.size[k], dtype=np.int64)
                amount[hit[0]] = n
                for j in range(k, 0, -1):
                    amount = _split(amount, feas[j - 1], tm["kids"][j], levels.size[j - 1])
                return amount
        if k < H:
            up = link_free[levels.uplink[k]]
            feas.append(inside & (hose[None, :] <= up[:, None] + _EPS))
    return None


class Oktopus(VCAllocator):
    """Oktopus's greedy VC allocation: the first (lowest, leftmost) subtree that fits."""

    name = "oktopus"
    description = "first subtree that holds the VC, filled greedily (Oktopus, Ballani 2011)"

    def embed(self, free_cpu, link_free, n, s, b):
        return oktopus_embed(self.levels, free_cpu, link_free, n, s, b)


@hookimpl
def register_allocators(register):
    register(Oktopus)
