"""OKTOPUS for one request (:func:`oktopus_embed`): each node's exact set of feasible VM
counts by FFT convolution, the first subtree that holds the VC and the greedy split down
the tree; the reference the batch code matches, and its fallback."""

from __future__ import annotations

import numpy as np

from dcsim.model.vc import TreeLevels, host_link_vms, vm_slots

EPS = 1e-9


def _fft_len(n1: int) -> int:
    return 1 << (2 * n1 - 2).bit_length()  # room for sums up to 2n without wrap-around


def _mul(fa: np.ndarray, fb: np.ndarray, n1: int, size: int) -> np.ndarray:
    """Row-wise sums of count sets from their spectra: out[p, z] = ∃ x + y = z with
    a[p, x] and b[p, y], over counts 0..n (sums above n dropped). The entries are small
    integer pair counts, so thresholding at 0.5 is exact."""
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


def single_host(slots: np.ndarray, up0: np.ndarray, n, b, host_link: str) -> np.ndarray:
    """Hosts that hold the whole VC: N slots, and under ``per_vm_strict`` N·B on the uplink
    (otherwise a VC on one host reserves nothing). Works per row of 2-d arrays too."""
    fits = slots >= n
    if host_link == "per_vm_strict":
        fits &= n * b <= up0 + EPS
    return fits


def per_vm_hosts(host_link: str, host_counts: str) -> bool:
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
    fits = np.flatnonzero(single_host(slots, link_free[levels.uplink[0]], n, b, host_link))
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
            feas.append(inside & (load[None, :] <= up[:, None] + EPS))
    return None


