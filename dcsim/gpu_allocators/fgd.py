"""FGD, Fragmentation Gradient Descent (Weng et al., ATC'23, §4; the authors'
``fgd_score.go``): place each pod where it raises the cluster's GPU fragmentation least.

For a feasible node the score is ``100 × sigmoid(Δ / 1000)``, with ``Δ`` the drop of the
node's fragmentation (:mod:`dcsim.gpu.frag`; milli-GPU, negative when it rises) if the pod
went there; with ``integer_scores`` (the authors') it is truncated to an integer before the
highest is taken, ties broken by the seeded node order. A GPU-sharing pod tries every
device with enough free and keeps the one with the highest (integer) score, the lowest
index among equals (``device: frag``; ``best``, ``worst``, ``random`` or ``first`` score
each node by the device that rule picks instead); a pod of k whole GPUs takes the node's
first k fully free devices; a CPU-only pod changes only the node's free cpu (it can still
raise the node's fragmentation: typical pods that no longer find enough cpu cannot use its
GPUs).

The typical pods are the run's (``gpu.typical``: the authors' 95 % of the pod list's pods,
CPU-only pods included).

**Speed.** A node's score for a pod depends only on the pod's request (cpu, GPU share,
number of GPUs) and the node's state, and a placement changes one node. So the scores of
each request class are kept per node, with the node's :attr:`~dcsim.gpu.cluster.GpuCluster.
version` when they were computed, and only the nodes changed since are computed again:
the same choices as computing every node every time (``cache: false``), far fewer numpy
elements. (With ``device: random`` nothing is kept: the device is drawn for every pod.)
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from dcsim.gpu.cluster import MILLI, GpuClusterView, GpuPod
from dcsim.gpu_allocators.base import GpuContext, ScoredAllocator, share_devices, whole_devices


def fgd_score(delta: np.ndarray) -> np.ndarray:
    """``100 × sigmoid(delta / 1000)`` (the authors' ``sigmoid(x/1000) × MaxNodeScore``)."""
    return 100.0 / (1.0 + np.exp(-delta / 1000.0))


class _Scores:
    """One request class's per-node scores and devices, and the node versions they are
    for."""

    __slots__ = ("version", "score", "device")

    def __init__(self, n: int):
        self.version = np.full(n, -1, dtype=np.int64)
        self.score = np.zeros(n)
        self.device = np.zeros(n, dtype=np.int64)


class Fgd(ScoredAllocator):
    """FGD (see the module docstring)."""

    name = "fgd"
    description = "the node and device that raise GPU fragmentation least (FGD, ATC'23)"

    class Options(ScoredAllocator.Options):
        #: ``frag``: the device that raises fragmentation least (the authors'); the others
        #: score each node by the device that rule picks (the baselines' rules)
        device: Literal["frag", "best", "worst", "random", "first"] = "frag"
        cache: bool = True

    def setup(self, view: GpuClusterView, context: GpuContext) -> None:
        super().setup(view, context)
        self.frag = context.frag
        self.cache: dict[tuple[int, int, int], _Scores] = {}
        # a random device is drawn anew for every pod, so its scores are not kept
        self._cached = self.options.cache and self.options.device != "random"

    def node_scores(self, pod: GpuPod, view: GpuClusterView, idx: np.ndarray):
        """Scores and devices (−1: none chosen) of the nodes ``idx`` for ``pod``,
        computed."""
        delta = self.frag.delta(view, idx, pod)
        raw = fgd_score(delta)
        if pod.num_gpu == 0 or pod.gpu_milli >= MILLI:
            return raw[:, 0], np.full(len(idx), -1, dtype=np.int64)
        if self.options.device != "frag":
            device = share_devices(view.gpu_free[idx], pod.gpu_milli, self.options.device,
                                   self.rng)
        else:
            scored = np.trunc(raw) if self.options.integer_scores else raw
            scored = np.where(np.isnan(scored), -np.inf, scored)
            device = scored.argmax(axis=1)       # the lowest index among equal scores
        return raw[np.arange(len(idx)), device], device

    def score(self, pod: GpuPod, view: GpuClusterView, idx: np.ndarray) -> np.ndarray:
        if not self._cached:
            score, self._device = self.node_scores(pod, view, idx)
            self._idx = idx
            return score
        key = (pod.cpu, pod.gpu_milli, pod.num_gpu)
        entry = self.cache.get(key)
        if entry is None:
            entry = self.cache[key] = _Scores(view.n_nodes)
        version = view.version
        stale = idx[entry.version[idx] != version[idx]]
        if len(stale):
            s, d = self.node_scores(pod, view, stale)
            entry.score[stale] = s
            entry.device[stale] = d
            entry.version[stale] = version[stale]
        self._entry = entry
        return entry.score[idx]

    def devices(self, pod: GpuPod, view: GpuClusterView, node: int) -> tuple[int, ...]:
        if pod.num_gpu == 0:
            return ()
        if pod.gpu_milli >= MILLI:
            return whole_devices(view, node, pod.num_gpu)
        if not self._cached:
            return (int(self._device[np.searchsorted(self._idx, node)]),)
        return (int(self._entry.device[node]),)
