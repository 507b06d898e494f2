"""Trace replay from CSV/Parquet, the importers, and the committed slices."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dcsim.csv_tables import read_csv
from dcsim.errors import ConfigError
from dcsim.workload import (
    TraceSource,
    import_alibaba2018,
    import_azure2017,
    import_azure2020,
    import_trace,
    write_table,
)
from dcsim.workload.importers import (
    azure2017_bins,
    import_alibaba2018_containers,
    import_azure2020_vmtypes,
)

ROOT = Path(__file__).resolve().parents[1]
RAW = ROOT / "tests" / "data" / "traces"
SLICES = ROOT / "traces"
# the raw public traces (traces/make_slices.py's layout), when a developer has them
RAW_TRACES = Path(os.environ.get("DCSIM_RAW_TRACES", "/nonexistent"))
needs_raw = pytest.mark.skipif(not RAW_TRACES.is_dir(),
                               reason="raw traces not present (set DCSIM_RAW_TRACES)")


def replay(src: TraceSource) -> dict[str, np.ndarray]:
    bs = list(src.batches(np.random.default_rng(0)))
    out = {k: np.concatenate([getattr(b, k) for b in bs])
           for k in ("arrival", "duration", "demand", "bandwidth")}
    for k in bs[0].attrs if bs else ():
        out[k] = np.concatenate([b.attrs[k] for b in bs])
    out["n_batches"] = len(bs)
    return out


@pytest.fixture
def small_csv(tmp_path) -> Path:
    path = tmp_path / "x.csv"
    pd.DataFrame({"t": [5.0, 6.0, 6.0, 9.0], "len": [1.0, 2.0, 3.0, 4.0],
                  "plan_cpu": [100, 50, 200, 400], "mem": [0.1, 0.2, 0.3, 0.4],
                  "prio": [0, 1, 0, 1]}).to_csv(path, index=False)
    return path


# ---------------------------------------------------------------------- replay
def test_column_mapping_scale_and_time(small_csv):
    """Mapped columns are renamed, scaled, time-scaled and shifted to start at 0."""
    src = TraceSource(small_csv, columns={"arrival": "t", "duration": "len", "cpu": "plan_cpu",
                                          "priority": "prio"},
                      scale={"cpu": 0.01}, time_scale=10, resources=("cpu", "mem"))
    r = replay(src)
    assert list(r["arrival"]) == [0, 10, 10, 40] and list(r["duration"]) == [10, 20, 30, 40]
    assert r["demand"].tolist() == [[1, 0.1], [0.5, 0.2], [2, 0.3], [4, 0.4]]
    assert list(r["bandwidth"]) == [0, 0, 0, 0] and list(r["priority"]) == [0, 1, 0, 1]


def test_end_column_constant_columns_cap_and_limit(small_csv):
    """'end' gives duration = end − arrival; a number is a constant column; cap bounds;
    limit stops early; start_at_zero can be off."""
    src = TraceSource(small_csv, columns={"arrival": "len", "end": "t", "cpu": "plan_cpu",
                                          "gpu": 2, "bandwidth": 0.5},
                      cap={"cpu": 150}, limit=3, start_at_zero=False,
                      resources=("cpu", "mem", "gpu"))
    r = replay(src)
    assert list(r["arrival"]) == [1, 2, 3] and list(r["duration"]) == [4, 4, 3]
    assert r["demand"][:, 0].tolist() == [100, 50, 150] and set(r["demand"][:, 2]) == {2}
    assert set(r["bandwidth"]) == {0.5}


def test_missing_column_message(small_csv):
    """A mapped column absent from the file names the file, the column and the mapping."""
    with pytest.raises(ConfigError) as e:
        TraceSource(small_csv, columns={"arrival": "t", "duration": "len", "cpu": "cpu_plan"})
    assert str(e.value) == (f"{small_csv}: column 'cpu_plan' (mapped from 'cpu') not found; "
                            "columns are: t, len, plan_cpu, mem, prio")
    with pytest.raises(ConfigError, match="column 'arrival' \\(map it in columns"):
        TraceSource(small_csv)


def test_unsorted_file_is_refused_unless_sort(tmp_path):
    """Out-of-order arrivals raise a ConfigError that says how to fix it; sort: true sorts."""
    path = tmp_path / "u.csv"
    pd.DataFrame({"arrival": [1, 3, 2, 4], "duration": 1, "cpu": [1, 2, 3, 4],
                  "mem": 0}).to_csv(path, index=False)
    with pytest.raises(ConfigError, match="request 3 arrives before .*sort: true"):
        replay(TraceSource(path, batch_size=2))
    r = replay(TraceSource(path, sort=True, batch_size=2))
    assert list(r["arrival"]) == [0, 1, 2, 3] and list(r["demand"][:, 0]) == [1, 3, 2, 4]


def test_missing_values_name_the_row_or_are_dropped(tmp_path):
    """An empty mapped value names its row; dropna: true drops and counts such rows."""
    path = tmp_path / "n.csv"
    path.write_text("arrival,duration,cpu,mem\n0,1,1,1\n1,1,,1\n2,1,3,1\n3,x,1,1\n")
    with pytest.raises(ConfigError, match=r"row 2: column 'cpu' is empty or not a number "
                       r"\(it is empty\)"):
        replay(TraceSource(path))
    text = tmp_path / "x.csv"
    text.write_text("arrival,duration,cpu,mem\n0,1,1,1\n3,x,1,1\n")
    with pytest.raises(ConfigError, match=r"row 2: column 'duration' is empty or not a "
                       r"number \(it holds 'x'\)"):
        replay(TraceSource(text))
    src = TraceSource(path, dropna=True, batch_size=2)
    r = replay(src)
    assert list(r["arrival"]) == [0, 2] and src.dropped == 2


def test_negative_duration_is_refused(tmp_path):
    """A negative duration (e.g. end before start) names the row."""
    path = tmp_path / "e.csv"
    path.write_text("arrival,end,cpu,mem\n0,5,1,1\n1,0,1,1\n")
    with pytest.raises(ConfigError, match="row 2: duration is negative"):
        replay(TraceSource(path, columns={"end": "end"}))


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_large_file_streams_in_chunks(tmp_path, suffix):
    """A 200k-row file yields several batches whose concatenation equals the file."""
    n = 200_000
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"arrival": np.cumsum(rng.exponential(1, n)), "duration": rng.random(n),
                       "cpu": rng.integers(1, 9, n).astype(float), "mem": rng.random(n)})
    path = tmp_path / f"big{suffix}"
    if suffix == ".parquet":
        df.to_parquet(path, row_group_size=50_000)
    else:
        write_table(df, path)
    r = replay(TraceSource(path, batch_size=65536, start_at_zero=False))
    assert r["n_batches"] == 4
    # exact in CSV too: written in full precision, parsed correctly rounded (in chunks)
    np.testing.assert_array_equal(r["arrival"], df["arrival"])
    np.testing.assert_array_equal(r["demand"], df[["cpu", "mem"]].to_numpy())


def test_dataframe_source_and_unknown_format(tmp_path):
    """A DataFrame replays like a file; an unknown extension is refused."""
    df = pd.DataFrame({"arrival": [2.0, 3.0], "duration": [1.0, 1.0], "cpu": [1, 2],
                       "mem": [0, 0]})
    assert list(replay(TraceSource(df))["arrival"]) == [0, 1]
    (tmp_path / "t.json").write_text("{}")
    with pytest.raises(ConfigError, match="unknown table format"):
        TraceSource(tmp_path / "t.json")


# ---------------------------------------------------------------------- importers (samples)
def test_azure2017_sample_decodes_flavors_bins_and_censoring():
    """The rnn sample: flavors map to (cores, GB), '|' groups to batches, C tokens are
    censored at the horizon."""
    df = import_azure2017(RAW / "azure2017", "dev")
    assert df["arrival"].is_monotonic_increasing and df["id"].is_unique
    first = df.iloc[0]
    assert (first.arrival, first.cpu, first.mem, first.duration, first.batch) == (
        1_800_000, 8, 14, 300, 0)
    cens = df[df["censored"]]
    assert len(cens) > 0
    assert np.array_equal(cens["duration"], 2_100_000 - cens["arrival"])
    u = df[~df["censored"]]
    lo, hi = azure2017_bins()
    assert np.array_equal(u["duration"], (lo[u["duration_bin"]] + hi[u["duration_bin"]]) / 2)
    even = import_azure2017(RAW / "azure2017", "dev", spread="even", lifetime="lower")
    assert even["arrival"].is_monotonic_increasing
    assert (even["arrival"] - df["arrival"]).between(0, 300, inclusive="left").all()


def test_alibaba2018_sample_filters_and_converts():
    """Terminated, complete rows only; cpu in cores, mem as a fraction; sorted by arrival."""
    raw = pd.read_csv(RAW / "alibaba2018_batch_task_head.csv")
    df = import_alibaba2018(RAW / "alibaba2018_batch_task_head.csv")
    term = raw[raw["status"] == "Terminated"]
    ok = term[term["plan_cpu"].notna() & term["plan_mem"].notna()]
    assert len(df) == len(ok)
    assert df.attrs["dropped"]["status"] == (raw["status"] != "Terminated").sum()
    assert df["arrival"].is_monotonic_increasing
    row = df.set_index("id").loc[f"{ok.iloc[0].job_name}/{ok.iloc[0].task_name}"]
    assert row.cpu == ok.iloc[0].plan_cpu / 100 and row.mem == ok.iloc[0].plan_mem / 100
    every = import_alibaba2018(RAW / "alibaba2018_batch_task_head.csv", statuses=None)
    planned = raw[raw["plan_cpu"].notna() & raw["plan_mem"].notna()]
    late = (planned["end_time"] < planned["start_time"]).sum()
    assert every.attrs["dropped"] == {"missing_plan": len(raw) - len(planned),
                                      "end_before_start": late}
    assert (every["duration"] >= 0).all() and len(every) < len(planned)
    many = import_alibaba2018(RAW / "alibaba2018_batch_task_head.csv", expand_instances=True)
    assert len(many) == df["instances"].sum()


def test_azure2020_sample_converts_days_and_censors(tmp_path):
    """Fractional days become seconds; an empty endtime is censored at the horizon; the
    official sqlite layout gives the same table."""
    raw = pd.read_csv(RAW / "azure2020_requests_head.csv")
    df = import_azure2020(RAW / "azure2020_requests_head.csv")
    assert len(df) == len(raw) and df["censored"].sum() == 10
    np.testing.assert_allclose(df["arrival"], raw["starttime"] * 86400)
    c = df[df["censored"]]
    np.testing.assert_allclose(c["duration"] + c["arrival"], 90 * 86400)
    db = tmp_path / "trace.sqlite"
    with sqlite3.connect(db) as con:
        raw[["vmId", "vmTypeId", "priority", "starttime", "endtime"]].to_sql("vm", con)
        raw[["vmTypeId", "core", "memory", "machineId"]].drop_duplicates().to_sql("vmType", con)
    pd.testing.assert_frame_equal(import_azure2020(db), df, check_dtype=False)


def test_import_trace_dispatch_and_write_table(tmp_path):
    """import_trace dispatches by name; write_table round-trips Parquet and CSV."""
    df = import_trace("azure2020", RAW / "azure2020_requests_head.csv", horizon_days=14)
    assert df.attrs["horizon_days"] == 14
    for name in ("t.parquet", "t.csv"):
        back = pd.read_parquet(p) if (p := write_table(df, tmp_path / name)).suffix == \
            ".parquet" else read_csv(p)
        np.testing.assert_array_equal(back["arrival"], df["arrival"])
    with pytest.raises(ConfigError, match="unknown trace format 'google'"):
        import_trace("google", "x")
    with pytest.raises(ConfigError, match="azure2020 importer"):
        import_trace("azure2020", RAW / "azure2020_requests_head.csv", split="dev")


# ---------------------------------------------------------------------- committed slices
@pytest.mark.parametrize("name", ["azure2017_dev_slice.csv", "alibaba2018_slice.csv",
                                  "azure2020_slice.csv"])
def test_committed_slices_replay(name):
    """Each slice is small, has the standard columns, and replays 5,000 sorted requests."""
    path = SLICES / name
    assert path.stat().st_size < 1_000_000
    cols = pd.read_csv(path, nrows=0).columns
    assert list(cols[:5]) == ["id", "arrival", "duration", "cpu", "mem"]
    r = replay(TraceSource(path))
    assert len(r["arrival"]) == 5000 and r["arrival"][0] == 0
    assert np.all(np.diff(r["arrival"]) >= 0) and np.all(r["duration"] >= 0)


@pytest.mark.parametrize(("name", "rows", "extra"), [
    ("alibaba2018_container_meta_slice.csv", 5000, ["cpu_request", "mem_size", "status"]),
    ("azure2020_vmtypes_machine16.csv", 281, ["machine_id"]),
])
def test_committed_kinds_tables(name, rows, extra):
    """The tables of request kinds the Nara sets draw from: standard cpu / mem columns (no
    duration), read by a resampled trace without timing."""
    path = SLICES / name
    assert path.stat().st_size < 300_000
    df = pd.read_csv(path)
    assert len(df) == rows and {"id", "cpu", "mem", *extra} <= set(df.columns)
    assert "duration" not in df.columns
    r = replay(TraceSource(path, timing=False))
    assert len(r["demand"]) == rows and (r["duration"] == 0).all()


def test_kinds_importers_on_raw_heads(tmp_path):
    """container_meta: cores / fraction plus the raw units, sorted by time stamp; vmType: the
    fractions, machine_id given or filtered, nic kept when present; the sqlite form."""
    cm = import_alibaba2018_containers(RAW / "alibaba2018_container_meta_head.csv")
    assert len(cm) == 40 and cm["arrival"].is_monotonic_increasing
    np.testing.assert_allclose(cm["cpu"] * 100, cm["cpu_request"])
    np.testing.assert_allclose(cm["mem"] * 100, cm["mem_size"])
    assert cm.loc[0, "id"] == "c_1" and cm.loc[0, "cpu_request"] == 400
    vt = import_azure2020_vmtypes(RAW / "azure2020_vm_types_head.csv", machine_id=16)
    assert len(vt) == 40 and (vt["machine_id"] == 16).all() and vt.loc[0, "id"] == 0
    with pytest.raises(ConfigError, match="no machineId column"):
        import_azure2020_vmtypes(RAW / "azure2020_vm_types_head.csv")
    db = tmp_path / "p.sqlite"
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE vmType (vmTypeId, machineId, core, memory, hdd, ssd, nic)")
        con.executemany("INSERT INTO vmType VALUES (?, ?, ?, ?, ?, ?, ?)",
                        [(0, 1, 0.5, 0.25, 0, 0, 0.1), (0, 16, 0.1, 0.05, 0, 0, 0.02),
                         (1, 16, 0.2, 0.1, 0, 0, 0.0)])
    con.close()
    allm = import_azure2020_vmtypes(db)
    assert len(allm) == 3 and allm["nic"].tolist() == [0.1, 0.02, 0.0]
    m16 = import_azure2020_vmtypes(db, machine_id=16)
    assert m16["cpu"].tolist() == [0.1, 0.2] and m16.attrs["dropped"] == {"other_machine": 1}
    assert len(import_trace("alibaba2018_containers",
                            RAW / "alibaba2018_container_meta_head.csv")) == 40


@needs_raw
def test_kinds_tables_full_samples():
    """container_meta sample: 20,000 lines, none dropped; vmType: 281 machine-16 rows."""
    cm = import_alibaba2018_containers(RAW_TRACES / "alibaba_v2018_sample" /
                                       "alibaba2018_container_meta_sample.csv")
    assert len(cm) == 20_000 and cm.attrs["dropped"] == {"missing_request": 0}
    assert set(cm["cpu_request"]) == {100, 200, 400, 600, 800, 1600, 2400, 3200}
    vt = import_azure2020_vmtypes(RAW_TRACES / "azure_packing_2020_sample" /
                                  "vm_types_machine16.csv", machine_id=16)
    assert len(vt) == 281


@needs_raw
def test_slices_regenerate_identically(tmp_path):
    """python traces/make_slices.py reproduces the committed files byte for byte."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_slices", SLICES / "make_slices.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for p in mod.make_slices(RAW_TRACES, tmp_path / "s") + mod.make_raw_samples(RAW_TRACES,
                                                                           tmp_path / "r"):
        ref = (SLICES / p.name) if p.parent.name == "s" else RAW / p.relative_to(tmp_path / "r")
        assert p.read_bytes() == ref.read_bytes(), p.name


