"""Importers: turn a raw public trace into dcsim's standard request table.

The standard table (a :class:`pandas.DataFrame`, replayed by
:class:`~dcsim.workload.traces.TraceSource`) has one row per request, sorted by arrival
(stable: ties keep the file's order):

``id`` · ``arrival`` (s, on the trace's own clock, float64) · ``duration`` (s, float64) ·
``cpu`` · ``mem`` (units per trace, below) · trace-specific extras.

=============  ==========================  ===============================================
trace          cpu / mem                   extras
=============  ==========================  ===============================================
azure2017      vCPU cores / memory GB      censored, batch (tenant batch), flavor,
                                           duration_bin
alibaba2018    cores / fraction of a       instances, job, task, task_type, status
               machine's memory
azure2020      fractions of one machine    priority (0 high, 1 low), censored, vm_type,
               of type 16 (cpu, memory)    machine_id
=============  ==========================  ===============================================

Two more importers read a trace's table of request *kinds*, not a request stream, for
drawing rows at random (``trace.resample: true``); their tables have no ``duration``:

======================  ==========================  =====================================
alibaba2018_containers  cores / fraction of a       ``container_meta``: one row per
                        machine's memory            status event; extras cpu_request
                                                    (100 = 1 core), mem_size (0-100),
                                                    status; ``arrival`` = time_stamp
azure2020_vmtypes       fractions of one machine    ``vmType``: one row per (VM type,
                        of that row's type          machine type); extras machine_id and
                                                    whichever of nic, hdd, ssd the file
                                                    has; no ``arrival``
======================  ==========================  =====================================

Each importer records what it read and dropped in ``df.attrs`` (``rows_read``, ``dropped``).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd

from dcsim.csv_tables import read_csv
from dcsim.errors import ConfigError

_BIN = 300.0  # seconds per line of the Azure 2017 rnn files


# ---------------------------------------------------------------------- Azure 2017
def azure2017_bins(interval_map: Path | None = None) -> tuple[np.ndarray, np.ndarray]:
    """[lo, hi) lifetime of each duration bin, seconds (lo == hi: the bin is exact).

    Read from ``v1.interval_map.txt`` when given, else the README's table (they agree)."""
    if interval_map is None or not interval_map.is_file():
        k = np.arange(46)
        lo = np.select([k <= 12, k <= 35, k <= 44],
                       [300.0 * k, 3900.0 + 3600 * (k - 13), 86700.0 + 86400 * (k - 36)], 864300.0)
        hi = np.select([k <= 12, k <= 35, k <= 44],
                       [300.0 * k, 7500.0 + 3600 * (k - 13), 173100.0 + 86400 * (k - 36)],
                       1728300.0)
        return lo, hi
    m = read_csv(interval_map, sep=r"\s+", header=None, names=["dur", "bin"])
    g = m.groupby("bin")["dur"].agg(["min", "max", "count"]).sort_index()
    if not np.array_equal(g.index.to_numpy(), np.arange(len(g))):
        raise ConfigError(f"{interval_map}: duration bins are not 0..{len(g) - 1}")
    hi = np.where(g["count"] > 1, g["max"] + _BIN, g["min"])
    return g["min"].to_numpy(np.float64), hi.astype(np.float64)


def _read_lines(path: Path) -> list[tuple[int, list[str]]]:
    out = []
    with open(path) as f:
        for no, line in enumerate(f, 1):
            if not line.strip():
                continue
            t, _, rest = line.strip().partition(" ")
            try:
                out.append((int(t), [x for x in rest.split(",") if x]))
            except ValueError:
                raise ConfigError(f"{path}: line {no}: expected '<t_seconds> <tokens>'") from None
    return out


