"""VMR²L's observation: per-host and per-VM features recomputed from the mapping, the VM
tokens, the host-slot mask and what a slot means (the package docstring has the layout)."""

from __future__ import annotations

import numpy as np

from dcsim.vm.model import BOTH, FRAGMENT_CORES, MappingState, Migration

X = FRAGMENT_CORES
HOST_FEATURES = 8
VM_FEATURES = 14

HOST_FEATURE_NAMES = [
    "free cpu NUMA 0 / host cpu", "free cpu NUMA 1 / host cpu",
    "free mem NUMA 0 / host mem", "free mem NUMA 1 / host mem",
    "(f0 mod 16)/f0 (0 if f0 = 0)", "(f0 mod 16)/16",
    "(f1 mod 16)/f1 (0 if f1 = 0)", "(f1 mod 16)/16",
]
VM_FEATURE_NAMES = [
    "cpu on NUMA 0 / host cpu", "cpu on NUMA 1 / host cpu",
    "mem on NUMA 0 / host mem", "mem on NUMA 1 / host mem",
    "(cpu on NUMA 0 mod 16)/16", "(cpu on NUMA 1 mod 16)/16",
    *[f"host: {n}" for n in HOST_FEATURE_NAMES],
]


# ------------------------------------------------------------------------------ features
def host_features(free_cpu: np.ndarray, free_mem: np.ndarray, cap_cpu: np.ndarray,
                  cap_mem: np.ndarray) -> np.ndarray:
    """``(..., H, 8)`` float32 host features from ``(..., H, 2)`` free arrays and ``(H, 2)``
    capacities (see the module docstring)."""
    hc = cap_cpu.sum(axis=-1, keepdims=True).astype(np.float64)
    hm = cap_mem.sum(axis=-1, keepdims=True).astype(np.float64)
    hc[hc == 0] = 1.0
    hm[hm == 0] = 1.0
    f = free_cpu.astype(np.float64)
    mod = free_cpu % X
    rate = np.divide(mod, f, out=np.zeros_like(f), where=free_cpu > 0)
    out = np.empty(free_cpu.shape[:-1] + (HOST_FEATURES,), dtype=np.float32)
    out[..., 0:2] = f / hc
    out[..., 2:4] = free_mem / hm
    out[..., 4] = rate[..., 0]
    out[..., 5] = mod[..., 0] / X
    out[..., 6] = rate[..., 1]
    out[..., 7] = mod[..., 1] / X
    return out


