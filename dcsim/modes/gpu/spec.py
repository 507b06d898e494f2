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

With ``arrivals:`` the run is a discrete-event simulation instead (beyond the paper, whose
pods never leave): ``pods`` arrivals drawn uniformly with replacement from the pod list, in a
Poisson process whose rate makes the offered GPU load ``load`` (arrival rate × mean GPU ×
holding time ÷ the cluster's GPUs), each held for an exponential time of mean
``mean_holding`` seconds (``holding: exponential``) or for its own ``deletion_time −
creation_time`` (``holding: trace``), then released; a pod that fits nowhere is lost. The
first ``warmup`` share of the arrivals is not measured; the cluster is sampled every
``sample_every`` seconds (default: 200 samples over the run). ``inflate`` must then be
null and ``order`` plays no part::

    gpu:
      ...
      inflate: null
      arrivals: {pods: 20000, load: 1.0, holding: exponential, mean_holding: 3600}

``power:`` gives the nodes a power draw (:mod:`dcsim.gpu.power`): watts per GPU model, and
the CPU sockets of each node, keyed by its GPU model (``none``: the CPU-only nodes;
``default``: any model not listed). The one-pass curve then has the cluster's watts per
arrived percent; with ``arrivals`` the summary has the mean power and the energy over the
measured window::

    gpu:
      ...
      power:
        gpu_draw: any_share     # or linear; cpu_draw: socket (or linear); idle_policy: on
        gpus: {T4: {idle_w: 10, peak_w: 70}, default: {idle_w: 30, peak_w: 300}}
        cpus:
          none: {idle_w: 15, peak_w: 120, cores: 16}
          default: {idle_w: 20, peak_w: 185, cores: 16}
        time_unit_s: 1          # seconds per unit of the arrival times (energy in J)

``nodes`` and ``pods`` take ``columns:`` (dcsim field → the file's column, for another
trace's names; :mod:`dcsim.gpu.trace`) and ``limit:`` (the first rows only, for a quick
look) and ``name:`` (a label: a ``matrix:`` sweep over whole lists records it as the sweep
column). Paths are relative to the experiment file.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from dcsim.config_files import resolve_path
from dcsim.errors import ConfigError
from dcsim.gpu.cluster import GpuNodes
from dcsim.gpu.trace import PodTable, check_against, read_nodes, read_pods
from dcsim.validation import StrictModel, validate_section


class ListSpec(StrictModel):
    path: str
    name: str | None = None   # a label (a sweep over lists records it)
    columns: dict[str, str] = Field(default_factory=dict)
    limit: Annotated[int, Field(ge=1)] | None = None


class InflateSpec(StrictModel):
    target: Annotated[float, Field(gt=0, le=10)] = 1.3
    stop: Literal["authors", "total"] = "authors"


class TypicalSpec(StrictModel):
    threshold: Annotated[float, Field(gt=0, le=1)] = 0.95
    step: Annotated[int, Field(ge=1)] = 1
    cpu_pods: bool = True


class ArrivalsSpec(StrictModel):
    pods: Annotated[int, Field(ge=1)]
    load: Annotated[float, Field(gt=0, le=100)] = 1.0
    holding: Literal["exponential", "trace"] = "exponential"
    mean_holding: Annotated[float, Field(gt=0)] = 3600.0
    warmup: Annotated[float, Field(ge=0, lt=1)] = 0.2
    sample_every: Annotated[float, Field(gt=0)] | None = None


class DeviceWattsSpec(StrictModel):
    idle_w: Annotated[float, Field(ge=0)]
    peak_w: Annotated[float, Field(ge=0)]

    @model_validator(mode="after")
    def _order(self) -> DeviceWattsSpec:
        if self.peak_w < self.idle_w:
            raise ValueError(f"peak_w ({self.peak_w:g}) is below idle_w ({self.idle_w:g})")
        return self


class SocketWattsSpec(DeviceWattsSpec):
    cores: Annotated[int, Field(ge=1)]


class GpuPowerSpec(StrictModel):
    """``gpu.power`` (:mod:`dcsim.gpu.power`)."""

    gpus: dict[str, DeviceWattsSpec]
    cpus: dict[str, SocketWattsSpec]
    gpu_draw: Literal["any_share", "linear"] = "any_share"
    cpu_draw: Literal["socket", "linear"] = "socket"
    idle_policy: Literal["on", "off", True, False] = "on"   # YAML 1.1 reads on/off as bools
    time_unit_s: Annotated[float, Field(gt=0)] = 1.0

    @field_validator("idle_policy")
    @classmethod
    def _yaml_bool(cls, v: Any) -> Any:
        return {True: "on", False: "off"}[v] if isinstance(v, bool) else v

    def model(self, cluster, where: str = "gpu"):
        """The :class:`~dcsim.gpu.power.GpuPower` of ``cluster``; a ConfigError naming the
        GPU model a table lacks."""
        from dcsim.gpu.power import DeviceWatts, GpuPower, SocketWatts

        gpus = {k: DeviceWatts(v.idle_w, v.peak_w) for k, v in self.gpus.items()}
        cpus = {k: SocketWatts(v.idle_w, v.peak_w, v.cores) for k, v in self.cpus.items()}
        try:
            return GpuPower(cluster, gpus, cpus, gpu_draw=self.gpu_draw,
                            cpu_draw=self.cpu_draw, idle_policy=self.idle_policy)
        except KeyError as e:
            raise ConfigError(f"{where}.power.{e.args[0].removeprefix('gpu.power.')} "
                              "(a node of the node list has it)") from None


class GpuSpec(StrictModel):
    """The ``gpu:`` section (see the module docstring)."""

    nodes: ListSpec
    pods: ListSpec
    order: Literal["shuffle", "creation_time", "file"] = "shuffle"
    inflate: InflateSpec | None = Field(default_factory=InflateSpec)
    typical: TypicalSpec = Field(default_factory=TypicalSpec)
    arrivals: ArrivalsSpec | None = None
    power: GpuPowerSpec | None = None
    check_invariants: bool = False  # check the state after every pod (tests)

    @model_validator(mode="after")
    def _one_protocol(self) -> GpuSpec:
        if self.arrivals is not None and self.inflate is not None:
            raise ValueError("inflate: the pods of gpu.arrivals come and go; set inflate: "
                             "null (inflation is the one-pass protocol's)")
        return self


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
    if not nodes.gpus.any():
        raise ConfigError(f"{where}.nodes: {nodes_path(s, base_dir)}: no node has a GPU")
    check_against(pods, nodes, f"{where}.pods")
    need = []
    if s.arrivals is None and s.order == "creation_time":
        need.append(("creation", "order: creation_time"))
    if s.arrivals is not None and s.arrivals.holding == "trace":
        need += [("creation", "arrivals.holding: trace"), ("deletion", "arrivals.holding: trace")]
    for field, why in need:
        _first_bad(pods, np.isnan(getattr(pods, field)), field,
                   f"missing; {where}.{why} needs every pod's {field} time")
    if s.arrivals is not None and s.arrivals.holding == "trace":
        _first_bad(pods, pods.deletion < pods.creation, "deletion",
                   f"before its creation time ({where}.arrivals.holding: trace)")
    return nodes, pods


def _first_bad(pods: PodTable, bad: np.ndarray, field: str, why: str) -> None:
    """A ConfigError naming the line and column of the first pod where ``bad`` holds."""
    rows = np.flatnonzero(bad)
    if len(rows):
        i = int(rows[0])
        line = pods.lines[i] if pods.lines else i + 2
        raise ConfigError(f"{pods.source}: line {line}: {pods.column(field)}: {why}")


def typical_of(s: GpuSpec, pods: PodTable, where: str = "gpu"):
    """The run's typical pods (``gpu.typical`` over the pod list as read); a ConfigError
    naming the pod file when the settings leave none."""
    from dcsim.gpu.frag import typical_pods

    t = s.typical
    try:
        return typical_pods(pods.cpu, pods.gpu_milli, pods.num_gpu, pods.types,
                            threshold=t.threshold, step=t.step, cpu_pods=t.cpu_pods)
    except ValueError as e:
        raise ConfigError(f"{where}.typical: {pods.source}: {e}"
                          + (" (cpu_pods: false leaves out the CPU-only pods)"
                             if not t.cpu_pods else "")) from None


def nodes_path(s: GpuSpec, base_dir) -> Path:
    return resolve_path(s.nodes.path, base_dir)


def _head(table, n: int):
    if isinstance(table, GpuNodes):
        return table.take(slice(0, n))
    return PodTable(table.names[:n], table.cpu[:n], table.mem[:n], table.num_gpu[:n],
                    table.gpu_milli[:n], table.types[:n], table.creation[:n],
                    table.deletion[:n], table.source, table.lines[:n], table.columns)


def check_gpu(spec: dict[str, Any] | None, base_dir: str | os.PathLike | None = None,
              where: str = "gpu") -> GpuSpec:
    """Validate a ``gpu:`` section without running it: its fields and its files."""
    s = parse_gpu(spec, where)
    nodes, pods = load_lists(s, base_dir, where)
    typical_of(s, pods, where)
    if s.power is not None:   # a GPU model the power tables lack fails here, not in a run
        from dcsim.gpu.cluster import GpuCluster

        s.power.model(GpuCluster(nodes), where)
    return s
