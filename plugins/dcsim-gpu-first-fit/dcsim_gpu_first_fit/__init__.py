"""GPU first fit as a dcsim GPU allocator plugin (``mode: gpu``).

The node: the lowest-index node where the pod fits now (``cluster.feasible(pod)``: enough
cpu and memory, a GPU model it accepts, and the devices it needs). Its devices:

* a CPU-only pod takes none;
* a pod of ``k`` whole GPUs takes the node's first ``k`` fully free devices
  (``dcsim.gpu_allocators.whole_devices``, as every built-in allocator does);
* a GPU-sharing pod takes, with ``prefer_used`` (the default), the partly used device with
  the least free milli-GPU that still fits, the lowest index among equals, and a fully free
  device (the lowest index) only when no partly used one fits; without ``prefer_used``, the
  lowest-index device that fits, used or not.

No randomness: a run's choices depend on the cluster and the pods only.
"""

from __future__ import annotations

import numpy as np
from dcsim import hookimpl
from dcsim.gpu import MILLI, GpuClusterView, GpuPod
from dcsim.gpu_allocators import Choice, GpuAllocator, whole_devices
from pydantic import Field


class GpuFirstFit(GpuAllocator):
    """The first node that fits; on it, the tightest partly used GPU (see the module
    docstring)."""

    name = "gpu_first_fit"
    description = "the lowest-index node where the pod fits; the tightest partly used GPU"

    class Options(GpuAllocator.Options):  # inherits extra="forbid": unknown keys are errors
        prefer_used: bool = Field(
            default=True,
            description="a GPU-sharing pod tries partly used devices before fully free ones")

    def allocate(self, pod: GpuPod, view: GpuClusterView) -> Choice | None:
        fits = np.flatnonzero(view.feasible(pod))
        if fits.size == 0:
            return None                                   # reject: it fits nowhere
        node = int(fits[0])
        if pod.num_gpu == 0:
            return node, ()                               # a CPU-only pod
        if pod.gpu_milli >= MILLI:
            return node, whole_devices(view, node, pod.num_gpu)
        return node, (self.share_device(view, node, pod.gpu_milli),)

    def share_device(self, cluster: GpuClusterView, node: int, milli: int) -> int:
        """The device of ``node`` a pod asking ``milli`` (< 1000) milli-GPU of one GPU gets;
        ``feasible`` guarantees one fits."""
        free = cluster.gpu_free[node]      # read-only; devices past the node's last have 0
        fits = free >= milli
        if self.options.prefer_used:
            used = np.flatnonzero(fits & (free < MILLI))
            if used.size:
                return int(used[np.argmin(free[used])])   # argmin: the lowest index of ties
        return int(np.flatnonzero(fits)[0])


@hookimpl
def register_gpu_allocators(register):
    register(GpuFirstFit)