# ---------------------------------------------------------------------- full raw traces
@needs_raw
@pytest.mark.parametrize("split, vms, batches, vcpus, censored", [
    ("dev", 259_159, 53_109, 557_907, 14_317),
    ("test", 410_276, 82_946, 1_004_674, 23_311),
])
def test_azure2017_counts_match_readme(split, vms, batches, vcpus, censored):
    """The decoded streams have the README's VM, batch, vCPU and censored counts."""
    df = import_azure2017(RAW_TRACES / "azure_vm_2017_rnn", split)
    assert len(df) == vms and df["batch"].nunique() == batches
    assert df["cpu"].sum() == vcpus and df["censored"].sum() == censored
    assert df["arrival"].is_monotonic_increasing


@needs_raw
def test_azure2017_interval_map_matches_readme_table():
    """The bins read from v1.interval_map.txt equal the README's table."""
    got = azure2017_bins(RAW_TRACES / "azure_vm_2017_rnn" / "v1.interval_map.txt")
    assert all(np.array_equal(a, b) for a, b in zip(got, azure2017_bins(), strict=True))


@needs_raw
def test_alibaba2018_and_azure2020_counts():
    """Alibaba: 49,227 of 50,000 rows kept (771 status, 2 missing plan); Azure 2020: 5,000
    rows, 77 censored."""
    ali = import_alibaba2018(RAW_TRACES / "alibaba_v2018_sample"
                             / "alibaba2018_batch_task_sample.csv")
    assert len(ali) == 49_227
    assert ali.attrs["dropped"] == {"status": 771, "missing_plan": 2, "end_before_start": 0}
    az = import_azure2020(RAW_TRACES / "azure_packing_2020_sample" /
                          "vm_requests_first5000_machine16.csv")
    assert len(az) == 5000 and az["censored"].sum() == 77 and (az["priority"] == 1).sum() == 1238


