"""Node lists and pod lists of GPU-sharing clusters, as CSV: the Alibaba 2023 GPU trace
("openb") format by default, other column names through a mapping.

Node list columns (dcsim field ← default column): ``name`` ← ``sn``, ``cpu`` ← ``cpu_milli``
(milli-cores), ``mem`` ← ``memory_mib`` (MiB), ``gpus`` ← ``gpu`` (devices), ``model`` ←
``model`` (the GPU model; empty for a CPU-only node).

Pod list columns: ``name`` ← ``name``, ``cpu`` ← ``cpu_milli``, ``mem`` ← ``memory_mib``,
``num_gpu`` ← ``num_gpu``, ``gpu_milli`` ← ``gpu_milli`` (share of one device, 0–1000),
``gpu_types`` ← ``gpu_spec`` (accepted models, ``|``-separated; optional column, empty:
any), ``creation`` ← ``creation_time`` and ``deletion`` ← ``deletion_time`` (seconds;
optional, needed only for runs with departures).

Every value is checked as it is read; a bad one is a :class:`~dcsim.errors.ConfigError`
naming the file, the line and the file's column (``pods.csv: line 7: gpu_milli: 1500 is
more than one GPU (1000) ...``). :func:`check_against` then checks the pods against the nodes (a pod
asking for more GPUs than any node of a model it accepts has, or only for models no node
has).
"""

from __future__ import annotations

import csv
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dcsim.errors import ConfigError
from dcsim.gpu.cluster import MILLI, GpuNodes, GpuPod

NODE_COLUMNS = {"name": "sn", "cpu": "cpu_milli", "mem": "memory_mib", "gpus": "gpu",
                "model": "model"}
POD_COLUMNS = {"name": "name", "cpu": "cpu_milli", "mem": "memory_mib", "num_gpu": "num_gpu",
               "gpu_milli": "gpu_milli", "gpu_types": "gpu_spec", "creation": "creation_time",
               "deletion": "deletion_time"}
#: pod fields whose column may be absent
_OPTIONAL_POD = ("gpu_types", "creation", "deletion")


@dataclass(frozen=True)
class PodTable:
    """A pod list, column by column (file order)."""

    names: tuple[str, ...]
    cpu: np.ndarray
    mem: np.ndarray
    num_gpu: np.ndarray
    gpu_milli: np.ndarray
    types: tuple[tuple[str, ...], ...]
    creation: np.ndarray   # NaN where the file has none
    deletion: np.ndarray   # NaN where the file has none
    source: str = ""
    lines: tuple[int, ...] = ()   # each row's line in the file (messages)
    columns: tuple[tuple[str, str], ...] = tuple(POD_COLUMNS.items())  # field -> file column

    def column(self, field: str) -> str:
        """The file's column holding ``field`` (for messages)."""
        return dict(self.columns)[field]

    def __len__(self) -> int:
        return len(self.names)

    def pod(self, row: int, id: int) -> GpuPod:
        """Row ``row`` as the pod with arrival index ``id``."""
        return GpuPod(id=id, cpu=int(self.cpu[row]), mem=int(self.mem[row]),
                      num_gpu=int(self.num_gpu[row]), gpu_milli=int(self.gpu_milli[row]),
                      types=self.types[row], name=self.names[row], source=row)

    @property
    def total_gpu_milli(self) -> np.ndarray:
        """Each pod's GPU request (milli-GPU)."""
        return self.num_gpu * self.gpu_milli


def _columns(given: dict[str, str] | None, defaults: dict[str, str], where: str):
    cols = dict(defaults)
    for k, v in (given or {}).items():
        if k not in defaults:
            raise ConfigError(f"{where}.columns: unknown field {k!r} (fields: "
                              f"{', '.join(defaults)})")
        cols[k] = v
    return cols


