"""What every compiled lookahead kernel shares (numba; :mod:`dcsim.kernels`): the
host-link rules as integers and the reservation of one embedding in one state.

Imported only when the kernels are on: it needs numba.
"""

from __future__ import annotations

from dcsim.allocators.kernel_cache import njit

#: ``host_link`` rules (:data:`dcsim.model.vc.HOST_LINK_RULES`) as the kernels number them
HOSE, PER_VM, PER_VM_STRICT = 0, 1, 2


@njit(cache=True)
def host_vms(m, n, mode):
    """:func:`dcsim.model.vc.host_link_vms` for one host: the VMs' worth of bandwidth its
    link reserves with m of the VC's n VMs."""
    if mode == HOSE:
        return min(m, n - m)
    if mode == PER_VM:
        return m if m < n else 0
    return m


@njit(cache=True)
def reserve(free, lf, n, s, b, mode, H, sizes, group, uplink, m_out, touched, count, mk):
    """:func:`dcsim.allocators.vc.lookahead.reserve_rows` for one row: the embedding puts
    ``m_out[h]`` VMs on each host h of ``touched[:count]``; reserve compute on those hosts,
    the host links by the host-link rule and the hose amounts on the links above (the same
    floats), and clear ``m_out`` there. ``mk``: scratch, one float per group."""
    for i in range(count):
        h = touched[i]
        m = m_out[h]
        free[h] -= m * s
        lf[uplink[0, h]] -= host_vms(m, n, mode) * b
    for k in range(1, H):
        for g in range(sizes[k]):
            mk[g] = 0.0
        for i in range(count):
            h = touched[i]
            mk[group[k, h]] += m_out[h]
        for g in range(sizes[k]):
            x = mk[g]
            if x != 0.0:
                lf[uplink[k, g]] -= min(x, n - x) * b
    for i in range(count):
        m_out[touched[i]] = 0
