"""Built-in VM reschedulers (VMR²L's baselines): ``greedy`` and ``alpha_vbpp``
(:mod:`dcsim.reschedulers.heuristics`) and ``mip`` (:mod:`dcsim.reschedulers.mip`), registered
through the same hook as a plugin's."""

from __future__ import annotations

from dcsim.hookspecs import hookimpl
from dcsim.reschedulers.heuristics import (  # noqa: F401  (re-exported)
    AlphaVBPP,
    Greedy,
    insertion_gains,
    removal_gains,
    vm_numa_load,
)
from dcsim.reschedulers.mip import MIP

__all__ = ["MIP", "RESCHEDULERS", "AlphaVBPP", "Greedy", "insertion_gains", "removal_gains",
           "vm_numa_load"]

RESCHEDULERS: list[type] = [Greedy, AlphaVBPP, MIP]


@hookimpl
def register_reschedulers(register):
    for cls in RESCHEDULERS:
        register(cls)