def _rows(path: Path, cols: dict[str, str], optional: tuple[str, ...]):
    """``(line, {field: text})`` for each data row of ``path``."""
    try:
        f = open(path, newline="", encoding="utf-8-sig")
    except OSError as e:
        raise ConfigError(f"{path}: cannot read ({e.strerror or e})") from None
    with f:
        reader = csv.DictReader(f)
        header = reader.fieldnames or []
        missing = [c for k, c in cols.items() if c not in header and k not in optional]
        if missing:
            raise ConfigError(f"{path}: line 1: no column {missing[0]!r} (the header has: "
                              f"{', '.join(header) or 'nothing'})")
        present = {k: c for k, c in cols.items() if c in header}
        try:
            for row in reader:
                yield reader.line_num, {k: (row.get(c) or "").strip()
                                        for k, c in present.items()}
        except csv.Error as e:
            raise ConfigError(f"{path}: line {reader.line_num}: {e}") from None


def _count(path, line, field, text, *, low=0, high=None, what="a whole number") -> int:
    if text == "":
        raise ConfigError(f"{path}: line {line}: {field}: missing")
    try:
        v = float(text)
    except ValueError:
        raise ConfigError(f"{path}: line {line}: {field}: {text!r} is not a number") from None
    if not math.isfinite(v) or v != int(v):
        raise ConfigError(f"{path}: line {line}: {field}: {text!r} is not {what}")
    v = int(v)
    if v < low:
        raise ConfigError(f"{path}: line {line}: {field}: {v} is negative"
                          if low == 0 else f"{path}: line {line}: {field}: {v} is below {low}")
    if high is not None and v > high:
        raise ConfigError(f"{path}: line {line}: {field}: {v} is above {high}")
    return v


def _time(path, line, field, text) -> float:
    if text == "":
        return math.nan
    try:
        v = float(text)
    except ValueError:
        raise ConfigError(f"{path}: line {line}: {field}: {text!r} is not a number") from None
    if not math.isfinite(v) or v < 0:
        raise ConfigError(f"{path}: line {line}: {field}: {text!r} is not a time ≥ 0")
    return v


def read_nodes(path: str | os.PathLike, columns: dict[str, str] | None = None,
               where: str = "gpu.nodes") -> GpuNodes:
    """The node list at ``path`` (see the module docstring)."""
    path = Path(path)
    cols = _columns(columns, NODE_COLUMNS, where)
    names, cpu, mem, gpus, model = [], [], [], [], []
    seen: dict[str, int] = {}
    for line, r in _rows(path, cols, ()):
        name = r["name"]
        if not name:
            raise ConfigError(f"{path}: line {line}: {cols['name']}: missing")
        if name in seen:
            raise ConfigError(f"{path}: line {line}: {cols['name']}: {name!r} is also on line "
                              f"{seen[name]}")
        seen[name] = line
        c = _count(path, line, cols["cpu"], r["cpu"])
        m = _count(path, line, cols["mem"], r["mem"])
        g = _count(path, line, cols["gpus"], r["gpus"])
        mdl = r["model"]
        if g > 0 and not mdl:
            raise ConfigError(f"{path}: line {line}: {cols['model']}: missing for a node with "
                              f"{g} GPUs")
        names.append(name)
        cpu.append(c)
        mem.append(m)
        gpus.append(g)
        model.append(mdl if g > 0 else "")
    if not names:
        raise ConfigError(f"{path}: no nodes")
    return GpuNodes(tuple(names), np.array(cpu), np.array(mem), np.array(gpus), tuple(model))


