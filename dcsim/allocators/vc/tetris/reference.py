"""VC-TETRIS's score (AHAB Sec. IV-B): ρ = residual CU / residual uplink BU of placing one more
VM, the ``zero_bandwidth`` readings of a zero denominator, and the one-by-one greedy
placement inside a subtree."""

from __future__ import annotations

import numpy as np

from dcsim.model.vc import TreeLevels, host_link_vms, vm_slots

EPS = 1e-9

#: Values of the ``zero_bandwidth`` option (module docstring).
ZERO_BANDWIDTH = ("least_preferred", "most_preferred", "infeasible", "infeasible_if_stranded")


def tetris_rho(c_after: np.ndarray, b_after: np.ndarray, b: float,
               zero_bandwidth: str = "least_preferred") -> np.ndarray:
    """ρ of placing one more VM, from the residual CU and uplink BU after placing it.

    Only meaningful where both residuals are ≥ 0 (feasible); see the module docstring for
    the zero-denominator rules. Under ``zero_bandwidth: infeasible*`` the blocked cases get
    a value here (as under ``least_preferred``); :func:`zero_bandwidth_blocked` excludes them.
    """
    c_after = np.asarray(c_after, dtype=np.float64)
    b_after = np.asarray(b_after, dtype=np.float64)
    zero_b = b_after <= EPS
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = c_after / np.where(zero_b, 1.0, b_after)
    if b > 0:
        stranded = np.inf if zero_bandwidth == "most_preferred" else -np.inf
        at_zero = np.where(c_after <= EPS, np.inf, stranded)
    else:
        at_zero = np.full(rho.shape, np.inf)
    return np.where(zero_b, at_zero, rho)


def zero_bandwidth_blocked(c_after, b_after, b, zero_bandwidth: str):
    """Where a VM is infeasible under ``zero_bandwidth: infeasible`` (it would leave its host
    link with no bandwidth: B' ≤ 1e-9, B > 0) or ``infeasible_if_stranded`` (the same, with
    compute left behind it: C' > 1e-9). None for the other values (nothing blocked).
    Elementwise; b broadcasts."""
    if zero_bandwidth == "infeasible":
        return (b > 0) & (b_after <= EPS)
    if zero_bandwidth == "infeasible_if_stranded":
        return (b > 0) & (b_after <= EPS) & (c_after > EPS)
    return None


def greedy(hosts: np.ndarray, free_cpu: np.ndarray, up_free: np.ndarray, n: int, s: float,
            b: float, host_link: str = "hose",
            zero_bandwidth: str = "least_preferred") -> tuple[np.ndarray, np.ndarray]:
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
    b_after = up_free[h][:, :, None] - host_link_vms(m1, n, host_link) * b
    feas = valid & (c_after >= -EPS) & (b_after >= -EPS)
    blocked = zero_bandwidth_blocked(c_after, b_after, b, zero_bandwidth)
    if blocked is not None:
        feas &= ~blocked
    rho = tetris_rho(c_after, b_after, b, zero_bandwidth)
    table = np.where(feas, np.maximum(rho, -1e300), -np.inf)
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


def single_hosts(slots: np.ndarray, up0: np.ndarray, n, b, host_link: str) -> np.ndarray:
    """Hosts that can take all N VMs (N slots; N·B on the uplink under ``per_vm_strict``,
    nothing otherwise). Elementwise: rows of 2-d arrays too."""
    fits = slots >= n
    if host_link == "per_vm_strict":
        fits &= n * b <= up0 + EPS
    return fits


def tetris_embed(levels: TreeLevels, free_cpu: np.ndarray, link_free: np.ndarray, n: int,
                 s: float, b: float, capacity: np.ndarray | None = None,
                 host_link: str = "hose",
                 zero_bandwidth: str = "least_preferred") -> np.ndarray | None:
    """VM counts per host of TETRIS's embedding of VC (n, s, b), or None.

    ``capacity`` is each host's total CU (for the racks' and pods' free fractions); default
    the topology's cpu capacity. ``host_link``, ``zero_bandwidth``: the options of
    :class:`VCTetris` (module docstring).
    """
    if free_cpu.sum() + EPS < n * s:
        return None
    counts = np.zeros(levels.n_hosts, dtype=np.int64)
    slots = vm_slots(free_cpu, s)
    one = np.flatnonzero(single_hosts(slots, link_free[levels.uplink[0]], n, b, host_link))
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
        m, alive = greedy(hosts, free_cpu, up_free, n, s, b, host_link, zero_bandwidth)
        for i in np.flatnonzero(alive):
            counts[:] = 0
            sel = hosts[i] >= 0
            counts[hosts[i][sel]] = m[i][sel]
            if (levels.hose_loads(counts, n, b, host_link) <= link_free + EPS).all():
                return counts
    return None


