"""The ``gpu:`` section of a ``mode: gpu`` experiment (:class:`GpuSpec`), its validation with
errors naming the field, and the loading of its node and pod lists (each file read once per
process, then shared by the runs that name it).

::

    gpu:
      nodes: {path: ../traces/alibaba_gpu_2023_openb/openb_node_list_gpu_node.csv}
      pods: {path: ../traces/alibaba_gpu_2023_openb/openb_pod_list_default.csv}
      order: shuffle              # shuffle (the authors) | creation_time | file
      inflate: {target: 1.3}      # to 1.3 × the cluster's GPUs (the paper); null: as listed
      typical: {threshold: 0.95, step: 1, cpu_pods: true}   # the authors' typical pods

``nodes`` and ``pods`` take ``columns:`` (dcsim field → the file's column, for another
trace's names; :mod:`dcsim.gpu.trace`) and ``limit:`` (the first rows only, for a quick
look). Paths are relative to the experiment file.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field

from dcsim.errors import ConfigError
from dcsim.gpu.cluster import GpuNodes
from dcsim.gpu.trace import PodTable, check_against, read_nodes, read_pods
from dcsim.sim.vm_static import resolve_path, validate_section
from dcsim.validation import StrictModel


class ListSpec(StrictModel):
    path: str
    columns: dict[str, str] = Field(default_factory=dict)
    limit: Annotated[int, Field(ge=1)] | None = None


class InflateSpec(StrictModel):
    target: Annotated[float, Field(gt=0, le=10)] = 1.3
    stop: Literal["authors", "total"] = "authors"


class TypicalSpec(StrictModel):
    threshold: Annotated[float, Field(gt=0, le=1)] = 0.95
    step: Annotated[int, Field(ge=1)] = 1
    cpu_pods: bool = True


class GpuSpec(StrictModel):
    """The ``gpu:`` section (see the module docstring)."""

    nodes: ListSpec
    pods: ListSpec
    order: Literal["shuffle", "creation_time", "file"] = "shuffle"
    inflate: InflateSpec | None = Field(default_factory=InflateSpec)
    typical: TypicalSpec = Field(default_factory=TypicalSpec)
    check_invariants: bool = False  # check the state after every pod (tests)


def parse_gpu(spec: dict[str, Any] | None, where: str = "gpu") -> GpuSpec:
    """The ``gpu:`` section validated (files are not read; see :func:`load_lists`)."""
    return validate_section(GpuSpec, spec if spec is not None else {}, where)


@functools.lru_cache(maxsize=16)
def _nodes(path: str, stamp: tuple, columns: str, where: str) -> GpuNodes:
    return read_nodes(path, json.loads(columns), where)


@functools.lru_cache(maxsize=32)
def _pods(path: str, stamp: tuple, columns: str, where: str) -> PodTable:
    return read_pods(path, json.loads(columns), where)


def _stamp(p: Path, where: str) -> tuple:
    try:
        st = p.stat()
    except OSError:
        raise ConfigError(f"{where}.path: no such file: {p}") from None
    if not p.is_file():
        raise ConfigError(f"{where}.path: not a file: {p}")
    return (st.st_mtime_ns, st.st_size)


def load_lists(s: GpuSpec, base_dir: str | os.PathLike | None,
               where: str = "gpu") -> tuple[GpuNodes, PodTable]:
    """The section's nodes and pods (their ``limit`` applied), checked against each other
    (:func:`dcsim.gpu.trace.check_against`)."""
    out = []
    for key, read in (("nodes", _nodes), ("pods", _pods)):
        ls: ListSpec = getattr(s, key)
        p = resolve_path(ls.path, base_dir)
        table = read(str(p), _stamp(p, f"{where}.{key}"),
                     json.dumps(ls.columns, sort_keys=True), f"{where}.{key}")
        if ls.limit is not None and ls.limit < len(table):
            table = _head(table, ls.limit)
        out.append(table)
    nodes, pods = out
    check_against(pods, nodes, f"{where}.pods")
    return nodes, pods


def _head(table, n: int):
    if isinstance(table, GpuNodes):
        return table.take(slice(0, n))
    return PodTable(table.names[:n], table.cpu[:n], table.mem[:n], table.num_gpu[:n],
                    table.gpu_milli[:n], table.types[:n], table.creation[:n],
                    table.deletion[:n], table.source, table.lines[:n])


def check_gpu(spec: dict[str, Any] | None, base_dir: str | os.PathLike | None = None,
              where: str = "gpu") -> GpuSpec:
    """Validate a ``gpu:`` section without running it: its fields and its files."""
    s = parse_gpu(spec, where)
    load_lists(s, base_dir, where)
    return s
