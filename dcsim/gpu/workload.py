"""The order in which a pod list's pods arrive, and the FGD paper's inflation of the list
to a target share of the cluster's GPUs (the authors' ``simulator.go``: ``SortClusterPods``
and ``TunePodsByNodeTotalResource``).

**Order** (:func:`arrival_order`): ``shuffle`` — the pods sorted by name, then a seeded
random permutation (the authors' experiments run with ``--shuffle-pod=true``);
``creation_time`` — by creation time, file order among equal times; ``file`` — as listed.

**Inflation** (:func:`inflate`), to ``target`` × the cluster's milli-GPU: when the pods ask
for less, pods drawn uniformly with replacement from the whole list (sorted by name) are
appended after the ordered ones, one at a time, until the next draw would pass the target;
when they ask for more, pods at random places of the ordered list are removed until they
no longer do. The authors compare the running total plus the drawn pod's milli-GPU *per
device* with the target (``stop: authors``), so a drawn multi-GPU pod can pass it by up to
7 GPUs; ``stop: total`` compares with the pod's whole request. CPU-only pods ask for no GPU
and are always appended when drawn.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from dcsim.gpu.trace import PodTable

Order = Literal["shuffle", "creation_time", "file"]


def by_name(pods: PodTable) -> np.ndarray:
    """Row indices sorted by pod name (stable)."""
    return np.array(sorted(range(len(pods)), key=pods.names.__getitem__), dtype=np.int64)


def arrival_order(pods: PodTable, order: Order, rng: np.random.Generator) -> np.ndarray:
    """The rows of ``pods`` in arrival order (see the module docstring)."""
    if order == "file":
        return np.arange(len(pods), dtype=np.int64)
    if order == "creation_time":
        t = np.where(np.isnan(pods.creation), np.inf, pods.creation)
        return np.argsort(t, kind="stable").astype(np.int64)
    if order == "shuffle":
        return by_name(pods)[rng.permutation(len(pods))]
    raise ValueError(f"unknown order {order!r}")


def inflate(pods: PodTable, rows: np.ndarray, target_milli: float, rng: np.random.Generator,
            stop: Literal["authors", "total"] = "authors") -> tuple[np.ndarray, np.ndarray]:
    """``rows`` tuned to ``target_milli`` (see the module docstring): the new row sequence
    and, per entry, whether inflation added it."""
    total = pods.total_gpu_milli
    asked = int(total[rows].sum())
    rows = list(rows.tolist())
    if asked > target_milli:
        while asked > target_milli:
            i = int(rng.integers(len(rows)))
            asked -= int(total[rows.pop(i)])
        return np.array(rows, dtype=np.int64), np.zeros(len(rows), dtype=bool)
    pool = by_name(pods)
    per = pods.gpu_milli if stop == "authors" else total
    if not (per > 0).any():  # nothing asks for a GPU: drawing would never stop
        return np.array(rows, dtype=np.int64), np.zeros(len(rows), dtype=bool)
    added: list[int] = []
    while True:
        r = int(pool[int(rng.integers(len(pool)))])
        if asked + int(per[r]) > target_milli:
            break
        asked += int(total[r])
        added.append(r)
    out = np.array(rows + added, dtype=np.int64)
    flag = np.zeros(len(out), dtype=bool)
    flag[len(rows):] = True
    return out, flag