def vm_static(state: MappingState, tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(cpu, mem)`` per token VM and NUMA, ``(M, 2)`` each, for the VM on NUMA 0 if it
    is single-NUMA (the features swap the columns when it sits on NUMA 1)."""
    c = state.vm_cpu[tokens]
    m = state.vm_mem[tokens]
    d = state.vm_double[tokens]
    cpu = np.stack([c, np.where(d, c, 0)], axis=1)
    mem = np.stack([m, np.where(d, m, 0)], axis=1)
    return cpu, mem


def vm_features(hostf: np.ndarray, state_cap_cpu: np.ndarray, state_cap_mem: np.ndarray,
                tokens_cpu: np.ndarray, tokens_mem: np.ndarray, vm_host: np.ndarray,
                vm_numa: np.ndarray) -> np.ndarray:
    """``(..., M, 14)`` VM features: per-NUMA demand (``tokens_cpu``/``tokens_mem``, ``(M,
    2)`` as from :func:`vm_static`, swapped for VMs on NUMA 1) and the host's features
    (``hostf``, ``(..., H, 8)``) gathered by ``vm_host`` (``(..., M)``)."""
    hc = state_cap_cpu.sum(axis=-1).astype(np.float64)
    hm = state_cap_mem.sum(axis=-1).astype(np.float64)
    hc[hc == 0] = 1.0
    hm[hm == 0] = 1.0
    on1 = vm_numa == 1
    cpu = np.broadcast_to(tokens_cpu, vm_numa.shape + (2,)).copy()
    mem = np.broadcast_to(tokens_mem, vm_numa.shape + (2,)).copy()
    cpu[on1] = cpu[on1][:, ::-1]
    mem[on1] = mem[on1][:, ::-1]
    out = np.empty(vm_numa.shape + (VM_FEATURES,), dtype=np.float32)
    out[..., 0:2] = cpu / hc[vm_host][..., None]
    out[..., 2:4] = mem / hm[vm_host][..., None]
    out[..., 4:6] = (cpu % X) / X
    out[..., 6:] = np.take_along_axis(hostf, vm_host[..., None], axis=-2)
    return out


def observe(state: MappingState, tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(hosts (H, 8), vms (M, 14))`` features of ``state`` for the token VMs ``tokens``
    (indices of migratable VMs)."""
    hf = host_features(state.free_cpu, state.free_mem, state.cap_cpu, state.cap_mem)
    cpu, mem = vm_static(state, tokens)
    vf = vm_features(hf, state.cap_cpu, state.cap_mem, cpu, mem, state.vm_host[tokens],
                     state.vm_numa[tokens])
    return hf, vf


def update_features(state: MappingState, tokens: np.ndarray, hf: np.ndarray, vf: np.ndarray,
                    hosts: tuple[int, int]) -> None:
    """Bring ``(hf, vf)``, :func:`observe`'s arrays of the state before a migration, up to
    date in place after it: only ``hosts`` (the migration's source and destination) changed,
    so only their rows of ``hf`` and the rows of ``vf`` of the token VMs now on them (the
    migrated VM among them) are recomputed. The same float64 operations as
    :func:`host_features` and :func:`vm_features`, written for a few rows (Python floats for
    the two hosts, one numpy pass for their VMs), so the arrays equal a full
    :func:`observe` bit for bit (a test checks it after random migrations). A step of
    ``dcsim/VMR2L-v0`` on a 279-host mapping touches two hosts and a dozen or so VMs, not
    279 hosts and ~2,000 VMs."""
    caps = []
    for h in hosts:
        c0, c1 = (int(x) for x in state.free_cpu[h])
        m0, m1 = (int(x) for x in state.free_mem[h])
        hc = float(int(state.cap_cpu[h].sum())) or 1.0
        hm = float(int(state.cap_mem[h].sum())) or 1.0
        r0, r1 = c0 % X, c1 % X
        hf[h] = (c0 / hc, c1 / hc, m0 / hm, m1 / hm, r0 / c0 if c0 > 0 else 0.0, r0 / X,
                 r1 / c1 if c1 > 0 else 0.0, r1 / X)
        caps.append((hc, hm))
    a, b = hosts
    on = state.vm_host[tokens]
    rows = np.flatnonzero((on == a) | (on == b))
    if not rows.size:
        return
    sub = tokens[rows]
    vh = state.vm_host[sub]
    at_a = vh == a
    hc = np.where(at_a, caps[0][0], caps[1][0])
    hm = np.where(at_a, caps[0][1], caps[1][1])
    cpu, mem = state.vm_cpu[sub], state.vm_mem[sub]
    both = state.vm_double[sub]
    on1 = state.vm_numa[sub] == 1
    first = on1 & ~both       # a single-NUMA VM on NUMA 1 has nothing on NUMA 0
    second = both | on1
    out = np.empty((rows.size, VM_FEATURES), dtype=np.float32)
    c0, c1 = np.where(first, 0, cpu), np.where(second, cpu, 0)
    out[:, 0] = c0 / hc
    out[:, 1] = c1 / hc
    out[:, 2] = np.where(first, 0, mem) / hm
    out[:, 3] = np.where(second, mem, 0) / hm
    out[:, 4] = (c0 % X) / X
    out[:, 5] = (c1 % X) / X
    out[:, 6:] = hf[vh]
    vf[rows] = out


def host_mask(state: MappingState, k: int) -> np.ndarray:
    """``(2H,)`` bool, True where slot ``2h + j`` is a legal choice for VM ``k``: the model's
    own :meth:`~dcsim.vm.model.MappingState.options` (a double-NUMA VM uses column 0 only),
    plus the VM's own host (slot ``2 h_src``, a no-op)."""
    ok = state.options(k)
    if state.vm_double[k]:
        ok[:, 1] = False
    ok[state.vm_host[k], 0] = True
    return ok.ravel()


def slot_migration(state: MappingState, k: int, slot: int) -> Migration | None:
    """The migration slot ``slot`` means for VM ``k`` (None for its own host: a no-op)."""
    h, j = divmod(int(slot), 2)
    if h == int(state.vm_host[k]):
        return None
    return Migration(int(k), h, BOTH if state.vm_double[k] else j)


def tokens_of(state: MappingState) -> np.ndarray:
    """The token VMs: indices of the migratable VMs, in order."""
    return np.flatnonzero(state.vm_migratable)
