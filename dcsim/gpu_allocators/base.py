"""The GPU allocator interface (``mode: gpu``): choose the node and the GPU devices of each
arriving pod, or reject it.

A GPU allocator is a :class:`dcsim.plugin_base.Configurable` like every dcsim plugin:
``name``, ``description``, a nested pydantic ``Options`` model, registered through the
``register_gpu_allocators`` hook (plugin kind ``"gpu_allocator"``). :meth:`GpuAllocator.
allocate` returns ``(node, devices)`` — the node index and a tuple of device indices (one
for a GPU-sharing pod, k for a pod of k whole GPUs, none for a CPU-only pod) — or None. It
reads the cluster through a :class:`~dcsim.gpu.cluster.GpuClusterView` (read-only arrays,
``feasible(pod)``, ``copy()``); the engine validates the choice (an invalid one is a
:class:`~dcsim.errors.PluginError` naming the allocator) and places the pod.

:class:`ScoredAllocator` is the Kubernetes scheduling cycle the FGD authors' simulator runs:
*filter* (the nodes where the pod fits: :meth:`~dcsim.gpu.cluster.GpuCluster.feasible`),
*score* each feasible node (:meth:`ScoredAllocator.score`), pick the highest, then pick the
devices inside it. The behaviours of that simulator that the paper does not state are its
options, with the authors' choice as the default:

* ``integer_scores`` (default true): a Kubernetes score is an integer 0–100, so every score
  is truncated (``int64(…)`` in Go) before the highest is taken; many nodes then tie.
* ``tie_break``: ``node_order`` (default) — the authors' patched scheduler keeps the node
  whose name sorts first, and their simulator prefixes every node's name with its place in
  a seeded random permutation, so ties go to the first node of one random order fixed for
  the run; ``random`` — upstream Kubernetes (a uniform choice among the tied nodes, anew
  each time); ``first`` — the lowest node index.

* ``cpu_pods``: ``score`` (default) — a CPU-only pod is scored like any other (each
  policy's own formula; GPU packing and GPU clustering give every node 0, so the node order
  decides); ``tie`` — every feasible node ties for a CPU-only pod, so it goes where the
  tie-break puts it.

A pod of k whole GPUs always gets its node's first k fully free devices (the authors'
``AllocateExclusiveGpuId``). A GPU-sharing pod's device is the ``device`` option: ``best``
(the device with the least free that fits; the authors' default), ``worst``, ``random`` or
``first`` (lowest index); FGD's default is its own (``frag``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Literal

import numpy as np

from dcsim.gpu.cluster import MILLI, GpuClusterView, GpuPlacement, GpuPod
from dcsim.gpu.frag import FragModel, TypicalPods
from dcsim.gpu.trace import PodTable
from dcsim.plugin_base import Configurable, view_last

Choice = tuple[int, tuple[int, ...]]


@dataclass(frozen=True)
class GpuContext:
    """What a run tells its allocator before the first pod: the pod list as read (before
    ordering and inflation), its typical pods (the run's ``gpu.typical`` settings) and the
    fragmentation model over them."""

    pods: PodTable
    typical: TypicalPods
    frag: FragModel


class GpuAllocator(Configurable, ABC):
    """Choose the node and devices of each arriving pod, or reject it (see the module
    docstring). ``self.rng`` is the run's plugin generator. :meth:`setup` is called once
    before the first pod."""

    kind = "gpu_allocator"

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        view_last(cls, "allocate", ("cluster", "view"), "(pod, view)")
        view_last(cls, "score", ("cluster", "view"), "(pod, view, idx)")
        view_last(cls, "devices", ("cluster", "view"), "(pod, view, node)")

    def setup(self, view: GpuClusterView, context: GpuContext) -> None:  # noqa: B027
        """Called once before the first pod (default: nothing)."""

    @abstractmethod
    def allocate(self, pod: GpuPod, view: GpuClusterView) -> Choice | None:
        """``(node, devices)`` for ``pod`` in the live cluster ``view`` (read-only), or None
        to reject it. The pod first, the view last, like every plugin kind (the old
        ``allocate(cluster, pod)`` still works, with a DeprecationWarning)."""

    def released(self, pod: GpuPod, placement: GpuPlacement,  # noqa: B027 - optional hook
                 view: GpuClusterView) -> None:
        """Called after ``pod`` left ``placement`` and its resources were given back (with
        ``gpu.arrivals``): at its departure, or when a node failure interrupts it (it may
        then be offered to :meth:`allocate` again). Default: nothing."""

    def failed(self, kind: str, index: int, view: GpuClusterView) -> None:  # noqa: B027
        """Called when node ``index`` fails (``kind`` ``"server"``, as the ``failures:``
        section names nodes), after its pods were released and before any is placed again;
        it offers nothing until :meth:`repaired`. Default: nothing."""

    def repaired(self, kind: str, index: int, view: GpuClusterView) -> None:  # noqa: B027
        """Called when a failed node is back with its whole capacity. Default: nothing."""


def whole_devices(cluster: GpuClusterView, node: int, k: int) -> tuple[int, ...]:
    """The first ``k`` fully free devices of ``node``, by index."""
    return tuple(int(d) for d in np.flatnonzero(cluster.gpu_free[node] == MILLI)[:k])


def pod_devices(cluster: GpuClusterView, pod: GpuPod, node: int, how: str,
                rng: np.random.Generator) -> tuple[int, ...]:
    """The devices ``pod`` gets on ``node``: none for a CPU-only pod, the first k fully free
    for k whole GPUs, the one ``how`` picks for a share of one GPU (:func:`share_devices`)."""
    if pod.num_gpu == 0:
        return ()
    if pod.gpu_milli >= MILLI:
        return whole_devices(cluster, node, pod.num_gpu)
    return (share_device(cluster, node, pod.gpu_milli, how, rng),)


def share_device(cluster: GpuClusterView, node: int, milli: int, how: str,
                 rng: np.random.Generator) -> int:
    """The device of ``node`` a pod of ``milli`` milli-GPU gets under ``how``."""
    return int(share_devices(cluster.gpu_free[[node]], milli, how, rng)[0])


def share_devices(free: np.ndarray, milli: int, how: str,
                  rng: np.random.Generator) -> np.ndarray:
    """Per row of ``free`` (``[B, G]`` free milli-GPU; each row with a device that fits),
    the device a pod of ``milli`` gets under ``how``: ``best`` the least free that fits,
    ``worst`` the most, ``random`` a uniform one, ``first`` the lowest index (ties: the
    lowest index)."""
    fits = free >= milli
    big = np.iinfo(np.int64).max
    if how == "best":
        return np.where(fits, free, big).argmin(axis=1)
    if how == "worst":
        return np.where(fits, free, -1).argmax(axis=1)
    if how == "random":
        return np.where(fits, rng.random(free.shape), -1.0).argmax(axis=1)
    return fits.argmax(axis=1)


class ScoredAllocator(GpuAllocator):
    """Filter, score, pick the best node, pick its devices (see the module docstring).
    Subclasses implement :meth:`score`; one with its own device choice overrides
    :meth:`devices`."""

    class Options(GpuAllocator.Options):
        integer_scores: bool = True
        tie_break: Literal["node_order", "random", "first"] = "node_order"
        device: Literal["best", "worst", "random", "first"] = "best"
        cpu_pods: Literal["score", "tie"] = "score"

    def setup(self, view: GpuClusterView, context: GpuContext) -> None:
        # the authors' node names carry a seeded random rank; ties go to the lowest
        self.rank = self.rng.permutation(view.n_nodes)
        self.context = context

    @abstractmethod
    def score(self, pod: GpuPod, view: GpuClusterView, idx: np.ndarray) -> np.ndarray:
        """The score (higher is better) of each feasible node ``idx``, as a float; with
        ``integer_scores`` it is truncated to an integer before the highest is taken."""

    def devices(self, pod: GpuPod, view: GpuClusterView, node: int) -> tuple[int, ...]:
        """The devices ``pod`` gets on ``node``."""
        return pod_devices(view, pod, node, self.options.device, self.rng)

    def pick(self, idx: np.ndarray, scores: np.ndarray) -> int:
        """The node of ``idx`` with the highest score, ties broken by ``tie_break``."""
        if self.options.integer_scores:
            scores = np.trunc(scores)
        tied = idx[scores == scores.max()]
        if len(tied) == 1:
            return int(tied[0])
        how = self.options.tie_break
        if how == "node_order":
            return int(tied[np.argmin(self.rank[tied])])
        if how == "random":
            return int(tied[self.rng.integers(len(tied))])
        return int(tied[0])

    def allocate(self, pod: GpuPod, view: GpuClusterView) -> Choice | None:
        idx = np.flatnonzero(view.feasible(pod))
        if len(idx) == 0:
            return None
        if pod.num_gpu == 0 and self.options.cpu_pods == "tie":
            scores = np.zeros(len(idx))
        else:
            scores = np.asarray(self.score(pod, view, idx), dtype=np.float64)
        node = self.pick(idx, scores)
        return node, self.devices(pod, view, node)