def import_azure2017(directory: str | Path, split: str = "dev", lifetime: str = "mid",
                     spread: str = "start", seed: int = 0) -> pd.DataFrame:
    """The Azure 2017 VM stream in the SOSP'21 rnn encoding (``v1.<split>.txt`` flavors,
    ``v1.<split>.c<horizon>.txt`` durations, ``flav_map.txt``, ``v1.interval_map.txt``).

    ``lifetime`` places an uncensored (``U``) lifetime in its bin: ``mid`` (default),
    ``lower``, or ``uniform`` (seeded by ``seed``); bins up to 1 h are exact. A censored
    (``C``) VM gets duration = horizon − arrival (it ran at least that long) and
    ``censored = True``. ``spread``: ``start`` puts every VM of a 300-s line at the line's
    timestamp (the README's mapping); ``even`` spreads them evenly over the 300 s, in order.
    """
    d = Path(directory)
    if split not in ("dev", "test"):
        raise ConfigError(f"azure2017: split must be 'dev' or 'test', not {split!r}")
    if lifetime not in ("mid", "lower", "uniform") or spread not in ("start", "even"):
        raise ConfigError("azure2017: lifetime is mid|lower|uniform, spread is start|even")
    dur_files = sorted(d.glob(f"v1.{split}.c*.txt"))
    flav_file = d / f"v1.{split}.txt"
    if not flav_file.is_file() or len(dur_files) != 1 or not (d / "flav_map.txt").is_file():
        raise ConfigError(f"{d}: expected v1.{split}.txt, one v1.{split}.c<horizon>.txt and "
                          "flav_map.txt")
    horizon = float(dur_files[0].name.split(".c")[-1].removesuffix(".txt"))
    fmap = {}
    for line in (d / "flav_map.txt").read_text().split("\n"):
        if line.strip():
            spec, letter = line.split()
            cores, mem = spec.split(",")
            fmap[letter] = (float(cores), float(mem))
    lo, hi = azure2017_bins(d / "v1.interval_map.txt")

    fl, du = _read_lines(flav_file), _read_lines(dur_files[0])
    if len(fl) != len(du):
        raise ConfigError(f"{dur_files[0]}: {len(du)} lines, but {flav_file.name} has {len(fl)}")
    ftok: list[str] = []
    dtok: list[str] = []
    times, counts = [], []
    for i, ((t, f), (t2, g)) in enumerate(zip(fl, du, strict=True)):
        if t != t2 or len(f) != len(g):
            raise ConfigError(f"{dur_files[0]}: line {i + 1} does not match {flav_file.name}")
        ftok += f
        dtok += g
        times.append(t)
        counts.append(len(f))
    f_arr, d_arr = np.array(ftok), np.array(dtok)
    sep = f_arr == "|"
    if not np.array_equal(sep, d_arr == "|"):
        raise ConfigError(f"{dur_files[0]}: '|' separators do not line up with {flav_file.name}")
    t_tok = np.repeat(np.asarray(times, np.float64), counts)
    line = np.repeat(np.arange(len(times)), counts)
    batch = np.cumsum(sep) - sep
    vm = ~sep
    flavor = pd.Series(f_arr[vm])
    cores = flavor.map({k: v[0] for k, v in fmap.items()})
    mem = flavor.map({k: v[1] for k, v in fmap.items()})
    if cores.isna().any():
        raise ConfigError(f"{flav_file}: unknown flavor {flavor[cores.isna()].iloc[0]!r}")
    dser = pd.Series(d_arr[vm])
    kind = dser.str[0].to_numpy()
    try:
        k = dser.str[1:].astype(np.int64).to_numpy()
    except ValueError:
        raise ConfigError(f"{dur_files[0]}: duration tokens must be U<k> or C<k>") from None
    if not np.isin(kind, ["U", "C"]).all() or k.min() < 0 or k.max() >= len(lo):
        raise ConfigError(f"{dur_files[0]}: duration tokens must be U<k> or C<k>, k < {len(lo)}")

    arrival = t_tok[vm]
    if spread == "even":
        vm_line = line[vm]
        first = np.searchsorted(vm_line, vm_line, side="left")
        n_line = np.bincount(vm_line, minlength=len(times))[vm_line]
        arrival = arrival + _BIN * (np.arange(len(vm_line)) - first) / n_line
    if lifetime == "lower":
        life = lo[k]
    elif lifetime == "mid":
        life = (lo[k] + hi[k]) / 2
    else:
        life = lo[k] + np.random.default_rng(seed).random(len(k)) * (hi[k] - lo[k])
    censored = kind == "C"
    duration = np.where(censored, horizon - arrival, life)
    out = pd.DataFrame({
        "id": np.arange(len(arrival), dtype=np.int64), "arrival": arrival,
        "duration": duration.astype(np.float64), "cpu": cores.to_numpy(np.float64),
        "mem": mem.to_numpy(np.float64), "censored": censored, "batch": batch[vm],
        "flavor": flavor.to_numpy(), "duration_bin": k,
    })
    out.attrs = {"source": str(d), "split": split, "horizon": horizon, "rows_read": len(out),
                 "dropped": {}}
    return out


