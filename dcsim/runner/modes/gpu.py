"""``mode: gpu``: GPU-sharing clusters (FGD, ATC'23); each of ``gpu_allocators`` places the
pods of a node list and pod list (the ``gpu:`` section, :mod:`dcsim.sim.gpu`)."""

from __future__ import annotations

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

        check_gpu(point.gpu, base_dir, where="gpu")

    def resolved(self, spec) -> dict[str, Any]:
        from dcsim.sim.gpu_spec import parse_gpu

        return {"gpu": parse_gpu(spec.gpu, where="gpu").model_dump(mode="json")}

    def build(self, spec, plan, workload_rng, plugin_rng) -> Built:
        from dcsim.sim.gpu import run_gpu

        alloc = plugin_instance(plan, "gpu_allocator", plugin_rng)
        flags = ["arrived"] if spec.gpu.arrivals is None else ["departures"]
        return Built(lambda sink: run_gpu(spec.gpu, alloc, workload_rng, sink,
                                          plan.base_dir), flags=flags)
