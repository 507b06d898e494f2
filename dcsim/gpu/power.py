"""The power draw of a GPU cluster's nodes (``gpu.power``): each node's GPUs and CPUs, from
what is placed on it.

A node's draw is its GPUs' plus its CPUs'; two named behaviours for each:

* **GPUs**, per device, with ``idle_w`` and ``peak_w`` of its model:

  - ``gpu_draw: any_share`` — a device with any share placed draws ``peak_w``, a fully free
    one ``idle_w`` (Lettich et al., "Power- and Fragmentation-aware Online Scheduling for
    GPU Datacenters", CCGrid 2025: their simulator's ``GetEnergyConsumptionNode``). A
    device shared by a pod of 0.1 GPU draws as much as a busy one, so how many devices a
    policy touches matters, not only how much it places.
  - ``gpu_draw: linear`` — ``idle_w + share × (peak_w − idle_w)``, ``share`` the placed
    share of the device.

* **CPUs**, per socket, with ``idle_w``, ``peak_w`` and ``cores`` (physical cores per
  socket) of the node's CPU; a node of ``cpu`` milli-cores has ⌈cpu / 2000⌉ physical cores
  (two vCPUs per core, as Alibaba's instances) in ⌈cores / ``cores``⌉ sockets:

  - ``cpu_draw: socket`` — the cores in use are the physical cores less the wholly free ones
    (⌊free / 2000⌋); they fill sockets in turn, and a socket with any core in use draws
    ``peak_w``, the others ``idle_w`` (Lettich et al.).
  - ``cpu_draw: linear`` — every socket draws ``idle_w + u × (peak_w − idle_w)``, ``u`` the
    placed share of the node's cpu.

A node that is down draws nothing; with ``idle_policy: off`` a node hosting no pod draws
nothing either (it is switched off; ``on``, the default and Lettich et al.'s, keeps it
drawing its idle power).

**Which CPU a node has.** The openb node list names each node's GPU model but not its CPU,
so the CPUs are given by the node's GPU model (``cpus:``, keyed like ``gpus:``; ``none``
for the CPU-only nodes and ``default`` for a model not listed), as Lettich et al. assign
them (their ``Add CPU models to YAML nodes`` notebook).

The values of a run are watts at an instant; :class:`GpuPower` keeps them per node and
updates the nodes a change touched (:meth:`GpuPower.update`), so a run pays per change for
one node, not for the cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from dcsim.gpu.cluster import MILLI, GpuCluster

#: milli-cores per physical core (two vCPUs)
CORE_MILLI = 2000
#: the ``cpus:`` key of the CPU-only nodes, and the key of any model not listed
NONE, DEFAULT = "none", "default"


@dataclass(frozen=True)
class DeviceWatts:
    """A GPU model's draw: fully free and in use."""

    idle_w: float
    peak_w: float


@dataclass(frozen=True)
class SocketWatts:
    """A CPU socket's draw, idle and in use, and its physical cores."""

    idle_w: float
    peak_w: float
    cores: int


def lookup(table: Mapping[str, object], model: str, what: str) -> object:
    """``table``'s entry for GPU model ``model`` ("" for a CPU-only node): the model's own,
    else ``default``; a KeyError naming what is missing."""
    key = model or NONE
    if key in table:
        return table[key]
    if DEFAULT in table:
        return table[DEFAULT]
    raise KeyError(f"{what}: no entry for {key!r} and no {DEFAULT!r}")


