"""GPU-sharing clusters (``mode: gpu``): the FGD paper's experiment (Weng et al., ATC'23).

A run builds the cluster from the node list, orders the pod list (``gpu.order``), inflates
it to ``gpu.inflate.target`` × the cluster's GPUs (:mod:`dcsim.gpu.workload`) and offers
the pods one by one to the GPU allocator; a pod placed stays (the paper's pods never
leave), a pod that fits nowhere is rejected and counted. The ordering and inflation draw
from the run's workload generator, so every allocator of a seed sees the same pods in the
same order; the allocator has the plugin generator.

Each choice is validated (:meth:`dcsim.gpu.cluster.GpuCluster.reason`): a node where the
pod does not fit, a device with too little free, a GPU model the pod does not accept, the
wrong number of devices — a :class:`~dcsim.errors.PluginError` naming the allocator.

**Arrived share.** After each pod, ``arrived`` is the GPU request of every pod offered so
far (placed or not) over the cluster's milli-GPU, and ``alloc`` the milli-GPU placed over
the same. The paper's curves (its Fig. 9a) plot ``alloc`` against ``arrived`` in steps of
one percent: the authors' ``merge_alloc_discrete.py`` rounds each pod's ``arrived`` to a
whole percent (half to even) and averages the pods of each percent (an empty percent takes
the pods within one percent of it). dcsim writes that curve as the ``timeseries`` table, one
row per percent, and the summary's ``alloc_gpu_share``, ``frag_gpus`` … are the values of
its last row (130 % for the paper's inflation).

**Fragmentation** is :mod:`dcsim.gpu.frag` over the run's typical pods (``gpu.typical``),
kept per node and updated where a pod lands.

**Records.** ``sink("pods", columns)``: one row per offered pod; ``sink("timeseries",
columns)``: one row per arrived percent; the summary is :func:`run_gpu`'s return. Columns
and units: ``docs/reference/outputs.md`` (declared in :mod:`dcsim.results.schema`).
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from dcsim.errors import ConfigError, DcsimError, PluginError
from dcsim.gpu.cluster import MILLI, GpuCluster, GpuPod
from dcsim.gpu.frag import FragModel, typical_pods
from dcsim.gpu.workload import arrival_order, inflate
from dcsim.sim.gpu_spec import GpuSpec, load_lists, parse_gpu
from dcsim.sim.vm_static import Sink


def _choice(allocator, raw: Any, pod: GpuPod, cluster: GpuCluster) -> tuple[int, tuple]:
    name = getattr(allocator, "label", type(allocator).__name__)
    try:
        node, devices = raw
        node = int(node)
        devices = tuple(int(d) for d in devices)
    except (TypeError, ValueError):
        raise PluginError(f"GPU allocator {name!r} returned {raw!r} for pod {pod.id}; "
                          "expected (node, devices) or None") from None
    why = cluster.reason(pod, node, devices)
    if why is not None:
        raise PluginError(f"GPU allocator {name!r} chose an invalid placement for pod "
                          f"{pod.id} ({pod.name}): {why}")
    return node, devices


def curve(arrived: np.ndarray, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The authors' discretisation (see the module docstring): per whole percent of
    ``arrived`` (a share) from 0 to the last, the mean of each of ``values`` over its pods;
    ``pods`` counts them (0 where the window of ±1 % was used)."""
    pct = np.round(arrived * 100.0).astype(np.int64)
    top = int(pct.max()) if len(pct) else 0
    counts = np.bincount(pct, minlength=top + 1).astype(np.float64)
    sums = {k: np.bincount(pct, weights=v, minlength=top + 1) for k, v in values.items()}
    out: dict[str, list] = {"arrived_pct": [], "pods": [], **{k: [] for k in values}}
    for p in range(top + 1):
        if counts[p]:
            sel, n = slice(p, p + 1), counts[p]
        else:
            sel = slice(max(p - 1, 0), p + 2)
            n = counts[sel].sum()
            if not n:
                continue
        out["arrived_pct"].append(p)
        out["pods"].append(int(counts[p]))
        for k in values:
            out[k].append(float(sums[k][sel].sum() / n))
    return {k: np.asarray(v) for k, v in out.items()}


