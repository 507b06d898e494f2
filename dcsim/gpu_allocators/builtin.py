"""The built-in GPU allocators, registered through the ``register_gpu_allocators`` hook:
FGD (:mod:`.fgd`) and the paper's five baselines (:mod:`.baselines`)."""

from __future__ import annotations

from dcsim.gpu_allocators.baselines import (
    BestFitGpu,
    DotProductGpu,
    GpuClustering,
    GpuPacking,
    RandomGpu,
)
from dcsim.gpu_allocators.fgd import Fgd
from dcsim.hookspecs import hookimpl

GPU_ALLOCATORS = (RandomGpu, DotProductGpu, GpuClustering, GpuPacking, BestFitGpu, Fgd)


@hookimpl
def register_gpu_allocators(register):
    for cls in GPU_ALLOCATORS:
        register(cls)
