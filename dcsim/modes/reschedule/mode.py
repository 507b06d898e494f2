"""``mode: reschedule``: each of ``reschedulers`` migrates at most MNL VMs of a mapping
drawn per seed (the ``vm:`` section, :mod:`dcsim.modes.reschedule.engine`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from dcsim.modes.base import Built, Mode, Section, plugin_instance


class RescheduleMode(Mode):
    name = "reschedule"
    plugin_key, plugin_kind = "reschedulers", "rescheduler"
    own_sections = {"vm": Section(dict[str, Any] | BaseModel, ...)}  # mapping and MNL

    def sections(self, spec) -> dict[str, Any]:
        from dcsim.modes.reschedule.spec import parse_static

        return {"vm": parse_static(spec.vm, where="vm")}

    def check(self, point, base_dir: str) -> None:
        from dcsim.modes.reschedule.spec import check_static

        check_static(point.vm, base_dir, where="vm")

    def resolved(self, spec) -> dict[str, Any]:
        from dcsim.modes.reschedule.spec import parse_static

        return {"vm": parse_static(spec.vm, where="vm").model_dump(mode="json",
                                                                   exclude_none=True)}

    def build(self, spec, plan, workload_rng, plugin_rng, watch) -> Built:
        from dcsim.modes.reschedule.engine import run_static

        resched = plugin_instance(plan, "rescheduler", plugin_rng)
        return Built(lambda sink: run_static(spec.vm, resched, workload_rng, sink,
                                             plan.base_dir))


#: the mode this package provides (:data:`dcsim.modes.MODES` reads it)
MODE = RescheduleMode()
