"""The five baselines of the FGD paper (Weng et al., ATC'23, §6.1), as the authors' simulator
scores them (``pkg/simulator/plugin/*_score.go``): ``random``, ``best_fit``,
``dot_product``, ``gpu_packing`` and ``gpu_clustering``. Each is a
:class:`~dcsim.gpu_allocators.base.ScoredAllocator` (filter, integer score, ties by the
seeded node order, devices), every score a numpy expression over the feasible nodes.

The normalising constants are the authors' "max spec" of a node: 128 cores (128,000
milli-cpu) and 8 GPUs (8,000 milli-GPU).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from dcsim.gpu.cluster import GpuClusterView, GpuPod
from dcsim.gpu_allocators.base import Choice, GpuAllocator, ScoredAllocator, pod_devices

#: the authors' MaxSpecCpu and MaxSpecGpu
MAX_CPU = 128_000
MAX_GPU = 8_000


class RandomGpu(GpuAllocator):
    """A feasible node drawn uniformly at random, and a random device that fits (the
    authors' ``RandomScore`` with ``gpuSelMethod: random``; it scores nothing, so the
    scoring options do not apply). ``device`` as for the scored allocators."""

    name = "random"
    description = "a feasible node uniformly at random; a random device that fits"

    class Options(GpuAllocator.Options):
        device: Literal["best", "worst", "random", "first"] = "random"

    def allocate(self, pod: GpuPod, view: GpuClusterView) -> Choice | None:
        idx = np.flatnonzero(view.feasible(pod))
        if len(idx) == 0:
            return None
        node = int(idx[self.rng.integers(len(idx))])
        return node, pod_devices(view, pod, node, self.options.device, self.rng)


class BestFitGpu(ScoredAllocator):
    """The node left with the least free cpu and GPU: score ``100 × (1 − s)`` with
    ``s = ½ (cpu_free − cpu)/128000 + ½ (gpu_free − gpu)/8000`` (the authors'
    ``BestFitScore``; their min-max normalisation over the nodes that follows keeps the
    order and the ties of the integer scores, so it is not repeated here)."""

    name = "best_fit"
    description = "the node with the least cpu and GPU left after the pod (FGD's BestFit)"

    def score(self, pod, view, idx):
        cpu = (view.cpu_free[idx] - pod.cpu) / MAX_CPU
        gpu = (view.free_total[idx] - pod.total_gpu_milli) / MAX_GPU
        return (1.0 - (0.5 * cpu + 0.5 * gpu)) * 100.0


class DotProductGpu(ScoredAllocator):
    """Tetris' alignment as the FGD authors configure it (``DotProductScore`` with
    ``dimExtMethod: merge``, ``normMethod: max``): node vector (free cpu/128000, free
    GPU/8000), pod vector (cpu/128000, GPU/8000), score ``100 × (1 − dot/2)`` — the node
    whose free resources align *least* with the pod wins, which packs."""

    name = "dot_product"
    description = "Tetris' dot product of free and asked cpu/GPU, the smallest wins (FGD's DotProd)"

    def score(self, pod, view, idx):
        dot = (view.cpu_free[idx] / MAX_CPU * (pod.cpu / MAX_CPU)
               + view.free_total[idx] / MAX_GPU * (pod.total_gpu_milli / MAX_GPU))
        return (1.0 - dot / 2.0) * 100.0


class GpuPacking(ScoredAllocator):
    """Pack onto GPUs already in use (the authors' ``GpuPackingScore``): a sharing pod
    that fits a partly used device scores ``100 − ⌊free/100⌋`` of the tightest such
    device (91–100); a pod that needs a fully free device of a node already in use scores
    ``max(50 − devices, 33)``; a node whose GPUs are all free scores
    ``max(33 − free GPUs, free GPUs)``; a CPU-only pod scores 0 everywhere (ties)."""

    name = "gpu_packing"
    description = "prefer partly used GPUs, then used nodes, then idle nodes (FGD's GpuPacking)"

    def score(self, pod, view, idx):
        if pod.num_gpu == 0:
            return np.zeros(len(idx))
        free = view.gpu_free[idx]
        full = view.full_count[idx]
        count = view.gpu_count[idx]
        idle = full == count
        out = np.maximum(33 - full, full).astype(np.float64)
        if pod.gpu_milli >= 1000:
            used = np.full(len(idx), float(max(50 - pod.num_gpu, 33)))
        else:
            # the tightest device that fits (the authors sort devices by free, ascending)
            tight = np.where(free >= pod.gpu_milli, free, np.iinfo(np.int64).max).min(axis=1)
            if self.options.integer_scores:
                shared = 100 - (tight * 100 // 1000) // 10
            else:
                shared = 100 - tight / 100
            used = np.where(tight == 1000, 49.0, np.maximum(shared, 50).astype(np.float64))
        return np.where(idle, out, used)


class GpuClustering(ScoredAllocator):
    """Keep pods of one GPU affinity together (the authors' ``GpuClusteringScore``; the
    affinity is *sharing* or *k whole GPUs*): a node holding only pods of the pod's
    affinity scores 75–100, one holding that and others 50–75, an idle node 25–50, one
    holding only other affinities 0–25, each ``+ 25 × (8000 − free milli-GPU)/8000``
    (integer division); a CPU-only pod scores 0 everywhere (ties)."""

    name = "gpu_clustering"
    description = "put pods of one GPU affinity together (FGD's GpuClustering)"

    def score(self, pod, view, idx):
        if pod.num_gpu == 0:
            return np.zeros(len(idx))
        tags = view.tag_count[idx] > 0
        kinds = tags.sum(axis=1)
        has = tags[:, pod.tag]
        left = view.free_total[idx]
        fill = 25.0 * (MAX_GPU - left) / MAX_GPU
        if self.options.integer_scores:
            fill = np.trunc(fill)
        base = np.where(has, np.where(kinds == 1, 75.0, 50.0),
                        np.where(kinds == 0, 25.0, 0.0))
        return base + fill
