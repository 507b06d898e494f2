"""A GPU-sharing cluster (FGD, Weng et al., ATC'23): nodes with cpu, memory and GPU
devices, pods that ask for a share of one GPU or for whole GPUs, and the state that places
and releases them device by device.

Units are the trace's: cpu in milli-cores, memory in MiB, GPU in milli-GPU (a device has
:data:`MILLI` = 1000). A node holds ``gpus`` devices of one ``model`` (none on a CPU-only
node). A pod (:class:`GpuPod`) asks for ``cpu``, ``mem`` and one of:

* nothing more (``num_gpu == 0``): a CPU-only pod;
* ``gpu_milli < 1000`` of ONE device (``num_gpu == 1``): a GPU-sharing pod, placed on one
  device with at least that much free;
* ``num_gpu = k`` whole devices (``gpu_milli == 1000``): k fully free devices of one node.

It may accept only some GPU models (``types``; empty: any). A placement
(:class:`GpuPlacement`) records the node and the devices it took; :meth:`GpuCluster.reserve`
validates it (cpu, memory, type, each device's free share; never negative, never above a
device's capacity) and :meth:`GpuCluster.release` gives it back exactly once.

Devices are a ``nodes × G`` array (``G`` the most GPUs a node has); a node with fewer GPUs
has devices of capacity 0 past its last (``gpu_cap`` 0, never free, never chosen).

A node may be **down** (a failure, :meth:`GpuCluster.set_down`): it must hold no pod, it has
nothing free (cpu, memory and every device read 0, so no filter passes it) and no placement
on it is valid until it is brought back, with its whole capacity free.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dcsim.errors import StateError
from dcsim.readonly import ReadOnlyView

#: milli-GPU of one device
MILLI = 1000
#: columns of the per-node pod counts by GPU affinity (:attr:`GpuCluster.tag_count`):
#: 0 GPU-sharing pods, k (1..8) pods of k whole GPUs
N_TAGS = 9


@dataclass(frozen=True, slots=True)
class GpuPod:
    """One pod's request (see the module docstring). ``id`` is its place in the run's
    arrival order; ``source`` its row in the pod list (inflated copies share it)."""

    id: int
    cpu: int
    mem: int
    num_gpu: int
    gpu_milli: int
    types: tuple[str, ...] = ()
    name: str = ""
    source: int = -1

    @property
    def kind(self) -> str:
        """``cpu`` (no GPU), ``share`` (part of one device) or ``whole`` (k devices)."""
        if self.num_gpu == 0:
            return "cpu"
        return "share" if self.gpu_milli < MILLI else "whole"

    @property
    def total_gpu_milli(self) -> int:
        """The pod's GPU request in milli-GPU (``num_gpu × gpu_milli``)."""
        return self.num_gpu * self.gpu_milli

    @property
    def tag(self) -> int:
        """Its column of :attr:`GpuCluster.tag_count`: 0 sharing, k whole GPUs; −1 none."""
        if self.num_gpu == 0:
            return -1
        return 0 if self.gpu_milli < MILLI else self.num_gpu


@dataclass(slots=True)
class GpuPlacement:
    """Where a pod went: its node and devices (each giving ``per_device`` milli-GPU).
    ``active`` turns False when it is released (a second release is a StateError)."""

    pod: GpuPod
    node: int
    devices: tuple[int, ...]
    per_device: int
    active: bool = field(default=True)


@dataclass(frozen=True)
class GpuNodes:
    """The nodes of a cluster as read from a node list: names, capacities, GPU models."""

    names: tuple[str, ...]
    cpu: np.ndarray      # milli-cores
    mem: np.ndarray      # MiB
    gpus: np.ndarray     # devices per node
    model: tuple[str, ...]  # "" for a CPU-only node

    def __post_init__(self) -> None:
        n = len(self.names)
        for name in ("cpu", "mem", "gpus"):
            a = np.asarray(getattr(self, name), dtype=np.int64)
            if a.shape != (n,):
                raise ValueError(f"GpuNodes.{name}: {a.shape} values for {n} nodes")
            if (a < 0).any():
                raise ValueError(f"GpuNodes.{name}: negative values")
            object.__setattr__(self, name, a)
        if len(self.model) != n:
            raise ValueError(f"GpuNodes.model: {len(self.model)} values for {n} nodes")

    def __len__(self) -> int:
        return len(self.names)

    def take(self, index) -> GpuNodes:
        """The nodes at ``index`` (an index array or mask), in that order."""
        idx = np.arange(len(self))[index]
        return GpuNodes(tuple(self.names[i] for i in idx), self.cpu[idx], self.mem[idx],
                        self.gpus[idx], tuple(self.model[i] for i in idx))


