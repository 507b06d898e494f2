"""``mode: gpu``: GPU-sharing clusters (FGD, ATC'23); each of ``gpu_allocators`` places the
pods of a node list and pod list (the ``gpu:`` section, :mod:`dcsim.sim.gpu`)."""

from __future__ import annotations

from functools import partial
from typing import Any

from dcsim.runner.modes.base import Built, Mode, plugin_instance

#: the sections of the other modes that a GPU run does not read
GPU_UNUSED = frozenset({"queue", "topology", "workload", "capacity", "departures", "warmup",
                        "vm"})


class GpuMode(Mode):
    name = "gpu"
    unused = GPU_UNUSED

    def sections(self, spec) -> dict[str, Any]:
        from dcsim.sim.gpu_spec import parse_gpu

        return {"gpu": parse_gpu(spec.gpu, where="gpu")}

    def check(self, point, base_dir: str) -> None:
        from dcsim.sim.gpu_spec import check_gpu

        s = check_gpu(point.gpu, base_dir, where="gpu")
        if point.failures is not None:  # nodes only; a bad trace fails here, not in a run
            check_node_failures(point.failures, s, base_dir)

    def resolved(self, spec) -> dict[str, Any]:
        from dcsim.sim.gpu_spec import parse_gpu

        return {"gpu": parse_gpu(spec.gpu, where="gpu").model_dump(mode="json")}

    def build(self, spec, plan, workload_rng, plugin_rng) -> Built:
        from dcsim.runner.progress import watch_run
        from dcsim.sim.failures import failure_rng
        from dcsim.sim.gpu import run_gpu

        alloc = plugin_instance(plan, "gpu_allocator", plugin_rng)
        flags = ["arrived"] if spec.gpu.arrivals is None else ["departures"]
        if spec.gpu.power is not None:
            flags += ["power", f"power_{flags[0]}"]
        frng = None
        if spec.failures is not None:
            frng = failure_rng(spec.seed, plan.seed)
            flags.append("failures")
        watch = partial(watch_run, plan.run_id)   # read-only: dcsim run's progress lines
        return Built(lambda sink: run_gpu(spec.gpu, alloc, workload_rng, sink, plan.base_dir,
                                          failures=spec.failures, failure_rng=frng,
                                          watch=watch), flags=flags)


def check_node_failures(failures, s, base_dir: str) -> None:
    """Refuse failures in a one-pass run, and build the failure schedule once on the node
    list (a ConfigError if the section names links or a trace row names a node the list
    lacks)."""
    import numpy as np

    from dcsim.errors import ConfigError
    from dcsim.sim.failures import Components, FailureSchedule
    from dcsim.sim.gpu_spec import load_lists

    if s.arrivals is None:
        raise ConfigError("failures: mode gpu fails nodes only in a run with gpu.arrivals "
                          "(the one-pass protocol has no time)")
    nodes, _ = load_lists(s, base_dir, "gpu")
    FailureSchedule(failures, Components(len(nodes)), np.random.default_rng(0), base_dir)
