"""The VMs that arrive in ``mode: vm_online``: a trace's rows or the paper's Table 1 type
mix, as columns (:class:`VMStream`), with trace demands turned into cores, MB and NUMA
counts (:func:`vm_sizes`: cores rounded up, memory × ``mem_unit_mb``; a VM bigger than one
NUMA node, or from ``double_numa_from`` cores, spans both, with even halves)."""

from __future__ import annotations

import numpy as np

from dcsim.config_files import resolve_path
from dcsim.csv_tables import read_csv
from dcsim.errors import ConfigError
from dcsim.parquet_tables import read_parquet
from dcsim.vm.synthetic import VM_TYPES


class VMStream:
    """The offered VMs as columns: ``id``, ``arrival``, ``duration``, ``cpu`` (cores),
    ``mem`` (MB), ``numas``; sorted by arrival."""

    def __init__(self, ids, arrival, duration, cpu, mem, numas):
        self.id = np.asarray(ids)
        self.arrival = np.asarray(arrival, dtype=np.float64)
        self.duration = np.asarray(duration, dtype=np.float64)
        self.cpu = np.asarray(cpu, dtype=np.int64)
        self.mem = np.asarray(mem, dtype=np.int64)
        self.numas = np.asarray(numas, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.arrival)


def vm_sizes(cpu, mem, numa_cpu: int, numa_mem: int, mem_unit_mb: float = 1024.0,
             double_numa_from: int | None = None):
    """Trace demands → ``(cores, MB, numas)`` arrays (see the module docstring)."""
    c = np.maximum(np.ceil(np.asarray(cpu, dtype=np.float64) - 1e-9), 1).astype(np.int64)
    m = np.maximum(np.ceil(np.asarray(mem, dtype=np.float64) * mem_unit_mb - 1e-6),
                   0).astype(np.int64)
    if double_numa_from is None:
        double = (c > numa_cpu) | (m > numa_mem)
    else:
        double = c >= double_numa_from
    c = np.where(double, c + c % 2, c)
    m = np.where(double, m + m % 2, m)
    return c, m, np.where(double, 2, 1)


def trace_stream(t, base_dir, numa_cpu: int, numa_mem: int,
                 where: str) -> VMStream:
    """The VMs of trace ``t`` (the ``vm.workload.trace`` section: ``path``, ``limit``,
    ``spread``, ``start_at_zero``, ``mem_unit_mb``, ``double_numa_from``, ``time_scale``),
    sorted by arrival; problems are ConfigErrors naming ``where``."""
    p = resolve_path(t.path, base_dir)
    if not p.is_file():
        raise ConfigError(f"{where}.path: no such file: {p}")
    try:
        df = read_parquet(p) if p.suffix in (".parquet", ".pq") else read_csv(p)
    except Exception as e:  # noqa: BLE001 - any reader error is the file's fault
        raise ConfigError(f"{where}.path: cannot read {p}: {e}") from None
    missing = [c for c in ("arrival", "duration", "cpu", "mem") if c not in df.columns]
    if missing:
        raise ConfigError(f"{where}.path: {p} lacks column(s) {', '.join(missing)}")
    if "id" not in df.columns:
        df = df.assign(id=np.arange(len(df)))
    df = df.sort_values("arrival", kind="stable").reset_index(drop=True)
    if t.limit is not None:
        df = df.iloc[:t.limit]
    arrival = df["arrival"].to_numpy(dtype=np.float64).copy()
    duration = df["duration"].to_numpy(dtype=np.float64)
    if len(df) and (np.isnan(arrival).any() or np.isnan(duration).any()
                    or (duration < 0).any()):
        raise ConfigError(f"{where}.path: {p} has a missing arrival/duration or a negative "
                          "duration")
    if t.spread and len(arrival):
        # rank of each row among the rows sharing its arrival time, and that group's size
        start = np.r_[True, arrival[1:] != arrival[:-1]]
        group = np.cumsum(start) - 1
        first = np.flatnonzero(start)
        size = np.diff(np.r_[first, len(arrival)])
        rank = np.arange(len(arrival)) - first[group]
        arrival = arrival + t.spread * rank / size[group]
    if t.start_at_zero and len(arrival):
        arrival = arrival - arrival[0]
    cpu, mem, numas = vm_sizes(df["cpu"].to_numpy(), df["mem"].to_numpy(), numa_cpu, numa_mem,
                               t.mem_unit_mb, t.double_numa_from)
    ids = df["id"].to_numpy()
    if ids.dtype.kind not in "iu":
        ids = ids.astype(str)
    return VMStream(ids, arrival * t.time_scale, duration * t.time_scale, cpu, mem, numas)


#: mean cores of a Table 1 VM (11.6345)
TABLE1_MEAN_CPU = float(sum(t.cpu * t.share for t in VM_TYPES) / sum(t.share for t in VM_TYPES))


def synthetic_stream(s, total_cpu: int, rng: np.random.Generator) -> VMStream:
    """``s.count`` VMs of the Table 1 type mix arriving at rate ``s.rate``, lifetimes
    exponential with ``s.mean_lifetime`` or sized so that ``s.load`` of ``total_cpu`` is
    offered (the ``vm.workload.synthetic`` section)."""
    shares = np.array([t.share for t in VM_TYPES])
    kind = rng.choice(len(VM_TYPES), size=s.count, p=shares / shares.sum())
    arrival = np.cumsum(rng.exponential(1.0 / s.rate, size=s.count))
    mean = s.mean_lifetime if s.mean_lifetime is not None else \
        s.load * total_cpu / (s.rate * TABLE1_MEAN_CPU)
    duration = rng.exponential(mean, size=s.count)
    cpu = np.array([t.cpu for t in VM_TYPES])[kind]
    mem = np.array([t.mem_mb for t in VM_TYPES])[kind]
    numas = np.array([t.numas for t in VM_TYPES])[kind]
    return VMStream(np.arange(s.count), arrival, duration, cpu, mem, numas)
