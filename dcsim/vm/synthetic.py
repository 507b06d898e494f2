"""Synthetic VM-to-host mappings in the authors' JSON format (VMR²L's medium set, made up).

Hosts are the paper's: two NUMA nodes of 44 cores and 184388 MB each. VM types, sizes,
NUMA deployment and proportions are VMR²L's Table 1 (memory in GB × 1024 MB):

=========  ====  ==========  ======  ==========
type       cpu   memory MB   NUMAs   share
=========  ====  ==========  ======  ==========
large         2        4096       1     11.01 %
xlarge        4        8192       1     43.51 %
2xlarge       8       16384       1     16.13 %
4xlarge      16       32768       1     17.62 %
8xlarge      32       65536       2      6.22 %
16xlarge     64      131072       2      5.31 %
22xlarge     88      262144       2      0.20 %
=========  ====  ==========  ======  ==========

(The authors' data files list 22xlarge with 180224 MB, not Table 1's 256 GB; at 0.2 % of
VMs it hardly matters. Their files also deploy some instances of a type on the other NUMA
count; here every instance follows Table 1.)

How a mapping is drawn, in the spirit of the paper's "remove the VMs on each PM and randomly
schedule them to any PM that can fit them" (Appendix B.1):

1. Draw VM types i.i.d. from the shares until their cores reach ``target_cpu`` of the
   total (≈ 1990 VMs for 280 hosts at 94 %: the mean VM has 11.6 cores; the authors' medium
   set has 2089 VMs on 279 active hosts, a slightly smaller mean).
2. Place the double-NUMA VMs first, then the single-NUMA ones, each group in a random
   order (otherwise the 88-core VMs, which need an empty host, would almost never fit).
   Each VM goes, with probability ``random_share``, to a (host, NUMA) option drawn
   uniformly among those that fit it, and otherwise to the first option that fits in a
   fixed random host order (NUMA 0 before 1), as a packing scheduler would. Purely random
   placement spreads the 6 % free cores evenly (≈ 2.6 per NUMA), so no NUMA keeps 16
   free cores and the FR is ≈ 1; pure first fit leaves the free cores on a few hosts (FR
   ≈ 0.28). ``random_share = 0.5`` (our choice) gives an initial FR of ≈ 0.49–0.56 on the
   medium size, near the paper's ≈ 0.55.
3. A VM that fits nowhere is dropped; then single-NUMA VMs are drawn (Table 1 shares
   restricted to the types that still fit somewhere) and placed the same way until the
   target is reached or nothing fits.

Memory follows from the types (2 GB per core): ≈ 46 % used at 94 % cpu, as in the paper.
Same ``rng`` seed, same document. Optional knobs: ``non_migratable`` (a fraction of VMs
with ``allow_migration: false``) and ``disabled`` (hosts marked DISABLED after placement,
their VMs kept) exercise the loader's rules.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

NUMA_CPU = 44
NUMA_MEM = 184388


@dataclass(frozen=True)
class VMType:
    name: str
    cpu: int
    mem_mb: int
    numas: int
    share: float


#: VMR²L Table 1.
VM_TYPES: tuple[VMType, ...] = (
    VMType("ecs.c1.large", 2, 4 * 1024, 1, 0.1101),
    VMType("ecs.c1.xlarge", 4, 8 * 1024, 1, 0.4351),
    VMType("ecs.c1.2xlarge", 8, 16 * 1024, 1, 0.1613),
    VMType("ecs.c1.4xlarge", 16, 32 * 1024, 1, 0.1762),
    VMType("ecs.c1.8xlarge", 32, 64 * 1024, 2, 0.0622),
    VMType("ecs.c1.16xlarge", 64, 128 * 1024, 2, 0.0531),
    VMType("ecs.c1.22xlarge", 88, 256 * 1024, 2, 0.0020),
)

#: The public production sample's VM mix (279 active hosts, 2,089 VMs): type, NUMA count,
#: cores and MB *per NUMA node*, and how many of the 2,089 VMs; ``share`` is count / 2089.
#: Unlike Table 1, some types come in both NUMA counts, and the 2-NUMA 16xlarge (64 cores,
#: 6 % of the VMs but 36 % of the cores) dominates the cpu.
PRODUCTION_MIX: tuple[tuple[str, int, int, int, int], ...] = (
    ("ecs.c1.xlarge", 1, 4, 8192, 906),
    ("ecs.c1.large", 1, 2, 4096, 337),
    ("ecs.c1.2xlarge", 1, 8, 16384, 311),
    ("ecs.c1.4xlarge", 1, 16, 32768, 184),
    ("ecs.c1.16xlarge", 2, 32, 65536, 130),
    ("ecs.c1.8xlarge", 1, 32, 65536, 61),
    ("ecs.c1.2xlarge", 2, 4, 8192, 57),
    ("ecs.c1.8xlarge", 2, 16, 32768, 50),
    ("ecs.c1.4xlarge", 2, 8, 16384, 46),
    ("ecs.c1.22xlarge", 2, 44, 90112, 4),
    ("ecs.c1.xlarge", 2, 2, 4096, 3),
)
_N_PRODUCTION = sum(m[4] for m in PRODUCTION_MIX)

#: :data:`PRODUCTION_MIX` as :class:`VMType` (totals over the VM's NUMA nodes).
PRODUCTION_TYPES: tuple[VMType, ...] = tuple(
    VMType(name, numas * cpu, numas * mem, numas, n / _N_PRODUCTION)
    for name, numas, cpu, mem, n in PRODUCTION_MIX)

#: How much of the placement is random in the production-like presets, calibrated so that
#: the mean initial FR is the production sample's (0.598): over 30 mappings of 279 hosts,
#: 0.66 -> 0.572, 0.68 -> 0.586, 0.70 -> 0.602, 0.72 -> 0.624 (± 0.008).
PRODUCTION_RANDOM_SHARE = 0.7

_PRODUCTION = {"types": PRODUCTION_TYPES, "target_cpu": 0.943,
               "random_share": PRODUCTION_RANDOM_SHARE}

#: Named presets. ``small`` (8 hosts, for tests) and ``medium`` (280 hosts, the paper's
#: medium size) draw Table 1's mix: the easier mappings. ``production`` matches the public
#: production sample's statistics (279 hosts, its VM mix, 94.3 % of the cpu used); the
#: VMR²L experiments use it. ``production_small`` (32 hosts) is the same recipe at a size a
#: CPU trains a policy on.
PRESETS: dict[str, dict] = {
    "small": {"hosts": 8},
    "medium": {"hosts": 280},
    "production": {"hosts": 279, **_PRODUCTION},
    "production_small": {"hosts": 32, **_PRODUCTION},
}


def synthetic_mapping(rng: np.random.Generator, hosts: int = 280, target_cpu: float = 0.94,
                      *, numa_cpu: int = NUMA_CPU, numa_mem: int = NUMA_MEM,
                      types: tuple[VMType, ...] = VM_TYPES, random_share: float = 0.5,
                      non_migratable: float = 0.0,
                      disabled: int = 0, cluster_name: str = "synthetic") -> dict:
    """A mapping document in the authors' JSON format (see the module docstring)."""
    if hosts < 1:
        raise ValueError("hosts must be >= 1")
    if not 0 < target_cpu <= 1:
        raise ValueError("target_cpu must be in (0, 1]")
    if not 0 <= random_share <= 1:
        raise ValueError("random_share must be in [0, 1]")
    shares = np.array([t.share for t in types], dtype=float)
    shares = shares / shares.sum()
    free_cpu = np.full((hosts, 2), numa_cpu, dtype=np.int64)
    free_mem = np.full((hosts, 2), numa_mem, dtype=np.int64)
    goal = target_cpu * hosts * 2 * numa_cpu
    # 1. draw the VM list
    drawn: list[int] = []
    total = 0
    while total < goal:
        t = int(rng.choice(len(types), p=shares))
        drawn.append(t)
        total += types[t].cpu
    # 2. doubles first, then singles, each group in random order
    doubles = [t for t in drawn if types[t].numas == 2]
    singles = [t for t in drawn if types[t].numas == 1]
    order = [doubles[i] for i in rng.permutation(len(doubles))] + \
            [singles[i] for i in rng.permutation(len(singles))]
    placed: list[tuple[int, int, int]] = []  # (type, host, numa or -1)
    used = 0
    rank = np.empty(hosts, dtype=np.int64)
    rank[rng.permutation(hosts)] = np.arange(hosts)  # the packing scheduler's host order
    option_rank = (2 * rank[:, None] + np.arange(2)).ravel()  # (host, numa) flattened

    def options(t: VMType) -> np.ndarray:
        """Fitting options as flattened (host, numa) indices; NUMA 0 stands for BOTH."""
        per_cpu, per_mem = t.cpu // t.numas, t.mem_mb // t.numas
        ok = (free_cpu >= per_cpu) & (free_mem >= per_mem)
        if t.numas == 2:
            return 2 * np.flatnonzero(ok.all(axis=1))
        return np.flatnonzero(ok.ravel())

    def place(ti: int) -> bool:
        nonlocal used
        t = types[ti]
        opts = options(t)
        if len(opts) == 0:
            return False
        if rng.random() < random_share:
            o = int(opts[rng.integers(len(opts))])
        else:
            o = int(opts[np.argmin(option_rank[opts])])
        h, j = divmod(o, 2)
        if t.numas == 2:
            free_cpu[h] -= t.cpu // 2
            free_mem[h] -= t.mem_mb // 2
            placed.append((ti, h, -1))
        else:
            free_cpu[h, j] -= t.cpu
            free_mem[h, j] -= t.mem_mb
            placed.append((ti, h, j))
        used += t.cpu
        return True

    for ti in order:
        if used + types[ti].cpu > goal + numa_cpu:  # never overshoot by more than a NUMA
            continue
        place(ti)
    # 3. top up with single-NUMA types that still fit
    single_idx = [i for i, t in enumerate(types) if t.numas == 1]
    while used < goal:
        fits = [i for i in single_idx if len(options(types[i]))
                and used + types[i].cpu <= goal + numa_cpu]
        if not fits:
            break
        p = shares[fits] / shares[fits].sum()
        place(fits[int(rng.choice(len(fits), p=p))])
    # document
    n_fixed = int(round(non_migratable * len(placed)))
    fixed = set(rng.choice(len(placed), size=n_fixed, replace=False).tolist()) if n_fixed else set()
    off = set(rng.choice(hosts, size=disabled, replace=False).tolist()) if disabled else set()
    width = max(4, len(str(hosts - 1)))
    host_ids = [f"host-{h:0{width}d}" for h in range(hosts)]
    host_info = []
    for h in range(hosts):
        host_info.append({
            "node_id": host_ids[h],
            "status": "DISABLED" if h in off else "ACTIVE",
            "node_cpu": 2 * numa_cpu,
            "node_mem_mb": 2 * numa_mem,
            "numa": [{"node": j, "total_cpu": numa_cpu, "free_cpu": int(free_cpu[h, j]),
                      "memory_huge_total_mb": numa_mem,
                      "memory_huge_free_mb": int(free_mem[h, j])} for j in (0, 1)],
            "rack_id": h // 20,
        })
    vm_width = max(5, len(str(len(placed) - 1)))
    vm_instance = []
    for k, (ti, h, j) in enumerate(placed):
        t = types[ti]
        numa = ([{"node": 0, "cpu": t.cpu // 2, "mem_mb": t.mem_mb // 2},
                 {"node": 1, "cpu": t.cpu // 2, "mem_mb": t.mem_mb // 2}] if j < 0
                else [{"node": j, "cpu": t.cpu, "mem_mb": t.mem_mb}])
        vm_instance.append({"instance_id": f"vm-{k:0{vm_width}d}", "instance_type": t.name,
                            "host_id": host_ids[h], "numa": numa,
                            "allow_migration": k not in fixed})
    counts = {t.name: 0 for t in types}
    for ti, _, _ in placed:
        counts[types[ti].name] += 1
    listed: dict[str, VMType] = {}
    for t in types:  # one vm_type_list entry per name (a type may come in two NUMA counts)
        listed.setdefault(t.name, t)
    return {
        "cluster_list": [{
            "cluster_name": cluster_name,
            "host_info": host_info,
            "vm_type_info": [{"vm_type": name, "flavor_limit": 2 * n}
                             for name, n in counts.items() if n],
            "vm_instance": vm_instance,
            "other_requirement": {"deployment_set": []},
        }],
        "vm_type_list": [{"vm_type": t.name, "request_cpu": t.cpu, "request_mem_mb": t.mem_mb,
                          "numa": t.numas, "expected_newly_created_num": 0,
                          "weight": 1.0 if t.cpu == 16 else 0.0} for t in listed.values()],
        "general_requirement": {"optimization_objective": 1},
    }


def synthetic_preset(name: str, seed: int = 0, **overrides) -> dict:
    """:func:`synthetic_mapping` with the named preset (:data:`PRESETS`) and
    ``np.random.default_rng(seed)``; ``overrides`` replace the preset's arguments."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; available: {', '.join(PRESETS)}")
    return synthetic_mapping(np.random.default_rng(seed), **{**PRESETS[name], **overrides})