@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
def test_parquet_timestamps_and_durations_are_seconds_whatever_their_unit(tmp_path, unit):
    """A Parquet timestamp (or duration) column is read as seconds by its declared unit,
    not as the integers of its storage unit (#47: timestamp[s] became milliseconds)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "t.parquet"
    start = 1_700_000_000
    pq.write_table(pa.table({
        "t": pa.array([start, start + 1, start + 2], type=pa.int64()).cast(
            pa.timestamp("s")).cast(pa.timestamp(unit)),
        "len": (pa.array([1, 2, 3], type=pa.duration("s")) if unit == "s" else pa.array(
            [1_500, 2_000, 250], type=pa.duration("ms")).cast(pa.duration(unit))),
        "cpu": [1.0, 2.0, 3.0]}), path)
    r = replay(TraceSource(path, columns={"arrival": "t", "duration": "len", "cpu": "cpu"},
                           resources=("cpu",)))
    assert r["arrival"].tolist() == [0.0, 1.0, 2.0]
    assert r["duration"].tolist() == ([1.0, 2.0, 3.0] if unit == "s" else [1.5, 2.0, 0.25])


def test_a_parquet_row_group_too_large_for_flat_memory_is_refused(tmp_path, monkeypatch):
    """#47 item 4: a trace's row groups are bounded (MAX_ROW_GROUP) before a replay reads
    one; the message says how to rewrite the file."""
    import dcsim.workload.traces as traces

    path = tmp_path / "t.parquet"
    pd.DataFrame({"arrival": np.arange(10.0), "duration": np.ones(10),
                  "cpu": np.ones(10)}).to_parquet(path, row_group_size=10)
    monkeypatch.setattr(traces, "MAX_ROW_GROUP", 9)
    with pytest.raises(ConfigError, match="a row group of 10 rows, above the 9 .* "
                                          "row_group_size"):
        TraceSource(path, resources=("cpu",))
    monkeypatch.setattr(traces, "MAX_ROW_GROUP", 10)
    assert replay(TraceSource(path, resources=("cpu",)))["arrival"].tolist() == list(
        np.arange(10.0))
