"""The VM model's vocabulary: hosts, VMs, migrations and their records (see
:mod:`dcsim.vm.model` for the rules)."""

from __future__ import annotations

from dataclasses import dataclass

from dcsim.errors import StateError

#: The NUMA option of a double-NUMA VM (half of it on each of NUMA 0 and 1).
BOTH = -1
#: X of the paper's X-core fragment: free cores that cannot hold a 16-core VM.
FRAGMENT_CORES = 16
#: NUMA nodes per host.
NUMAS = 2


@dataclass(frozen=True)
class Host:
    """A host: ``cpu[j]`` cores and ``mem[j]`` MB on NUMA node ``j`` (j = 0, 1)."""

    id: str
    cpu: tuple[int, int]
    mem: tuple[int, int]


@dataclass(frozen=True)
class VM:
    """A VM of ``cpu`` cores and ``mem`` MB in total, on ``numas`` (1 or 2) NUMA nodes.

    A double-NUMA VM takes ``cpu // 2`` and ``mem // 2`` on each NUMA node; both must be
    even. ``type`` is informational (the file's ``instance_type``).
    """

    id: str
    cpu: int
    mem: int
    numas: int = 1
    migratable: bool = True
    type: str = ""


@dataclass(frozen=True)
class Migration:
    """Move VM number ``vm`` (its index in the state) to host number ``host``, NUMA ``numa``
    (0 or 1 for a single-NUMA VM, :data:`BOTH` for a double-NUMA VM)."""

    vm: int
    host: int
    numa: int


@dataclass(frozen=True)
class MoveRecord:
    """An applied migration: ``step`` (1-based), the VM and where it came from and went."""

    step: int
    vm: int
    from_host: int
    from_numa: int
    to_host: int
    to_numa: int


class InvalidMigration(StateError):
    """A migration list breaks a rule at ``step`` (1-based); the state was left unchanged."""

    def __init__(self, step: int, vm_id: str | None, reason: str):
        self.step = step
        self.vm_id = vm_id
        self.reason = reason
        who = f"VM {vm_id!r}" if vm_id is not None else "no such VM"
        super().__init__(f"migration step {step} ({who}): {reason}")