# ---------------------------------------------------------------------- Alibaba 2018
ALIBABA_TASK_COLUMNS = ["task_name", "instance_num", "job_name", "task_type", "status",
                        "start_time", "end_time", "plan_cpu", "plan_mem"]


def _read_alibaba_table(path: Path, columns: list[str], table: str,
                        numeric: tuple[str, ...]) -> pd.DataFrame:
    """An Alibaba 2018 table (headerless as published, or with the schema's header: its first
    column name starts the file), with ``numeric`` columns parsed as numbers. A missing
    column or a value that is not a number is a :class:`ConfigError` naming the file, the
    line and the table the file was expected to be."""
    if not path.is_file():
        raise ConfigError(f"{path}: no such file")
    with open(path) as f:
        header = f.readline().startswith(columns[0])
    df = read_csv(path, header=0 if header else None, names=None if header else columns)
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ConfigError(f"{path}: columns {missing} not found; columns are: "
                          f"{', '.join(map(str, df.columns))}")
    for col in numeric:
        num = pd.to_numeric(df[col], errors="coerce")
        bad = num.isna() & df[col].notna()
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            raise ConfigError(f"{path}: line {i + 1 + header}: column {col!r} is not a number: "
                              f"{df[col].iloc[i]!r} (is this a {table} file?)")
        df[col] = num
    return df


def import_alibaba2018(path: str | Path, statuses: tuple[str, ...] | list[str] | None = (
        "Terminated",), expand_instances: bool = False) -> pd.DataFrame:
    """Alibaba cluster-trace-v2018 ``batch_task`` (with or without its header line).

    One row per task: arrival = start_time, duration = end_time − start_time, cpu =
    plan_cpu/100 (cores), mem = plan_mem/100 (fraction of a machine's memory), instances =
    instance_num (missing → 1). Dropped, in this order and counted in ``attrs['dropped']``:
    status not in ``statuses`` (``None`` keeps all), missing plan_cpu/plan_mem, end < start.
    ``expand_instances`` repeats each task once per instance (ids ``job/task#i``).
    """
    path = Path(path)
    df = _read_alibaba_table(path, ALIBABA_TASK_COLUMNS, "batch_task", (
        "instance_num", "start_time", "end_time", "plan_cpu", "plan_mem"))
    rows_read, dropped = len(df), {}
    if statuses is not None:
        keep = df["status"].isin(list(statuses))
        dropped["status"], df = int((~keep).sum()), df[keep]
    keep = df["plan_cpu"].notna() & df["plan_mem"].notna()
    dropped["missing_plan"], df = int((~keep).sum()), df[keep]
    keep = df["end_time"] >= df["start_time"]
    dropped["end_before_start"], df = int((~keep).sum()), df[keep]
    instances = df["instance_num"].fillna(1).astype(np.int64)
    out = pd.DataFrame({
        "id": (df["job_name"].astype(str) + "/" + df["task_name"].astype(str)).to_numpy(),
        "arrival": df["start_time"].to_numpy(np.float64),
        "duration": (df["end_time"] - df["start_time"]).to_numpy(np.float64),
        "cpu": df["plan_cpu"].to_numpy(np.float64) / 100.0,
        "mem": df["plan_mem"].to_numpy(np.float64) / 100.0,
        "instances": instances.to_numpy(),
        "job": df["job_name"].astype(str).to_numpy(),
        "task": df["task_name"].astype(str).to_numpy(),
        "task_type": df["task_type"].to_numpy(),
        "status": df["status"].astype(str).to_numpy(),
    })
    if expand_instances:
        rep = out["instances"].to_numpy()
        out = out.loc[out.index.repeat(rep)].reset_index(drop=True)
        idx = np.arange(len(out)) - np.repeat(np.cumsum(rep) - rep, rep)
        out["id"] = out["id"] + "#" + pd.Series(idx).astype(str)
    out = out.sort_values("arrival", kind="stable").reset_index(drop=True)
    out.attrs = {"source": str(path), "rows_read": rows_read, "dropped": dropped,
                 "instances_filled": int(df["instance_num"].isna().sum())}
    return out


