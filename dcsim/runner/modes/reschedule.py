"""``mode: reschedule``: each of ``reschedulers`` migrates at most MNL VMs of a mapping
drawn per seed (the ``vm:`` section, :mod:`dcsim.sim.vm_static`)."""

from __future__ import annotations

from typing import Any

from dcsim.runner.modes.base import Built, Mode, plugin_instance

#: the loss/queue sections a VM mode does not read
VM_UNUSED = frozenset({"queue", "topology", "workload", "capacity", "departures", "warmup",
                       "gpu"})


class RescheduleMode(Mode):
    name = "reschedule"
    unused = VM_UNUSED

    def sections(self, spec) -> dict[str, Any]:
        from dcsim.sim.vm_static import parse_static

        return {"vm": parse_static(spec.vm, where="vm")}

    def check(self, point, base_dir: str) -> None:
        from dcsim.sim.vm_static import check_static

        check_static(point.vm, base_dir, where="vm")

    def resolved(self, spec) -> dict[str, Any]:
        from dcsim.sim.vm_static import parse_static

        return {"vm": parse_static(spec.vm, where="vm").model_dump(mode="json",
                                                                   exclude_none=True)}

    def build(self, spec, plan, workload_rng, plugin_rng) -> Built:
        from dcsim.sim.vm_static import run_static

        resched = plugin_instance(plan, "rescheduler", plugin_rng)
        return Built(lambda sink: run_static(spec.vm, resched, workload_rng, sink,
                                             plan.base_dir))
