"""GPU allocator plugins for GPU-sharing clusters (``mode: gpu``, :mod:`dcsim.modes.gpu.engine`):
given the live cluster and an arriving pod, the node and GPU devices it gets."""

from dcsim.gpu_allocators.base import (
    Choice,
    GpuAllocator,
    GpuContext,
    ScoredAllocator,
    pod_devices,
    share_device,
    whole_devices,
)

__all__ = ["Choice", "GpuAllocator", "GpuContext", "ScoredAllocator", "pod_devices",
           "share_device", "whole_devices"]