# ---------------------------------------------------------------------- Azure 2020
AZURE2020_COLUMNS = ["vmId", "vmTypeId", "priority", "starttime", "endtime", "core", "memory"]
_AZURE2020_SQL = ("SELECT vmId, vm.vmTypeId AS vmTypeId, priority, starttime, endtime, core, "
                  "memory, machineId FROM vm JOIN vmType ON vm.vmTypeId = vmType.vmTypeId "
                  "WHERE machineId = ? ORDER BY vm.rowid")


def _read_azure2020_table(path: Path, columns: list[str], sql: str,
                          params: tuple) -> pd.DataFrame:
    """An Azure Packing 2020 table: the upstream sqlite file (``sql`` with ``params``, read
    only) or a CSV export; a missing column is a :class:`ConfigError` naming the file."""
    if path.suffix in (".sqlite", ".sqlite3", ".db"):
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
            df = pd.read_sql_query(sql, con, params=params)
    else:
        df = read_csv(path)
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ConfigError(f"{path}: columns {missing} not found; columns are: "
                          f"{', '.join(map(str, df.columns))}")
    return df


def import_azure2020(requests: str | Path, horizon_days: float = 90.0,
                     machine_id: int = 16) -> pd.DataFrame:
    """Azure Trace for Packing 2020: a CSV of the upstream query (``vmId, vmTypeId,
    priority, starttime, endtime, core, memory[, machineId]``) or the official sqlite file
    (queried for ``machine_id``).

    arrival = starttime × 86400 s; duration = (endtime − starttime) × 86400 s; an empty
    endtime (alive at the end of the data) gets duration = horizon_days × 86400 − arrival and
    ``censored = True``; cpu / mem = the VM type's fractions of one machine; priority kept.
    Rows with endtime < starttime are dropped (counted).
    """
    path = Path(requests)
    if not path.is_file():
        raise ConfigError(f"{path}: no such file")
    df = _read_azure2020_table(path, AZURE2020_COLUMNS, _AZURE2020_SQL, (machine_id,))
    rows_read = len(df)
    start = df["starttime"].to_numpy(np.float64) * 86400.0
    end_raw = pd.to_numeric(df["endtime"], errors="coerce").to_numpy(np.float64)
    censored = np.isnan(end_raw)
    end = np.where(censored, horizon_days * 86400.0, end_raw * 86400.0)
    keep = end >= start
    out = pd.DataFrame({
        "id": df["vmId"].to_numpy(), "arrival": start, "duration": end - start,
        "cpu": df["core"].to_numpy(np.float64), "mem": df["memory"].to_numpy(np.float64),
        "priority": df["priority"].to_numpy(), "censored": censored,
        "vm_type": df["vmTypeId"].to_numpy(),
        "machine_id": (df["machineId"].to_numpy() if "machineId" in df.columns
                       else np.full(rows_read, machine_id)),
    })[keep]
    out = out.sort_values("arrival", kind="stable").reset_index(drop=True)
    out.attrs = {"source": str(path), "rows_read": rows_read, "horizon_days": horizon_days,
                 "dropped": {"end_before_start": int((~keep).sum())}}
    return out


