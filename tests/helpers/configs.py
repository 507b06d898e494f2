"""The small experiment that the command-line, Dask, resume and provenance tests write: a
fat tree of 8-cpu/16-mem servers under Poisson arrivals of small requests at offered load
0.9, written once here; each test names what differs (name, seeds, size, allocators, ...)."""

from __future__ import annotations

from typing import Any


def small_experiment(name: str, *, seed: int, requests: int, allocators: list,
                     seeds: int | None = None, pods: int = 2, racks: int = 2, hosts: int = 4,
                     workload: dict | None = None, **rest: Any) -> dict:
    """The experiment as a dict (keys in the order a YAML file lists them); ``workload``
    adds keys to the workload section, ``rest`` (warmup, metrics, matrix, ...) follows it,
    and ``allocators`` comes after those, as the tests wrote it."""
    cfg: dict[str, Any] = {"name": name, "seed": seed}
    if seeds is not None:
        cfg["seeds"] = seeds
    cfg["topology"] = {"kind": "fat_tree", "pods": pods, "racks": racks, "hosts": hosts,
                       "server": {"cpu": 8, "mem": 16}}
    cfg["workload"] = {
        "requests": requests,
        **(workload or {}),
        "arrival": {"process": "poisson", "rate": 5},
        "demand": {"cpu": {"dist": "uniform_int", "low": 1, "high": 4},
                   "mem": {"dist": "uniform_int", "low": 1, "high": 8}},
        "duration": {"dist": "exponential", "offered_load": 0.9, "load_resource": "cpu"},
    }
    matrix = rest.pop("matrix", None)
    cfg.update(rest)
    cfg["allocators"] = allocators
    if matrix is not None:
        cfg["matrix"] = matrix
    return cfg