def read_pods(path: str | os.PathLike, columns: dict[str, str] | None = None,
              where: str = "gpu.pods") -> PodTable:
    """The pod list at ``path`` (see the module docstring). A pod asks for a share of one
    GPU (``num_gpu`` 1, ``gpu_milli`` 1–999), for whole GPUs (``gpu_milli`` 1000) or for
    none (``num_gpu`` 0; its ``gpu_milli`` and ``gpu_types`` must then be empty or 0)."""
    path = Path(path)
    cols = _columns(columns, POD_COLUMNS, where)
    names, cpu, mem, num, milli, types, created, deleted = [], [], [], [], [], [], [], []
    lines: list[int] = []
    # an optional column the mapping names explicitly must be there (a typo is no "absent")
    optional = tuple(k for k in _OPTIONAL_POD if k not in (columns or {}))
    for line, r in _rows(path, cols, optional):
        name = r["name"] or f"row-{len(names)}"
        c = _count(path, line, cols["cpu"], r["cpu"])
        m = _count(path, line, cols["mem"], r["mem"])
        k = _count(path, line, cols["num_gpu"], r["num_gpu"])
        g = _count(path, line, cols["gpu_milli"], r["gpu_milli"] or "0")
        km, gm, tm = cols["num_gpu"], cols["gpu_milli"], cols["gpu_types"]
        t = tuple(x.strip() for x in r.get("gpu_types", "").split("|") if x.strip())
        if g > MILLI:
            raise ConfigError(f"{path}: line {line}: {gm}: {g} is more than one GPU "
                              f"({MILLI}); a pod needing more asks for whole GPUs (num_gpu "
                              f"k, {gm} {MILLI})")
        if k == 0 and (g or t):
            raise ConfigError(f"{path}: line {line}: {km}: 0, but {gm}/{tm} ask for a GPU")
        if k > 0 and g == 0:
            raise ConfigError(f"{path}: line {line}: {gm}: 0 for a pod of {k} GPU(s); "
                              f"give its share of one GPU (1-{MILLI})")
        if k > 1 and g < MILLI:
            raise ConfigError(f"{path}: line {line}: {gm}: {g} with {km} {k}; a "
                              f"share of a GPU is for one GPU (num_gpu 1), several GPUs are "
                              f"whole ({MILLI})")
        lines.append(line)
        names.append(name)
        cpu.append(c)
        mem.append(m)
        num.append(k)
        milli.append(g)
        types.append(t)
        created.append(_time(path, line, cols["creation"], r.get("creation", "")))
        deleted.append(_time(path, line, cols["deletion"], r.get("deletion", "")))
    if not names:
        raise ConfigError(f"{path}: no pods")
    return PodTable(tuple(names), np.array(cpu, dtype=np.int64), np.array(mem, dtype=np.int64),
                    np.array(num, dtype=np.int64), np.array(milli, dtype=np.int64),
                    tuple(types), np.array(created), np.array(deleted), source=str(path),
                    lines=tuple(lines), columns=tuple(cols.items()))


def check_against(pods: PodTable, nodes: GpuNodes, where: str = "gpu.pods") -> None:
    """A ConfigError naming the first pod (its line) that no node could ever hold for a
    GPU reason: a GPU model no node has, or more GPUs than any node of its models has."""
    models = {m for m in nodes.model if m}
    most: dict[str, int] = {}
    for m, g in zip(nodes.model, nodes.gpus.tolist(), strict=True):
        if m:
            most[m] = max(most.get(m, 0), g)
    any_most = max(most.values(), default=0)
    for i in np.flatnonzero(pods.num_gpu > 0):
        k, t = int(pods.num_gpu[i]), pods.types[i]
        line = pods.lines[i] if pods.lines else i + 2
        if t and not set(t) & models:
            raise ConfigError(f"{pods.source}: line {line}: {pods.column('gpu_types')}: "
                              f"{'|'.join(t)!r}: no "
                              f"node has that GPU model (the nodes have "
                              f"{', '.join(sorted(models)) or 'no GPUs'})")
        cap = max((most[m] for m in t if m in most), default=0) if t else any_most
        if k > cap:
            which = f" of model {'|'.join(t)}" if t else ""
            raise ConfigError(f"{pods.source}: line {line}: {pods.column('num_gpu')}: {k} GPUs, "
                              f"but no node"
                              f"{which} has more than {cap}")