# ---------------------------------------------------------------------- kinds tables
ALIBABA_CONTAINER_COLUMNS = ["container_id", "machine_id", "time_stamp", "app_du", "status",
                             "cpu_request", "cpu_limit", "mem_size"]


def import_alibaba2018_containers(path: str | Path) -> pd.DataFrame:
    """Alibaba cluster-trace-v2018 ``container_meta`` (no header, or the schema's header).

    One row per line of the file (a container has one line per status event; the Nara
    authors draw lines, so a container counts once per event): id = container_id, arrival =
    time_stamp, cpu = cpu_request/100 (cores), mem = mem_size/100 (fraction of a machine's
    memory), and the raw ``cpu_request`` and ``mem_size`` kept (so a rule written on the raw
    units, e.g. ``int(mem_size * 5)``, is applied to exactly the trace's numbers). Rows with
    a missing cpu_request or mem_size are dropped (counted). Sorted by arrival (stable).
    """
    path = Path(path)
    df = _read_alibaba_table(path, ALIBABA_CONTAINER_COLUMNS, "container_meta",
                             ("time_stamp", "cpu_request", "mem_size"))
    rows_read = len(df)
    keep = df["cpu_request"].notna() & df["mem_size"].notna()
    dropped = {"missing_request": int((~keep).sum())}
    df = df[keep]
    out = pd.DataFrame({
        "id": df["container_id"].astype(str).to_numpy(),
        "arrival": df["time_stamp"].to_numpy(np.float64),
        "cpu": df["cpu_request"].to_numpy(np.float64) / 100.0,
        "mem": df["mem_size"].to_numpy(np.float64) / 100.0,
        "cpu_request": df["cpu_request"].to_numpy(np.float64),
        "mem_size": df["mem_size"].to_numpy(np.float64),
        "status": df["status"].astype(str).to_numpy(),
    })
    out = out.sort_values("arrival", kind="stable").reset_index(drop=True)
    out.attrs = {"source": str(path), "rows_read": rows_read, "dropped": dropped}
    return out


AZURE2020_VMTYPE_COLUMNS = ["vmTypeId", "core", "memory"]


def import_azure2020_vmtypes(path: str | Path, machine_id: int | None = None) -> pd.DataFrame:
    """Azure Trace for Packing 2020 ``vmType`` table: a CSV (``vmTypeId, core, memory[,
    machineId, nic, hdd, ssd]``) or the official sqlite file.

    One row per (VM type, machine type): id = vmTypeId, cpu / mem = ``core`` / ``memory``
    (fractions of one machine of that type), machine_id (``machine_id`` when the file has
    none), and nic / hdd / ssd when present. ``machine_id`` keeps only that machine type's
    rows (``None``: all). File order (vmTypeId, then machine type) is kept.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such file")
    df = _read_azure2020_table(path, AZURE2020_VMTYPE_COLUMNS,
                               "SELECT * FROM vmType ORDER BY rowid", ())
    rows_read = len(df)
    if "machineId" not in df.columns:
        if machine_id is None:
            raise ConfigError(f"{path}: no machineId column; give machine_id (the machine "
                              "type the fractions refer to)")
        df["machineId"] = machine_id
    elif machine_id is not None:
        df = df[df["machineId"] == machine_id]
    out = pd.DataFrame({
        "id": df["vmTypeId"].to_numpy(), "cpu": df["core"].to_numpy(np.float64),
        "mem": df["memory"].to_numpy(np.float64), "machine_id": df["machineId"].to_numpy(),
    })
    for extra in ("nic", "hdd", "ssd"):
        if extra in df.columns:
            out[extra] = df[extra].to_numpy(np.float64)
    out.attrs = {"source": str(path), "rows_read": rows_read,
                 "dropped": {"other_machine": rows_read - len(out)}}
    return out