class GpuPower:
    """Per-node draw of ``cluster`` (see the module docstring). ``gpus`` maps a GPU model
    to its :class:`DeviceWatts`; ``cpus`` a node's GPU model (``none``: CPU-only) to its
    :class:`SocketWatts`; missing models fall back to ``default``."""

    def __init__(self, cluster: GpuCluster, gpus: Mapping[str, DeviceWatts],
                 cpus: Mapping[str, SocketWatts], *, gpu_draw: str = "any_share",
                 cpu_draw: str = "socket", idle_policy: str = "on"):
        if gpu_draw not in ("any_share", "linear"):
            raise ValueError(f"gpu_draw: {gpu_draw!r} (any_share or linear)")
        if cpu_draw not in ("socket", "linear"):
            raise ValueError(f"cpu_draw: {cpu_draw!r} (socket or linear)")
        if idle_policy not in ("on", "off"):
            raise ValueError(f"idle_policy: {idle_policy!r} (on or off)")
        n = cluster.n_nodes
        models = cluster.nodes.model
        self.linear_gpu = gpu_draw == "linear"
        self.linear_cpu = cpu_draw == "linear"
        self.off_when_idle = idle_policy == "off"
        self.g_idle = np.zeros(n)
        self.g_peak = np.zeros(n)
        self.c_idle = np.zeros(n)
        self.c_peak = np.zeros(n)
        self.per_socket = np.ones(n, dtype=np.int64)
        for i in range(n):
            m = models[i]
            if cluster.gpu_count[i]:
                d = lookup(gpus, m, "gpu.power.gpus")
                self.g_idle[i], self.g_peak[i] = d.idle_w, d.peak_w
            s = lookup(cpus, m, "gpu.power.cpus")
            self.c_idle[i], self.c_peak[i], self.per_socket[i] = s.idle_w, s.peak_w, s.cores
        self.cores = -(-cluster.cpu_cap // CORE_MILLI)            # ⌈cpu / 2000⌉
        self.sockets = -(-self.cores // self.per_socket)
        self.gpu_w = np.zeros(n)
        self.cpu_w = np.zeros(n)
        self.update(cluster)

    def draw(self, cluster: GpuCluster, idx: np.ndarray | Sequence[int] | None = None
             ) -> tuple[np.ndarray, np.ndarray]:
        """The GPUs' and the CPUs' watts of nodes ``idx`` (None: all) now."""
        sel = slice(None) if idx is None else np.asarray(idx, dtype=np.int64)
        count = cluster.gpu_count[sel]
        if self.linear_gpu:
            used = count * MILLI - cluster.free_total[sel]
            gpu = self.g_idle[sel] * count + (self.g_peak[sel] - self.g_idle[sel]) * used / MILLI
        else:
            busy = count - cluster.full_count[sel]
            gpu = self.g_idle[sel] * (count - busy) + self.g_peak[sel] * busy
        sockets = self.sockets[sel]
        if self.linear_cpu:
            cap = cluster.cpu_cap[sel]
            u = np.divide(cap - cluster.cpu_free[sel], cap, out=np.zeros(len(cap)),
                          where=cap > 0)
            cpu = sockets * (self.c_idle[sel] + u * (self.c_peak[sel] - self.c_idle[sel]))
        else:
            working = self.cores[sel] - cluster.cpu_free[sel] // CORE_MILLI
            active = np.minimum(-(-working // self.per_socket[sel]), sockets)
            cpu = self.c_idle[sel] * (sockets - active) + self.c_peak[sel] * active
        off = cluster.down[sel]
        if self.off_when_idle:
            off = off | (cluster.pods_on[sel] == 0)
        return np.where(off, 0.0, gpu), np.where(off, 0.0, cpu)

    def update(self, cluster: GpuCluster, idx: np.ndarray | Sequence[int] | None = None
               ) -> None:
        """Recompute the kept draw of nodes ``idx`` (None: all)."""
        g, c = self.draw(cluster, idx)
        sel = slice(None) if idx is None else np.asarray(idx, dtype=np.int64)
        self.gpu_w[sel] = g
        self.cpu_w[sel] = c

    def totals(self) -> tuple[float, float]:
        """The cluster's GPUs' and CPUs' watts (from the kept per-node draw)."""
        return float(self.gpu_w.sum()), float(self.cpu_w.sum())
