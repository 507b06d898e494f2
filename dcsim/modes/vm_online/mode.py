"""``mode: vm_online``: VMs arrive and depart and each of ``placers`` places them, with
optional periodic rescheduling (the ``vm:`` section, :mod:`dcsim.modes.vm_online.engine`)."""

from __future__ import annotations

from functools import partial
from typing import Any

from pydantic import BaseModel

from dcsim.experiment_sections import FailureSpec
from dcsim.modes.base import Built, Mode, Section, metric_observers, plugin_instance


class VMOnlineMode(Mode):
    runs_metrics = True
    name = "vm_online"
    plugin_key, plugin_kind = "placers", "placer"
    own_sections = {
        "vm": Section(dict[str, Any] | BaseModel, ...),  # mapping, arrivals, rescheduling
        "failures": Section(FailureSpec | None),  # host failures (dcsim.sim.failures)
    }

    def sections(self, spec) -> dict[str, Any]:
        from dcsim.modes.vm_online.spec import parse_online

        return {"vm": parse_online(spec.vm, where="vm")}

    def check(self, point, base_dir: str) -> None:
        from dcsim.modes.vm_online.spec import check_online

        check_online(point.vm, base_dir, where="vm")
        if point.failures is not None:  # hosts only; a bad trace fails here, not in a run
            check_host_failures(point.failures, point.vm, base_dir)

    def resolved(self, spec) -> dict[str, Any]:
        from dcsim.modes.vm_online.spec import parse_online

        return {"vm": parse_online(spec.vm, where="vm").model_dump(mode="json",
                                                                   exclude_none=True)}

    def build(self, spec, plan, workload_rng, plugin_rng, watch) -> Built:
        from dcsim.modes.vm_online.engine import run_online
        from dcsim.plugins import get_plugin_class
        from dcsim.sim.failures import failure_rng

        placer = plugin_instance(plan, "placer", plugin_rng)
        lookup = partial(get_plugin_class, kind="rescheduler")
        frng = failure_rng(spec.seed, plan.seed) if spec.failures is not None else None
        flags = ["failures"] if spec.failures is not None else []
        metrics = metric_observers(plan, spec)
        return Built(lambda sink: run_online(spec.vm, placer, lookup, workload_rng, sink,
                                             base_dir=plan.base_dir, failures=spec.failures,
                                             failure_rng=frng, watch=watch, metrics=metrics),
                     flags=flags)


def check_host_failures(failures, vm: dict[str, Any], base_dir: str) -> None:
    """Build the failure schedule once on the mapping's hosts (a ConfigError if the section
    names links or a trace row names a host the mapping lacks)."""
    import numpy as np

    from dcsim.modes.vm_online.spec import parse_online
    from dcsim.sim.failures import Components, FailureSchedule
    from dcsim.vm.mapping_spec import build_mapping

    s = parse_online(vm, where="vm")
    state = build_mapping(s.mapping, np.random.default_rng(0), base_dir, "vm.mapping")
    FailureSchedule(failures, Components(state.n_hosts), np.random.default_rng(0), base_dir)


#: the mode this package provides (:data:`dcsim.modes.MODES` reads it)
MODE = VMOnlineMode()
