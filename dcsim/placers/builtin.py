"""Built-in VM placers: ``first_fit`` and ``best_fit`` (VMR²L's operator heuristic).

Both consider only the (host, NUMA option) pairs where the VM fits, cpu and memory
(:meth:`dcsim.vm.MappingState.fit_options`): a single-NUMA VM needs its cpu and memory on
one NUMA node, a double-NUMA VM half of each on both NUMA nodes of one host. Both are numpy
expressions over all hosts at once, and deterministic.
"""

from __future__ import annotations

import numpy as np

from dcsim.hookspecs import hookimpl
from dcsim.placers.base import Placer
from dcsim.vm.model import BOTH, FRAGMENT_CORES, VM
from dcsim.vm.view import MappingView


def _choice(vm: VM, flat: int) -> tuple[int, int]:
    h, j = divmod(int(flat), 2)
    return (h, BOTH) if vm.numas == 2 else (h, j)


class FirstFit(Placer):
    """The lowest-numbered host where the VM fits, NUMA 0 before NUMA 1 (a double-NUMA VM:
    the lowest host whose two NUMA nodes each have half of it free)."""

    name = "first_fit"
    description = "lowest host index (NUMA 0 before 1) where the VM fits"

    def place(self, vm: VM, view: MappingView) -> tuple[int, int] | None:
        ok = view.fit_options(vm).ravel()
        flat = int(ok.argmax())
        if not ok[flat]:
            return None
        return _choice(vm, flat)


class BestFit(Placer):
    """VMR²L's operator placement (§1: ByteDance "sorts all PMs that meet the requirements
    of the current VM according to the amount of FR reduction before and after this VM is
    added, and chooses the PM with the largest reduction").

    Among the feasible (host, NUMA option) pairs, the one whose fragment drops most when
    the VM arrives: the drop on NUMA j of host h is ``free % 16 − (free − c) % 16`` with
    ``c`` the VM's cores on that node (a double-NUMA VM adds the drops of both nodes). It
    can be negative (1 core on a NUMA with 32 free: 0 → 15). Every option changes the total
    free cpu by the same ``c``, so the largest fragment drop is also the lowest FR after
    placement. Ties: lowest host index, then NUMA 0.

    In closed form, with ``r = c mod 16`` the drop on a node is ``r`` when
    ``free mod 16 >= r`` (the VM fits in the node's stranded cores) and ``r − 16`` otherwise
    (it breaks a whole 16-core block). So best fit takes the first node whose stranded
    cores can absorb the VM, and a VM of a multiple of 16 cores per node ties everywhere
    (drop 0) and goes where first fit puts it. Tightness (how much is left) plays no part.
    """

    name = "best_fit"
    description = "the feasible host/NUMA whose fragment (free cores mod 16) drops most"

    def place(self, vm: VM, view: MappingView) -> tuple[int, int] | None:
        ok = view.fit_options(vm)
        if not ok.any():
            return None
        c = vm.cpu // vm.numas
        fc = view.free_cpu
        drop = fc % FRAGMENT_CORES - (fc - c) % FRAGMENT_CORES
        if vm.numas == 2:
            drop = np.repeat(drop.sum(axis=1, keepdims=True), 2, axis=1)
        score = np.where(ok, drop, np.iinfo(np.int64).min).ravel()
        return _choice(vm, int(score.argmax()))


PLACERS: tuple[type[Placer], ...] = (FirstFit, BestFit)


@hookimpl
def register_placers(register):
    for cls in PLACERS:
        register(cls)