class GpuCluster:
    """The live state of a GPU cluster (see the module docstring).

    Arrays (one row per node): ``cpu_cap``/``cpu_free`` (milli-cores), ``mem_cap``/
    ``mem_free`` (MiB), ``gpu_count``, ``gpu_cap``/``gpu_free`` (``nodes × G`` milli-GPU),
    ``max_free``, ``full_count`` and ``free_total`` (per node, the most free milli-GPU on one
    device, the fully free devices and all free milli-GPU, kept with ``gpu_free``),
    ``model_code`` (index into ``models``; −1 for a CPU-only node), ``tag_count``
    (``nodes × max(9, G + 1)`` pods present by GPU affinity: column 0 sharing pods, k pods
    of k whole GPUs; GPU clustering reads it), ``pods_on`` and ``version`` (changes so far).
    """

    def __init__(self, nodes: GpuNodes):
        self.nodes = nodes
        n = len(nodes)
        self.n_nodes = n
        self.models: tuple[str, ...] = tuple(sorted({m for m in nodes.model if m}))
        code = {m: i for i, m in enumerate(self.models)}
        self.model_code = np.array([code[m] if m else -1 for m in nodes.model],
                                   dtype=np.int64)
        g = int(nodes.gpus.max()) if n else 0
        self.max_gpus = g
        self.cpu_cap = nodes.cpu.copy()
        self.mem_cap = nodes.mem.copy()
        self.gpu_count = nodes.gpus.copy()
        self.gpu_cap = np.where(np.arange(g)[None, :] < self.gpu_count[:, None], MILLI,
                                0).astype(np.int64)
        self.cpu_free = self.cpu_cap.copy()
        self.mem_free = self.mem_cap.copy()
        self.gpu_free = self.gpu_cap.copy()
        # a column per whole-GPU count a node can hold (nodes of more than 8 GPUs too)
        #: per node, the most free milli-GPU on one device, the fully free devices and all
        #: free milli-GPU (kept with gpu_free, so that the filter and the scores read one
        #: value per node)
        self.max_free = self.gpu_free.max(axis=1, initial=0)
        self.full_count = (self.gpu_free == MILLI).sum(axis=1)
        self.free_total = self.gpu_free.sum(axis=1)
        self.tag_count = np.zeros((n, max(N_TAGS, g + 1)), dtype=np.int64)
        self.pods_on = np.zeros(n, dtype=np.int64)
        #: per node, whether it is down (a failure; :meth:`set_down`)
        self.down = np.zeros(n, dtype=bool)
        #: per node, how many times it changed (a cache of per-node values is stale where
        #: this differs from when it was filled)
        self.version = np.zeros(n, dtype=np.int64)

    # -- totals --------------------------------------------------------------------------
    @property
    def total_gpus(self) -> int:
        return int(self.gpu_count.sum())

    @property
    def total_gpu_milli(self) -> int:
        return int(self.gpu_cap.sum())

    def used_gpu_milli(self) -> int:
        """Milli-GPU placed (a down node holds none)."""
        return int(self.gpu_cap.sum() - self.gpu_free.sum() - self.down_gpu_milli())

    def down_gpu_milli(self) -> int:
        """Milli-GPU of the nodes that are down."""
        return int(self.gpu_cap[self.down].sum()) if self.down.any() else 0

    def gpu_free_total(self) -> np.ndarray:
        """Free milli-GPU per node."""
        return self.free_total.copy()

    def full_free(self) -> np.ndarray:
        """Fully free devices per node."""
        return self.full_count.copy()

    # -- queries -------------------------------------------------------------------------
    def type_codes(self, types: tuple[str, ...]) -> np.ndarray | None:
        """The model codes of ``types`` that the cluster has (None: any model)."""
        if not types:
            return None
        return np.array([self.models.index(t) for t in types if t in self.models],
                        dtype=np.int64)

    def accessible(self, pod: GpuPod) -> np.ndarray:
        """Per node, whether the pod may use its GPUs: any GPU node when the pod names no
        model, else the nodes of a model it names (a CPU-only node never)."""
        codes = self.type_codes(pod.types)
        if codes is None:
            return self.model_code >= 0
        return np.isin(self.model_code, codes)

    def feasible(self, pod: GpuPod) -> np.ndarray:
        """Per node, whether ``pod`` fits now (cpu, memory and, for a GPU pod, a model it
        accepts and the devices it needs): the Kubernetes filter stage."""
        ok = (self.cpu_free >= pod.cpu) & (self.mem_free >= pod.mem) & ~self.down
        if pod.num_gpu == 0:
            return ok
        ok &= self.accessible(pod)
        if pod.gpu_milli < MILLI:
            return ok & (self.max_free >= pod.gpu_milli)
        return ok & (self.full_count >= pod.num_gpu)

    def reason(self, pod: GpuPod, node: int, devices: tuple[int, ...]) -> str | None:
        """Why placing ``pod`` on ``node``'s ``devices`` is invalid, or None when it is
        valid."""
        if not 0 <= node < self.n_nodes:
            return f"node {node} is not a node of the cluster (0..{self.n_nodes - 1})"
        if self.down[node]:
            return f"node {node} is down"
        if self.cpu_free[node] < pod.cpu:
            return f"node {node} has {self.cpu_free[node]} milli-cpu free, the pod asks {pod.cpu}"
        if self.mem_free[node] < pod.mem:
            return f"node {node} has {self.mem_free[node]} MiB free, the pod asks {pod.mem}"
        if pod.num_gpu == 0:
            return None if not devices else "a CPU-only pod takes no GPU device"
        codes = self.type_codes(pod.types)
        mc = int(self.model_code[node])
        if mc < 0:
            return f"node {node} has no GPU"
        if codes is not None and mc not in codes:
            return (f"node {node}'s GPUs are {self.models[mc]}, the pod accepts only "
                    f"{'|'.join(pod.types)}")
        if len(devices) != pod.num_gpu:
            return f"the pod needs {pod.num_gpu} device(s), got {len(devices)}"
        if len(set(devices)) != len(devices):
            return f"devices {list(devices)} repeat a device"
        for d in devices:
            if not 0 <= d < self.gpu_count[node]:
                return f"node {node} has no device {d} (it has {self.gpu_count[node]})"
            need = pod.gpu_milli
            if self.gpu_free[node, d] < need:
                return (f"device {d} of node {node} has {self.gpu_free[node, d]} milli-GPU "
                        f"free, the pod needs {need}")
        return None

    # -- changes -------------------------------------------------------------------------
    def reserve(self, pod: GpuPod, node: int, devices: tuple[int, ...]) -> GpuPlacement:
        """Place ``pod`` on ``node``'s ``devices``; a StateError says why when it does not
        fit."""
        why = self.reason(pod, node, devices)
        if why is not None:
            raise StateError(f"pod {pod.id}: {why}")
        self.cpu_free[node] -= pod.cpu
        self.mem_free[node] -= pod.mem
        for d in devices:
            self.gpu_free[node, d] -= pod.gpu_milli
        self._devices_changed(node)
        if pod.tag >= 0:
            self.tag_count[node, pod.tag] += 1
        self.pods_on[node] += 1
        self.version[node] += 1
        return GpuPlacement(pod, node, tuple(int(d) for d in devices), pod.gpu_milli)

    def release(self, p: GpuPlacement) -> None:
        """Give back what ``p`` took; a StateError if it was released already or would
        raise a free share above its capacity."""
        if not p.active:
            raise StateError(f"pod {p.pod.id}: released twice")
        n = p.node
        if (self.cpu_free[n] + p.pod.cpu > self.cpu_cap[n]
                or self.mem_free[n] + p.pod.mem > self.mem_cap[n]
                or any(self.gpu_free[n, d] + p.per_device > self.gpu_cap[n, d]
                       for d in p.devices)):
            raise StateError(f"pod {p.pod.id}: release would exceed node {n}'s capacity")
        self.cpu_free[n] += p.pod.cpu
        self.mem_free[n] += p.pod.mem
        for d in p.devices:
            self.gpu_free[n, d] += p.per_device
        self._devices_changed(n)
        if p.pod.tag >= 0:
            self.tag_count[n, p.pod.tag] -= 1
        self.pods_on[n] -= 1
        self.version[n] += 1
        p.active = False

    def set_down(self, node: int, down: bool) -> None:
        """Mark ``node`` failed (it must hold no pod; nothing on it is free) or repaired
        (its whole capacity free again); a StateError for a node that holds pods or is
        already in that state."""
        n = int(node)
        if bool(self.down[n]) == down:
            raise StateError(f"node {n} is already {'down' if down else 'up'}")
        if down and self.pods_on[n]:
            raise StateError(f"node {n} still holds {self.pods_on[n]} pod(s); release them "
                             "first")
        self.down[n] = down
        self.cpu_free[n] = 0 if down else self.cpu_cap[n]
        self.mem_free[n] = 0 if down else self.mem_cap[n]
        self.gpu_free[n] = 0 if down else self.gpu_cap[n]
        self._devices_changed(n)
        self.version[n] += 1

    def _devices_changed(self, node: int) -> None:
        row = self.gpu_free[node]
        self.max_free[node] = row.max(initial=0)
        self.full_count[node] = int((row == MILLI).sum())
        self.free_total[node] = int(row.sum())

    def check(self) -> None:
        """Raise StateError if any free amount is negative or above its capacity, or the
        per-node summaries of the devices drifted from them."""
        for name, free, cap in (("cpu", self.cpu_free, self.cpu_cap),
                                ("mem", self.mem_free, self.mem_cap),
                                ("gpu", self.gpu_free, self.gpu_cap)):
            if (free < 0).any() or (free > cap).any():
                raise StateError(f"{name}: a free amount is outside [0, capacity]")
        d = self.down
        if d.any() and ((self.pods_on[d] != 0).any() or self.cpu_free[d].any()
                        or self.mem_free[d].any() or self.gpu_free[d].any()):
            raise StateError("a node that is down holds pods or has something free")
        if (self.max_free != self.gpu_free.max(axis=1, initial=0)).any() or (
                self.full_count != (self.gpu_free == MILLI).sum(axis=1)).any() or (
                self.free_total != self.gpu_free.sum(axis=1)).any():
            raise StateError("gpu: the per-node device summaries drifted")

    def copy(self) -> GpuCluster:
        """A private copy (the nodes' description is shared; it never changes)."""
        out = object.__new__(GpuCluster)
        out.__dict__.update(self.__dict__)
        for name in ("cpu_free", "mem_free", "gpu_free", "max_free", "full_count", "free_total",
                     "tag_count", "pods_on", "down", "version"):
            setattr(out, name, getattr(self, name).copy())
        return out

    def view(self) -> GpuClusterView:
        return GpuClusterView(self)


#: arrays a GPU allocator may read, handed out read-only
_ARRAYS = frozenset({"cpu_cap", "cpu_free", "mem_cap", "mem_free", "gpu_count", "gpu_cap",
                     "gpu_free", "max_free", "full_count", "free_total", "model_code",
                     "tag_count", "pods_on", "down", "version"})
_READABLE = frozenset({"n_nodes", "models", "max_gpus", "nodes", "total_gpus",
                       "total_gpu_milli", "used_gpu_milli", "down_gpu_milli",
                       "gpu_free_total", "full_free",
                       "type_codes", "accessible", "feasible", "reason"})


class GpuClusterView(ReadOnlyView):
    """A read-only window on the live :class:`GpuCluster`: its arrays as read-only numpy
    views and its queries; :meth:`copy` gives a private, mutable state."""

    __slots__ = ()
    ARRAYS = _ARRAYS
    READABLE = _READABLE
    READER = "a GPU allocator"
    STATE = "the cluster"
