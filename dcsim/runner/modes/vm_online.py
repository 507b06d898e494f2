"""``mode: vm_online``: VMs arrive and depart and each of ``placers`` places them, with
optional periodic rescheduling (the ``vm:`` section, :mod:`dcsim.sim.vm_online`)."""

from __future__ import annotations

from functools import partial
from typing import Any

from dcsim.runner.modes.base import Built, Mode, plugin_instance
from dcsim.runner.modes.reschedule import VM_UNUSED


class VMOnlineMode(Mode):
    name = "vm_online"
    unused = VM_UNUSED

    def check(self, point, base_dir: str) -> None:
        from dcsim.sim.vm_online_spec import check_online

        check_online(point.vm, base_dir, where="vm")

    def resolved(self, spec) -> dict[str, Any]:
        from dcsim.sim.vm_online_spec import parse_online

        return {"vm": parse_online(spec.vm, where="vm").model_dump(mode="json",
                                                                   exclude_none=True)}

    def build(self, spec, plan, workload_rng, plugin_rng) -> Built:
        from dcsim.plugins import get_plugin_class
        from dcsim.sim.vm_online import run_online

        placer = plugin_instance(plan, "placer", plugin_rng)
        lookup = partial(get_plugin_class, kind="rescheduler")
        return Built(lambda sink: run_online(spec.vm, placer, lookup, workload_rng, sink,
                                             base_dir=plan.base_dir))
