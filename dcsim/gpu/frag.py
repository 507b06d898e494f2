"""GPU fragmentation as FGD defines it (Weng et al., ATC'23, §3; the authors'
``pkg/utils/frag.go``): the *typical pods* of a workload and how much of a node's free GPU
capacity each of them could not use.

**Typical pods** (:func:`typical_pods`). The workload's pods grouped by request (cpu,
milli-GPU per device, number of GPUs, accepted GPU models; memory plays no part), most
frequent first (ties: the larger request first, the authors' order), kept until they cover
``threshold`` of the pods (the authors: 95 %, adding ``step`` = 1 class at a time), their
frequencies renormalised to sum to 1. ``cpu_pods: false`` leaves CPU-only pods out (the
authors keep them).

**A node's fragmentation for one typical pod** ``t`` (milli-GPU), with ``F`` the node's
free milli-GPU:

* ``t`` asks for no GPU: ``F`` (all of it; the authors' ``xl_satisfied``/``xr_lack_cpu``);
* the node's GPU model is not one ``t`` accepts: ``F`` (``no_access``);
* ``t`` fits: enough cpu and at least ``num_gpu`` devices with ``gpu_milli`` free: the free
  milli-GPU of the devices with less than ``gpu_milli`` free (``q3_satisfied``, its
  ``q2_lack_gpu`` part);
* otherwise (too little cpu, or too few devices with enough free): ``F``.

Memory is not looked at (the authors' definition). The node's fragmentation is the
frequency-weighted sum over the typical pods; the cluster's is the sum over nodes, and the
*fragmentation ratio* is that over the cluster's free milli-GPU.

:class:`FragModel` computes it for many node states at once (numpy over nodes × devices ×
typical pods) and, for FGD, the change a placement would make (:meth:`FragModel.delta`)
from per-node statistics, without building the states after.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dcsim.gpu.cluster import MILLI, GpuCluster, GpuPod


@dataclass(frozen=True)
class TypicalPods:
    """Typical pods: one row per request class, ``freq`` summing to 1."""

    cpu: np.ndarray
    gpu_milli: np.ndarray
    num_gpu: np.ndarray
    types: tuple[tuple[str, ...], ...]
    freq: np.ndarray
    #: the share of the workload's pods the kept classes cover (before renormalising)
    coverage: float = 1.0

    def __len__(self) -> int:
        return len(self.freq)


def typical_pods(cpu, gpu_milli, num_gpu, types, *, threshold: float = 0.95, step: int = 1,
                 cpu_pods: bool = True) -> TypicalPods:
    """The typical pods of the requests given column by column (see the module
    docstring); ``types`` is one tuple of GPU models per pod (empty: any)."""
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    if step < 1:
        raise ValueError(f"step must be at least 1, got {step}")
    counts: dict[tuple, int] = {}
    for c, m, k, t in zip(np.asarray(cpu).tolist(), np.asarray(gpu_milli).tolist(),
                          np.asarray(num_gpu).tolist(), types, strict=True):
        if not cpu_pods and k == 0:
            continue
        # a CPU-only pod's GPU fields do not distinguish it (the authors read them as 0)
        key = (int(c), int(m), int(k), "|".join(t)) if k else (int(c), 0, 0, "")
        counts[key] = counts.get(key, 0) + 1
    if not counts:
        raise ValueError("no pod to take the typical pods from")
    total = sum(counts.values())
    # most frequent first; ties: the larger (cpu, milli, num, types) first (frag.go sorts
    # by sort.Reverse of (count, cpu, milli, num, type))
    order = sorted(counts, key=lambda k: (counts[k], k), reverse=True)
    kept, cum = 0, 0
    # cum / total, not threshold × total: 0.07 × 100 is 7.000000000000001 in floating point
    while cum / total < threshold and kept < len(order):
        for key in order[kept:kept + step]:
            cum += counts[key]
        kept = min(kept + step, len(order))
    keys = order[:kept]
    freq = np.array([counts[k] for k in keys], dtype=np.float64) / cum
    return TypicalPods(
        cpu=np.array([k[0] for k in keys], dtype=np.int64),
        gpu_milli=np.array([k[1] for k in keys], dtype=np.int64),
        num_gpu=np.array([k[2] for k in keys], dtype=np.int64),
        types=tuple(tuple(k[3].split("|")) if k[3] else () for k in keys),
        freq=freq, coverage=cum / total)


class FragModel:
    """The fragmentation of a cluster's nodes for one set of typical pods."""

    def __init__(self, typical: TypicalPods, models: tuple[str, ...]):
        self.typical = typical
        self.freq = typical.freq
        self.tcpu = typical.cpu
        self.tmilli = typical.gpu_milli
        self.tnum = typical.num_gpu
        # acc[code, t]: typical pod t may use GPUs of model `code` (last row: no GPU)
        acc = np.zeros((len(models) + 1, len(typical)), dtype=bool)
        for j, types in enumerate(typical.types):
            for i, m in enumerate(models):
                acc[i, j] = not types or m in types
        # t asks for a GPU and the model is one it accepts; a CPU-only node's F is 0
        self._base = acc & (self.tmilli > 0)[None, :]

    def base(self, code: np.ndarray) -> np.ndarray:
        """``[B, T]``: typical pod t asks for a GPU of a model node b has."""
        return self._base[code]   # code -1 reads the last row (no GPU)

    # -- per-node statistics ---------------------------------------------------------------
    def stats(self, cpu: np.ndarray, gpu: np.ndarray):
        """For node states (``cpu[B]`` free milli-cpu, ``gpu[B, G]`` free milli-GPU per
        device): ``cnt[B, T]`` devices with at least t's milli-GPU free, ``s[B, T]`` the
        free milli-GPU of the others, ``F[B]`` all free milli-GPU."""
        fits = gpu[:, :, None] >= self.tmilli[None, None, :]
        cnt = fits.sum(axis=1)
        s = np.where(fits, 0, gpu[:, :, None]).sum(axis=1)
        return cnt, s, gpu.sum(axis=1)

    def amounts(self, base, cpu, cnt, s, F) -> np.ndarray:
        """``[..., T]`` milli-GPU typical pod t cannot use (integers), broadcasting
        ``base``/``cnt``/``s`` (``[..., T]``) with ``cpu``/``F`` (``[...]``)."""
        fit = base & (cnt >= self.tnum) & (cpu[..., None] >= self.tcpu)
        return np.where(fit, s, F[..., None])

    def node_amounts(self, cluster: GpuCluster, idx=slice(None)) -> np.ndarray:
        """``[B, T]`` for the nodes ``idx`` of ``cluster`` as they are."""
        cpu = cluster.cpu_free[idx]
        cnt, s, F = self.stats(cpu, cluster.gpu_free[idx])
        return self.amounts(self.base(cluster.model_code[idx]), cpu, cnt, s, F)

    def node_frag(self, cluster: GpuCluster, idx=slice(None)) -> np.ndarray:
        """Fragmentation (milli-GPU) of the nodes ``idx``."""
        return self.weighted(self.node_amounts(cluster, idx))

    def weighted(self, amounts: np.ndarray) -> np.ndarray:
        """``Σ_t freq[t] × amounts[..., t]``: numpy's sum along the last axis, not a matrix
        product, so each node's value is the same floats however many nodes are computed
        with it (BLAS's product varied in the last bits with the batch's shape, which made
        FGD's kept scores differ from recomputed ones on equal scores)."""
        return (amounts * self.freq).sum(axis=-1)

    # -- the change a placement makes --------------------------------------------------------
    def delta(self, cluster: GpuCluster, idx: np.ndarray, pod: GpuPod) -> np.ndarray:
        """How much placing ``pod`` on each node of ``idx`` would *lower* the node's
        fragmentation (before − after; negative when it rises), milli-GPU.

        A GPU-sharing pod: ``[B, G]``, one value per device (NaN where the device has too
        little free); a pod of k whole GPUs: ``[B, 1]``, taking the node's first k fully
        free devices; a CPU-only pod: ``[B, 1]``. The states after are not built: each is
        the node's statistics with the devices the pod takes changed."""
        cpu = cluster.cpu_free[idx]
        gpu = cluster.gpu_free[idx]
        base = self.base(cluster.model_code[idx])
        cnt, s, F = self.stats(cpu, gpu)
        before = self.amounts(base, cpu, cnt, s, F)
        cpu2 = cpu - pod.cpu
        if pod.num_gpu == 0:
            after = self.amounts(base, cpu2, cnt, s, F)
            return self.weighted(before - after)[:, None]
        if pod.gpu_milli >= MILLI:
            # full devices fit every typical pod (milli ≤ 1000) and, emptied, none that
            # asks for a GPU; their 0 free adds nothing to s
            after = self.amounts(base, cpu2, cnt - pod.num_gpu, s, F - MILLI * pod.num_gpu)
            return self.weighted(before - after)[:, None]
        m = pod.gpu_milli
        f = gpu[:, :, None]                      # [B, G, 1]
        f2 = f - m
        tm = self.tmilli[None, None, :]
        fb, fa = f >= tm, f2 >= tm               # [B, G, T]
        cnt2 = cnt[:, None, :] - fb + fa
        s2 = s[:, None, :] - np.where(fb, 0, f) + np.where(fa, 0, f2)
        after = self.amounts(base[:, None, :], np.broadcast_to(cpu2[:, None], f.shape[:2]),
                             cnt2, s2, (F - m)[:, None])
        out = self.weighted(before[:, None, :] - after)
        return np.where(gpu >= m, out, np.nan)
