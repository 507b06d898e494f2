"""VM placement on two-NUMA hosts (VMR²L's model): hosts, VMs, a mapping state, the fragment
rate and step-by-step validated migrations.

Every host has two NUMA nodes, each with its own cpu cores and memory (MB). A VM is either
*single-NUMA* (all of its cpu and memory on one NUMA node) or *double-NUMA* (half of its cpu
and half of its memory on each of the two NUMA nodes of one host). All amounts are integers.

:class:`MappingState` keeps, in numpy arrays, the free cpu and memory per host × NUMA and the
placement of every VM, and applies migrations. A migration (:class:`Migration`) moves one VM
to another host: to NUMA 0 or 1 for a single-NUMA VM, to :data:`BOTH` for a double-NUMA VM.
It is valid when

* the VM may migrate (``migratable``: the file's ``allow_migration``),
* the target host is not the VM's current host (VMR²L's environment treats picking the
  source host as no move; changing NUMA within a host is not a migration here),
* the NUMA option matches the VM (0/1 for single-NUMA, :data:`BOTH` for double-NUMA), and
* the target NUMA node has at least the VM's cpu and memory free (single-NUMA), or each of
  the two NUMA nodes has at least half of them free (double-NUMA).

A migration list is validated step by step (each step sees the state the previous steps
left); the migration number limit (MNL) counts steps. An invalid list raises
:class:`InvalidMigration` naming the step (1-based), the VM and the reason, and leaves the
state exactly as it was. Free resources never go negative nor above capacity.

VMs can also arrive and leave (the online mode, :mod:`dcsim.modes.vm_online.engine`):
:meth:`MappingState.add_vm` places a new VM (validated like a migration's target: the NUMA
option must suit the VM and have room; any host, including an empty one) and appends it, and
:meth:`MappingState.remove_vm` releases a VM and deletes it. Both keep the VM indices in
order (a VM's index is its rank among the VMs present, oldest first), so the reschedulers'
"ties go to the earlier VM" means the longest-present VM in an online run. Indices after a
removed VM shift down by one: hold ids, not indices, across removals.

The fragment rate (:func:`fragment_rate`) follows the paper (Appendix A.1, X = 16):
``FR = Σ_{hosts, NUMAs} (free_cpu mod 16) / Σ_{hosts, NUMAs} free_cpu``, cpu only, over the
hosts of the state (the loader keeps only ACTIVE hosts). When nothing is free (0/0) the FR
is defined as 0: no free core, so no stranded core. The denominator does not change under a
migration (the VM's cores leave one host and arrive on another), so lowering the total
fragment ``Σ free_cpu mod 16`` is the same as lowering the FR.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from dcsim.errors import StateError
from dcsim.vm.types import (  # noqa: F401  (the model's vocabulary, imported from here)
    BOTH,
    FRAGMENT_CORES,
    NUMAS,
    VM,
    Host,
    InvalidMigration,
    Migration,
    MoveRecord,
)


def _numa_name(numa: int) -> str:
    return "both NUMAs" if numa == BOTH else f"NUMA {numa}"


def _per_numa(v: VM) -> tuple[int, int]:
    """``(cpu, mem)`` VM ``v`` takes on each NUMA node it uses; StateError if malformed."""
    if v.numas not in (1, 2):
        raise StateError(f"VM {v.id!r}: numas must be 1 or 2, not {v.numas}")
    if v.cpu <= 0 or v.mem < 0:
        raise StateError(f"VM {v.id!r}: cpu must be > 0 and mem >= 0")
    if v.numas == 2 and (v.cpu % 2 or v.mem % 2):
        raise StateError(f"VM {v.id!r}: a double-NUMA VM needs even cpu and memory")
    return v.cpu // v.numas, v.mem // v.numas


class MappingState:
    """Hosts, VMs and where each VM is; free cpu/memory per host × NUMA as numpy arrays.

    ``placement[k] = (host index, numa)`` with ``numa`` 0/1 for single-NUMA VMs and
    :data:`BOTH` for double-NUMA ones. Raises :class:`StateError` when the placements do
    not fit the hosts or a VM is malformed.

    Arrays (do not write to them; use :meth:`apply`):

    * ``cap_cpu``, ``cap_mem``, ``free_cpu``, ``free_mem``: ``(H, 2)`` int64
    * ``vm_host``, ``vm_numa``: ``(V,)`` int64, the current placement
    * ``vm_cpu``, ``vm_mem``: ``(V,)`` int64 demand *per NUMA node used* (the whole VM for
      single-NUMA, half of it for double-NUMA)
    * ``vm_double``, ``vm_migratable``: ``(V,)`` bool
    """

    def __init__(self, hosts: Sequence[Host], vms: Sequence[VM],
                 placement: Sequence[tuple[int, int]]):
        if len(placement) != len(vms):
            raise StateError(f"{len(vms)} VMs but {len(placement)} placements")
        self.hosts: tuple[Host, ...] = tuple(hosts)
        self.vms: tuple[VM, ...] = tuple(vms)
        self.host_ids: tuple[str, ...] = tuple(h.id for h in self.hosts)
        self.vm_ids: tuple[str, ...] = tuple(v.id for v in self.vms)
        self.host_index = {h: i for i, h in enumerate(self.host_ids)}
        self._vm_index: dict[str, int] | None = {v: k for k, v in enumerate(self.vm_ids)}
        self._id_set: set[str] | None = None  # made by the first add_vm / remove_vm
        if len(self.host_index) != len(self.hosts):
            raise StateError("duplicate host ids")
        if len(self._vm_index) != len(self.vms):
            raise StateError("duplicate VM ids")
        H, V = len(self.hosts), len(self.vms)
        self.cap_cpu = np.array([h.cpu for h in self.hosts], dtype=np.int64).reshape(H, NUMAS)
        self.cap_mem = np.array([h.mem for h in self.hosts], dtype=np.int64).reshape(H, NUMAS)
        if (self.cap_cpu < 0).any() or (self.cap_mem < 0).any():
            raise StateError("a host has a negative capacity")
        self.vm_double = np.array([v.numas == 2 for v in self.vms], dtype=bool)
        self.vm_migratable = np.array([v.migratable for v in self.vms], dtype=bool)
        self.vm_cpu = np.zeros(V, dtype=np.int64)
        self.vm_mem = np.zeros(V, dtype=np.int64)
        for k, v in enumerate(self.vms):
            self.vm_cpu[k], self.vm_mem[k] = _per_numa(v)
        self.vm_host = np.full(V, -1, dtype=np.int64)
        self.vm_numa = np.zeros(V, dtype=np.int64)
        self.free_cpu = self.cap_cpu.copy()
        self.free_mem = self.cap_mem.copy()
        #: failed hosts (``failures:`` in vm_online): no VM and no free capacity; None
        #: while no host ever failed
        self.host_down: np.ndarray | None = None
        for k, (h, n) in enumerate(placement):
            h, n = int(h), int(n)
            v = self.vms[k]
            if not 0 <= h < H:
                raise StateError(f"VM {v.id!r}: no host number {h}")
            if (n == BOTH) != (v.numas == 2) or n not in (0, 1, BOTH):
                raise StateError(f"VM {v.id!r}: {_numa_name(n)} does not suit a "
                                 f"{'double' if v.numas == 2 else 'single'}-NUMA VM")
            self._add(k, h, n)
            for j in self._numas(n):
                if self.free_cpu[h, j] < 0 or self.free_mem[h, j] < 0:
                    raise StateError(
                        f"host {self.host_ids[h]!r} NUMA {j} is over capacity once VM "
                        f"{v.id!r} is placed ({self.cap_cpu[h, j] - self.free_cpu[h, j]} "
                        f"cpu of {self.cap_cpu[h, j]}, {self.cap_mem[h, j] - self.free_mem[h, j]}"
                        f" MB of {self.cap_mem[h, j]})")

    # -- sizes and copies -------------------------------------------------------------
    @property
    def n_hosts(self) -> int:
        return len(self.hosts)

    @property
    def n_vms(self) -> int:
        return len(self.vms)

    @property
    def vm_index(self) -> dict[str, int]:
        """``{vm id: index}`` (rebuilt after VMs arrive or leave; do not modify)."""
        if self._vm_index is None:
            self._vm_index = {v: k for k, v in enumerate(self.vm_ids)}
        return self._vm_index

    def copy(self) -> MappingState:
        """An independent copy (hosts and VMs are shared, arrays are copied)."""
        new = object.__new__(MappingState)
        new.__dict__.update(self.__dict__)
        for name in ("free_cpu", "free_mem", "vm_host", "vm_numa"):
            setattr(new, name, getattr(self, name).copy())
        if self.host_down is not None:
            new.host_down = self.host_down.copy()
        if self._id_set is not None:
            new._id_set = set(self._id_set)
        return new

    def placement(self) -> list[tuple[int, int]]:
        """``[(host, numa), ...]`` per VM: what the constructor takes."""
        return list(zip(self.vm_host.tolist(), self.vm_numa.tolist(), strict=True))

    def same_as(self, other: MappingState) -> bool:
        """Same free arrays and placements (hosts and VMs assumed the same)."""
        return (np.array_equal(self.free_cpu, other.free_cpu)
                and np.array_equal(self.free_mem, other.free_mem)
                and np.array_equal(self.vm_host, other.vm_host)
                and np.array_equal(self.vm_numa, other.vm_numa))

    # -- fragment ---------------------------------------------------------------------
    def fragment(self) -> int:
        """``Σ free_cpu mod 16`` over hosts and NUMAs (cores no 16-core VM can use)."""
        return int((self.free_cpu % FRAGMENT_CORES).sum())

    def total_free_cpu(self) -> int:
        return int(self.free_cpu.sum())

    def fragment_rate(self) -> float:
        """The FR; 0.0 when no cpu is free (see the module docstring)."""
        total = self.total_free_cpu()
        return self.fragment() / total if total else 0.0

    # -- placement arithmetic -----------------------------------------------------------
    @staticmethod
    def _numas(numa: int) -> tuple[int, ...]:
        return (0, 1) if numa == BOTH else (numa,)

    def _add(self, k: int, h: int, n: int) -> None:
        for j in self._numas(n):
            self.free_cpu[h, j] -= self.vm_cpu[k]
            self.free_mem[h, j] -= self.vm_mem[k]
        self.vm_host[k] = h
        self.vm_numa[k] = n

    def _remove(self, k: int) -> None:
        h, n = int(self.vm_host[k]), int(self.vm_numa[k])
        for j in self._numas(n):
            self.free_cpu[h, j] += self.vm_cpu[k]
            self.free_mem[h, j] += self.vm_mem[k]

    # -- validity -----------------------------------------------------------------------
    def reason(self, m: Migration) -> str | None:
        """Why ``m`` is invalid in the current state, or None when it is valid."""
        k, h, n = m.vm, m.host, m.numa
        if not 0 <= k < self.n_vms:
            return f"there is no VM number {k} ({self.n_vms} VMs)"
        if not self.vm_migratable[k]:
            return "the VM may not migrate (allow_migration is false)"
        if not 0 <= h < self.n_hosts:
            return f"there is no host number {h} ({self.n_hosts} hosts)"
        if h == self.vm_host[k]:
            return f"the VM is already on host {self.host_ids[h]!r}"
        return self._fit_reason(bool(self.vm_double[k]), h, n, int(self.vm_cpu[k]),
                                int(self.vm_mem[k]))

    def _fit_reason(self, double: bool, h: int, n: int, c: int, mem: int) -> str | None:
        """Why ``c`` cores and ``mem`` MB per NUMA node (a double- or single-NUMA VM) do not
        fit on host ``h``, NUMA option ``n``; None when they do."""
        if double:
            if n != BOTH:
                return f"a double-NUMA VM must go to both NUMAs, not NUMA {n}"
        elif n not in (0, 1):
            return f"a single-NUMA VM must go to NUMA 0 or 1, not {_numa_name(n)}"
        for j in self._numas(n):
            fc, fm = int(self.free_cpu[h, j]), int(self.free_mem[h, j])
            if fc < c:
                return (f"host {self.host_ids[h]!r} NUMA {j} has {fc} free cpu, the VM "
                        f"needs {c} there")
            if fm < mem:
                return (f"host {self.host_ids[h]!r} NUMA {j} has {fm} MB free memory, the "
                        f"VM needs {mem} MB there")
        return None

    def options(self, k: int) -> np.ndarray:
        """``(H, 2)`` bool: the (host, NUMA) targets VM ``k`` may move to now. For a
        double-NUMA VM both columns of a host are True when the host can take it
        (the option is then :data:`BOTH`)."""
        if not self.vm_migratable[k]:
            return np.zeros((self.n_hosts, NUMAS), dtype=bool)
        ok = (self.free_cpu >= self.vm_cpu[k]) & (self.free_mem >= self.vm_mem[k])
        if self.vm_double[k]:
            ok = np.repeat(ok.all(axis=1, keepdims=True), NUMAS, axis=1)
        ok[self.vm_host[k]] = False
        return ok

    # -- applying ---------------------------------------------------------------------
    def apply(self, m: Migration, step: int = 1) -> MoveRecord:
        """Apply one migration, or raise :class:`InvalidMigration` (state unchanged)."""
        why = self.reason(m)
        if why is not None:
            vm_id = self.vm_ids[m.vm] if 0 <= m.vm < self.n_vms else None
            raise InvalidMigration(step, vm_id, why)
        k = m.vm
        rec = MoveRecord(step, k, int(self.vm_host[k]), int(self.vm_numa[k]), m.host, m.numa)
        self._remove(k)
        self._add(k, m.host, m.numa)
        return rec

    def apply_all(self, migrations: Iterable[Migration], mnl: int | None = None,
                  ) -> list[MoveRecord]:
        """Apply ``migrations`` in order, each validated against the state the previous
        ones left. All or nothing: on the first invalid step (or a step beyond ``mnl``)
        raise :class:`InvalidMigration` and restore the state exactly."""
        saved = (self.free_cpu.copy(), self.free_mem.copy(),
                 self.vm_host.copy(), self.vm_numa.copy())
        records: list[MoveRecord] = []
        try:
            for step, m in enumerate(migrations, start=1):
                if mnl is not None and step > mnl:
                    vm_id = self.vm_ids[m.vm] if 0 <= m.vm < self.n_vms else None
                    raise InvalidMigration(
                        step, vm_id, f"more steps than the migration number limit {mnl}")
                records.append(self.apply(m, step))
        except BaseException:
            self.free_cpu, self.free_mem, self.vm_host, self.vm_numa = saved
            raise
        return records

    # -- arrivals and departures (the online mode) ---------------------------------------
    def place_reason(self, vm: VM, host: int, numa: int) -> str | None:
        """Why a new VM ``vm`` cannot be placed on host number ``host``, NUMA option
        ``numa`` (0/1 for a single-NUMA VM, :data:`BOTH` for a double-NUMA one), or None
        when it can. Malformed VMs raise :class:`StateError`."""
        c, mem = _per_numa(vm)
        if not isinstance(host, int | np.integer) or not 0 <= host < self.n_hosts:
            return f"there is no host number {host!r} ({self.n_hosts} hosts)"
        if not isinstance(numa, int | np.integer):
            return f"the NUMA option must be 0, 1 or {BOTH}, not {numa!r}"
        return self._fit_reason(vm.numas == 2, int(host), int(numa), c, mem)

    def fit_options(self, vm: VM) -> np.ndarray:
        """``(H, 2)`` bool: where a new VM ``vm`` fits now. For a double-NUMA VM both
        columns of a host are True when each of its NUMA nodes has half of the VM free
        (the option is then :data:`BOTH`)."""
        c, mem = _per_numa(vm)
        ok = (self.free_cpu >= c) & (self.free_mem >= mem)
        if vm.numas == 2:
            ok = np.repeat(ok.all(axis=1, keepdims=True), NUMAS, axis=1)
        return ok

    def add_vm(self, vm: VM, host: int, numa: int) -> int:
        """Place a new VM and append it; return its index (``n_vms - 1``). Raises
        :class:`StateError` (state unchanged) for a duplicate id or a placement that does
        not fit (see :meth:`place_reason`)."""
        if self._id_set is None:
            self._id_set = set(self.vm_ids)
        if vm.id in self._id_set:
            raise StateError(f"VM {vm.id!r} is already placed")
        why = self.place_reason(vm, host, numa)
        if why is not None:
            raise StateError(f"cannot place VM {vm.id!r}: {why}")
        c, mem = _per_numa(vm)
        host, numa = int(host), int(numa)
        self.vms = self.vms + (vm,)
        self.vm_ids = self.vm_ids + (vm.id,)
        self._vm_index = None  # rebuilt on demand (a copy may share the old dict)
        self._id_set.add(vm.id)
        self.vm_double = np.append(self.vm_double, vm.numas == 2)
        self.vm_migratable = np.append(self.vm_migratable, bool(vm.migratable))
        self.vm_cpu = np.append(self.vm_cpu, np.int64(c))
        self.vm_mem = np.append(self.vm_mem, np.int64(mem))
        self.vm_host = np.append(self.vm_host, np.int64(host))
        self.vm_numa = np.append(self.vm_numa, np.int64(numa))
        for j in self._numas(numa):
            self.free_cpu[host, j] -= c
            self.free_mem[host, j] -= mem
        return len(self.vms) - 1

    def remove_vm(self, k: int) -> tuple[VM, int, int]:
        """Release VM number ``k`` and delete it (later VMs' indices shift down by one);
        return ``(vm, host, numa)`` where it was. Raises :class:`StateError` for a bad
        index."""
        if not 0 <= k < self.n_vms:
            raise StateError(f"there is no VM number {k} ({self.n_vms} VMs)")
        if self._id_set is None:
            self._id_set = set(self.vm_ids)
        vm, h, n = self.vms[k], int(self.vm_host[k]), int(self.vm_numa[k])
        self._remove(k)
        self.vms = self.vms[:k] + self.vms[k + 1:]
        self.vm_ids = self.vm_ids[:k] + self.vm_ids[k + 1:]
        self._vm_index = None
        self._id_set.discard(vm.id)
        for name in ("vm_double", "vm_migratable", "vm_cpu", "vm_mem", "vm_host", "vm_numa"):
            setattr(self, name, np.delete(getattr(self, name), k))
        return vm, h, n

    def set_host_down(self, host: int, down: bool) -> None:
        """Mark host number ``host`` failed (no free capacity; it must hold no VM) or
        repaired (its whole capacity free again)."""
        h = int(host)
        if down and (self.vm_host == h).any():
            raise StateError(f"host {self.host_ids[h]!r} still has VMs; move them first")
        if self.host_down is None:
            self.host_down = np.zeros(self.n_hosts, dtype=bool)
        self.host_down[h] = down
        self.free_cpu[h] = 0 if down else self.cap_cpu[h]
        self.free_mem[h] = 0 if down else self.cap_mem[h]

    @property
    def host_up(self) -> np.ndarray:
        """``(H,)`` bool: which hosts are up (every one, until a failure)."""
        if self.host_down is None:
            return np.ones(self.n_hosts, dtype=bool)
        return ~self.host_down

    def _down_capacity(self, cap: np.ndarray) -> int:
        return int(cap[self.host_down].sum()) if self.host_down is not None else 0

    def util_cpu(self) -> float:
        """Used cpu / capacity over all hosts, failed ones included (0.0 with no
        capacity)."""
        cap = int(self.cap_cpu.sum())
        used = cap - int(self.free_cpu.sum()) - self._down_capacity(self.cap_cpu)
        return used / cap if cap else 0.0

    def util_mem(self) -> float:
        """Used memory / capacity over all hosts, failed ones included (0.0 with no
        capacity)."""
        cap = int(self.cap_mem.sum())
        used = cap - int(self.free_mem.sum()) - self._down_capacity(self.cap_mem)
        return used / cap if cap else 0.0

    def available(self) -> tuple[float, float]:
        """The share of cpu and of memory on hosts that are up."""
        out = []
        for cap in (self.cap_cpu, self.cap_mem):
            total = int(cap.sum())
            out.append((total - self._down_capacity(cap)) / total if total else 1.0)
        return out[0], out[1]

    def check_invariants(self) -> None:
        """Raise :class:`StateError` unless 0 <= free <= capacity everywhere and the free
        arrays equal capacity minus the placed VMs."""
        used_cpu = np.zeros_like(self.cap_cpu)
        used_mem = np.zeros_like(self.cap_mem)
        for j in (0, 1):
            on = (self.vm_numa == j) | (self.vm_numa == BOTH)
            np.add.at(used_cpu[:, j], self.vm_host[on], self.vm_cpu[on])
            np.add.at(used_mem[:, j], self.vm_host[on], self.vm_mem[on])
        want_cpu, want_mem = self.cap_cpu - used_cpu, self.cap_mem - used_mem
        if self.host_down is not None:  # a failed host: no VM, nothing free
            if self.host_down[self.vm_host].any():
                raise StateError("a VM is on a failed host")
            want_cpu[self.host_down] = 0
            want_mem[self.host_down] = 0
        if not (np.array_equal(self.free_cpu, want_cpu)
                and np.array_equal(self.free_mem, want_mem)):
            raise StateError("free resources disagree with the placements")
        if (self.free_cpu < 0).any() or (self.free_mem < 0).any():
            raise StateError("a free resource is negative")
        if (self.free_cpu > self.cap_cpu).any() or (self.free_mem > self.cap_mem).any():
            raise StateError("a free resource is above capacity")

    def describe(self, rec: MoveRecord) -> dict:
        """A move record with ids instead of indices (the Parquet row)."""
        return {"step": rec.step, "vm_id": self.vm_ids[rec.vm],
                "from_host": self.host_ids[rec.from_host], "from_numa": rec.from_numa,
                "to_host": self.host_ids[rec.to_host], "to_numa": rec.to_numa}


def fragment_rate(state: MappingState) -> float:
    """``Σ (free_cpu mod 16) / Σ free_cpu`` over the state's hosts and NUMAs; 0.0 for 0/0."""
    return state.fragment_rate()


def fragment_rate_of(free_cpu: np.ndarray) -> float:
    """The FR of a bare ``free_cpu`` array (any shape); 0.0 for 0/0."""
    total = int(np.sum(free_cpu))
    return int(np.sum(np.asarray(free_cpu) % FRAGMENT_CORES)) / total if total else 0.0
