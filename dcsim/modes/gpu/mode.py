"""``mode: gpu``: GPU-sharing clusters (FGD, ATC'23); each of ``gpu_allocators`` places the
pods of a node list and pod list (the ``gpu:`` section, :mod:`dcsim.modes.gpu.engine`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from dcsim.experiment_sections import FailureSpec
from dcsim.modes.base import Built, Mode, Section, metric_observers, plugin_instance


class GpuMode(Mode):
    name = "gpu"
    runs_metrics = True  # with gpu.arrivals (the one-pass protocol has no time)
    plugin_key, plugin_kind = "gpu_allocators", "gpu_allocator"
    own_sections = {
        "gpu": Section(dict[str, Any] | BaseModel, ...),  # nodes, pods, arrivals, power
        "failures": Section(FailureSpec | None),  # node failures (dcsim.sim.failures)
    }
    refusals = {"power": "mode gpu takes its power model under gpu.power (watts per GPU "
                         "model and CPU socket)"}

    def sections(self, spec) -> dict[str, Any]:
        from dcsim.modes.gpu.spec import parse_gpu

        return {"gpu": parse_gpu(spec.gpu, where="gpu")}

    def check(self, point, base_dir: str) -> None:
        from dcsim.modes.gpu.spec import check_gpu

        s = check_gpu(point.gpu, base_dir, where="gpu")
        if point.metrics.plugins and s.arrivals is None:
            from dcsim.errors import ConfigError

            raise ConfigError("metrics.plugins: mode gpu runs metric plugins only with "
                              "gpu.arrivals (the one-pass protocol has no time)")
        if point.failures is not None:  # nodes only; a bad trace fails here, not in a run
            check_node_failures(point.failures, s, base_dir)

    def resolved(self, spec) -> dict[str, Any]:
        from dcsim.modes.gpu.spec import parse_gpu

        return {"gpu": parse_gpu(spec.gpu, where="gpu").model_dump(mode="json")}

    def build(self, spec, plan, workload_rng, plugin_rng, watch) -> Built:
        from dcsim.modes.gpu.engine import run_gpu
        from dcsim.sim.failures import failure_rng

        alloc = plugin_instance(plan, "gpu_allocator", plugin_rng)
        flags = ["arrived"] if spec.gpu.arrivals is None else ["departures"]
        if spec.gpu.power is not None:
            flags += ["power", f"power_{flags[0]}"]
        frng = None
        if spec.failures is not None:
            frng = failure_rng(spec.seed, plan.seed)
            flags.append("failures")
        metrics = metric_observers(plan, spec)
        return Built(lambda sink: run_gpu(spec.gpu, alloc, workload_rng, sink, plan.base_dir,
                                          failures=spec.failures, failure_rng=frng,
                                          watch=watch, metrics=metrics), flags=flags)


def check_node_failures(failures, s, base_dir: str) -> None:
    """Refuse failures in a one-pass run, and build the failure schedule once on the node
    list (a ConfigError if the section names links or a trace row names a node the list
    lacks)."""
    import numpy as np

    from dcsim.errors import ConfigError
    from dcsim.modes.gpu.spec import load_lists
    from dcsim.sim.failures import Components, FailureSchedule

    if s.arrivals is None:
        raise ConfigError("failures: mode gpu fails nodes only in a run with gpu.arrivals "
                          "(the one-pass protocol has no time)")
    nodes, _ = load_lists(s, base_dir, "gpu")
    FailureSchedule(failures, Components(len(nodes)), np.random.default_rng(0), base_dir)


#: the mode this package provides (:data:`dcsim.modes.MODES` reads it)
MODE = GpuMode()