def run_gpu(spec: dict[str, Any] | GpuSpec, allocator, rng: np.random.Generator,
            sink: Sink | None, base_dir: str | os.PathLike | None = None, *,
            where: str = "gpu") -> dict[str, Any]:
    """One run of ``allocator`` (an instance) on the ``gpu:`` section ``spec`` (see the
    module docstring); returns the summary."""
    s = parse_gpu(spec, where) if not isinstance(spec, GpuSpec) else spec
    nodes, pods = load_lists(s, base_dir, where)
    cluster = GpuCluster(nodes)
    if cluster.total_gpu_milli == 0:
        raise ConfigError(f"{where}.nodes: the nodes have no GPU")
    t = s.typical
    try:
        typical = typical_pods(pods.cpu, pods.gpu_milli, pods.num_gpu, pods.types,
                               threshold=t.threshold, step=t.step, cpu_pods=t.cpu_pods)
    except ValueError as e:
        raise ConfigError(f"{where}.typical: {e}") from None
    frag = FragModel(typical, cluster.models)
    rows = arrival_order(pods, s.order, rng)
    inflated = np.zeros(len(rows), dtype=bool)
    if s.inflate is not None:
        rows, inflated = inflate(pods, rows, s.inflate.target * cluster.total_gpu_milli, rng,
                                 s.inflate.stop)
    from dcsim.gpu_allocators.base import GpuContext

    view = cluster.view()
    allocator.setup(view, GpuContext(pods, typical, frag))

    n = len(rows)
    cap_gpu = float(cluster.total_gpu_milli)
    cap_cpu = float(cluster.cpu_cap.sum())
    cap_mem = float(cluster.mem_cap.sum()) or 1.0
    node_frag = frag.node_frag(cluster)
    frag_total = float(node_frag.sum())
    accepted = np.zeros(n, dtype=bool)
    node_of = np.full(n, -1, dtype=np.int64)
    devices_of: list[list[int]] = [[] for _ in range(n)]
    arrived = np.zeros(n)
    alloc = np.zeros(n)
    frag_after = np.zeros(n)
    idle_after = np.zeros(n)
    cpu_after = np.zeros(n)
    mem_after = np.zeros(n)
    decision = np.zeros(n)
    asked = used = used_cpu = used_mem = 0
    check = s.check_invariants
    for i in range(n):
        pod = pods.pod(int(rows[i]), i)
        asked += pod.total_gpu_milli
        t0 = time.perf_counter()
        try:
            raw = allocator.allocate(view, pod)
        except DcsimError:
            raise
        except Exception as e:  # a plugin's own bug: name it, no traceback for the user
            raise PluginError(f"GPU allocator {allocator.label!r} failed on pod {i} "
                              f"({pod.name}): {type(e).__name__}: {e}") from e
        decision[i] = time.perf_counter() - t0
        if raw is not None:
            node, devs = _choice(allocator, raw, pod, cluster)
            cluster.reserve(pod, node, devs)
            accepted[i] = True
            node_of[i] = node
            devices_of[i] = list(devs)
            used += pod.total_gpu_milli
            used_cpu += pod.cpu
            used_mem += pod.mem
            new = float(frag.node_frag(cluster, [node])[0])
            frag_total += new - node_frag[node]
            node_frag[node] = new
            if check:
                cluster.check()
        arrived[i] = asked / cap_gpu
        alloc[i] = used / cap_gpu
        frag_after[i] = frag_total
        idle_after[i] = cap_gpu - used
        cpu_after[i] = used_cpu / cap_cpu
        mem_after[i] = used_mem / cap_mem
    if check:
        if abs(frag_total - float(frag.node_frag(cluster).sum())) > 1e-6 * max(cap_gpu, 1):
            raise AssertionError("the kept fragmentation drifted from a recomputation")
        if used != cluster.used_gpu_milli():
            raise AssertionError("GPU accounting drifted")

    ratio = np.divide(frag_after, idle_after, out=np.zeros(n), where=idle_after > 0)
    series = curve(arrived, {"alloc_gpu_share": alloc, "frag_gpus": frag_after / MILLI,
                             "frag_ratio": ratio, "alloc_cpu_share": cpu_after,
                             "alloc_mem_share": mem_after})
    gpus = cluster.total_gpus
    series["unalloc_gpus"] = (1.0 - series["alloc_gpu_share"]) * gpus
    full = cluster.gpu_free == cluster.gpu_cap
    used_nodes = int(((~full.all(axis=1)) | (cluster.cpu_free < cluster.cpu_cap)).sum())
    if sink is not None:
        sink("pods", {
            "id": list(range(n)), "name": [pods.names[r] for r in rows.tolist()],
            "row": rows.tolist(), "inflated": inflated.tolist(),
            "cpu": pods.cpu[rows].tolist(), "mem": pods.mem[rows].tolist(),
            "num_gpu": pods.num_gpu[rows].tolist(),
            "gpu_milli": pods.gpu_milli[rows].tolist(),
            "gpu_types": ["|".join(pods.types[r]) for r in rows.tolist()],
            "accepted": accepted.tolist(), "node": node_of.tolist(), "devices": devices_of,
            "arrived_gpu_share": arrived.tolist(), "alloc_gpu_share": alloc.tolist(),
            "frag_gpus": (frag_after / MILLI).tolist(), "decision_s": decision.tolist()})
        sink("timeseries", {k: v.tolist() for k, v in series.items()})
    last = {k: float(v[-1]) if len(v) else float("nan") for k, v in series.items()}
    n_acc = int(accepted.sum())
    return {
        "received": n, "accepted": n_acc, "rejected": n - n_acc,
        "acceptance_ratio": n_acc / n if n else float("nan"),
        "arrived_gpu_share": float(arrived[-1]) if n else 0.0,
        "alloc_gpu_share": last["alloc_gpu_share"],
        "final_alloc_gpu_share": float(alloc[-1]) if n else 0.0,
        "unalloc_gpus": last["unalloc_gpus"],
        "frag_gpus": last["frag_gpus"], "frag_ratio": last["frag_ratio"],
        "alloc_cpu_share": float(cpu_after[-1]) if n else 0.0,
        "alloc_mem_share": float(mem_after[-1]) if n else 0.0,
        "used_nodes": used_nodes, "nodes": cluster.n_nodes, "gpus": gpus,
        "inflated": int(inflated.sum()), "typical_pods": len(typical),
        "mean_decision_s": float(decision.mean()) if n else 0.0,
    }
