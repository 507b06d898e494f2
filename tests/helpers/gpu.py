"""Small GPU clusters, pod lists and typical pods built by hand, for the gpu tests."""

from __future__ import annotations

import itertools
import math

import numpy as np

from dcsim.gpu import MILLI, GpuCluster, GpuNodes, GpuPod, PodTable, typical_pods

BIG_MEM = 1 << 20


def gpu_nodes(specs, mem: int = BIG_MEM) -> GpuNodes:
    """Nodes from ``(gpus, model, cpu)`` per node (model ignored for ``gpus`` 0)."""
    return GpuNodes(tuple(f"n{i}" for i in range(len(specs))),
                    np.array([s[2] for s in specs]), np.full(len(specs), mem),
                    np.array([s[0] for s in specs]),
                    tuple(s[1] if s[0] else "" for s in specs))


def make_cluster(specs, free=None, cpu_free=None, mem: int = BIG_MEM) -> GpuCluster:
    """A cluster of ``gpu_nodes(specs)`` where device d of node i has ``free[i][d]``
    milli-GPU free (a filler pod takes the rest: a share of it, or the whole device where
    ``free`` is 0) and node i has ``cpu_free[i]`` milli-cpu free (a CPU-only filler)."""
    c = GpuCluster(gpu_nodes(specs, mem))
    fid = itertools.count(-1, -1)
    for i, row in enumerate(free or []):
        for d, f in enumerate(row):
            if f < MILLI:
                pod = (GpuPod(next(fid), 0, 0, 1, MILLI - f) if f else
                       GpuPod(next(fid), 0, 0, 1, MILLI))
                c.reserve(pod, i, (d,))
    for i, f in enumerate(cpu_free or []):
        if f < specs[i][2]:
            c.reserve(GpuPod(next(fid), specs[i][2] - f, 0, 0, 0), i, ())
    if free is not None:
        for i, row in enumerate(free):
            assert c.gpu_free[i, :len(row)].tolist() == list(row)
    return c


def pod_table(rows, names=None, creation=None) -> PodTable:
    """A pod list from ``(cpu, num_gpu, gpu_milli, types)`` rows."""
    n = len(rows)
    return PodTable(tuple(names or (f"p{i:04d}" for i in range(n))),
                    np.array([r[0] for r in rows], dtype=np.int64), np.zeros(n, dtype=np.int64),
                    np.array([r[1] for r in rows], dtype=np.int64),
                    np.array([r[2] for r in rows], dtype=np.int64),
                    tuple(tuple(r[3]) for r in rows),
                    np.array(creation if creation is not None else [math.nan] * n, dtype=float),
                    np.full(n, math.nan), source="test.csv")


def typical_of(classes, threshold: float = 1.0):
    """Typical pods of ``count`` copies of each ``(count, cpu, num_gpu, gpu_milli, types)``."""
    rows = [(c, k, m, t) for count, c, k, m, t in classes for _ in range(count)]
    return typical_pods([r[0] for r in rows], [r[2] for r in rows], [r[1] for r in rows],
                        [r[3] for r in rows], threshold=threshold), rows
