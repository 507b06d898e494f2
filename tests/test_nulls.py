"""Missing values are Parquet nulls in every table (issue #48, part 1): where a value does
not apply dcsim writes a null, never NaN, typed columns stay typed (a rejected pod's
``node`` is a null int64, read by pandas as ``Int64``), every column that holds a null
declares when (``Col.null`` in ``dcsim.results.schema``), and pandas, polars and duckdb
give the same ``mean``/``avg`` and ``count`` of every numeric column of every table of one
reduced shipped experiment of each mode. A sweep's ``null`` point prints as ``none``."""

from __future__ import annotations

import math
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from dcsim.results.schema import TABLES, Col, Table
from dcsim.results.writer import arrow_column, write_summary
from tests import golden
from tests.helpers.cli import ok

#: one shipped experiment per mode, reduced further: (name, extra --set overrides)
PER_MODE = {
    "loss": ("failures_fabric", []),       # links, failures, a `null` sweep point
    "queue": ("deeprm_load_sweep", []),
    "vm_online": ("vm_online_azure", []),
    "gpu": ("fgd_default", ["gpu.pods.limit=250"]),
    "reschedule": ("vmr_static", ["vm.mapping.synthetic=production_small",
                                  "vm.mapping.hosts=12"]),
}


@pytest.fixture(scope="module")
def outputs(tmp_path_factory) -> dict[str, tuple[Path, str]]:
    from dcsim.runner import load_experiment, run_experiment

    out = {}
    for mode, (name, sets) in PER_MODE.items():
        folder = tmp_path_factory.mktemp(name)
        how = golden.REDUCE.get(name, {})
        exp = load_experiment(golden.reduced_file(name, folder), seeds=1,
                              sets=[*how.get("sets", []), *sets])
        assert exp.spec.mode == mode
        run_experiment(exp, out=folder / "out")
        out[mode] = (folder / "out", name)
    return out


def tables_of(out: Path) -> dict[str, list[Path]]:
    files = {"summary": [out / "summary.parquet"]}
    for d in sorted(p for p in out.iterdir() if p.is_dir() and p.name not in ("runs",)):
        found = sorted(d.rglob("*.parquet"))
        if found:
            files[d.name] = found
    return files


def declared(mode: str, table: str) -> Table | None:
    return TABLES[mode].get(table)


def null_allowed(mode: str, table: str, column: str, params: set[str]) -> bool:
    """Whether ``column`` may hold a null: a column whose declaration says when, a sweep
    parameter, or in the summary one that only some runs have (``when``)."""
    t = declared(mode, table)
    if column in params:
        return True
    cols: list[Col] = [c for c in (t.columns if t else ()) if column in c.expand([column])
                       or c.expands_to(column) or c.name == column]
    if any(c.nullable for c in cols):
        return True
    return table == "summary" and any(c.when for c in cols)


@pytest.mark.parametrize("mode", list(PER_MODE))
def test_no_nan_and_every_null_declared(outputs, mode):
    out, name = outputs[mode]
    params = set(pd.read_parquet(out / "summary.parquet").columns) - {
        c for t in TABLES[mode].values() for col in t.columns for c in [col.name]}
    seen_null = 0
    for table, files in tables_of(out).items():
        for f in files:
            t = pq.read_table(f)
            for col in t.column_names:
                c = t.column(col)
                if pa.types.is_floating(c.type):
                    assert not pc.any(pc.is_nan(c)).as_py(), f"{name} {table}.{col}: NaN"
                if c.null_count:
                    seen_null += 1
                    assert null_allowed(mode, table, col, params), \
                        f"{name} {table}.{col}: {c.null_count} nulls, not declared (Col.null)"
    if mode in ("loss", "gpu", "reschedule"):
        assert seen_null, f"{name}: expected some not-applicable values in these runs"


def numeric(df: pd.DataFrame) -> list[str]:
    return [c for c in df.columns if c not in ("allocator", "seed")
            and pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])]


@pytest.mark.parametrize("mode", list(PER_MODE))
def test_pandas_polars_and_duckdb_agree_on_every_aggregate(outputs, mode):
    out, name = outputs[mode]
    for table, files in tables_of(out).items():
        where = (str(out / "summary.parquet") if table == "summary"
                 else str(out / table / "**" / "*.parquet"))
        pdf = pd.read_parquet(files[0] if table == "summary" else out / table)
        plf = (pl.read_parquet(where) if table == "summary"
               else pl.read_parquet(where, hive_partitioning=True))
        for col in numeric(pdf):
            want_n, want_mean = int(pdf[col].count()), pdf[col].mean()
            got_pl = plf.select(pl.col(col).count().alias("n"),
                                pl.col(col).cast(pl.Float64).mean().alias("mean")).row(0)
            q = (f'select count("{col}"), avg("{col}") from read_parquet(\'{where}\''
                 + ("" if table == "summary" else ", hive_partitioning=true") + ")")
            (got_db,) = duckdb.sql(q).fetchall()
            what = f"{name} {table}.{col}"
            assert got_pl[0] == got_db[0] == want_n, what
            if want_n == 0:
                assert got_pl[1] is None and got_db[1] is None, what
                continue
            want = float(want_mean)
            assert not math.isnan(want), what
            assert got_pl[1] == pytest.approx(want, rel=1e-9, abs=1e-12), what
            assert got_db[1] == pytest.approx(want, rel=1e-9, abs=1e-12), what


def test_a_grouped_mean_agrees_too(outputs):
    out, name = outputs["loss"]
    where = str(out / "requests" / "**" / "*.parquet")
    want = pd.read_parquet(out / "requests").groupby("allocator", observed=True)[
        "footprint"].mean().sort_index()
    assert pd.read_parquet(out / "requests")["footprint"].isna().any()   # rejections
    got_db = duckdb.sql(f"select allocator, avg(footprint) from read_parquet('{where}', "
                        "hive_partitioning=true) group by all order by allocator").fetchall()
    got_pl = (pl.read_parquet(where, hive_partitioning=True).group_by("allocator")
              .agg(pl.col("footprint").mean()).sort("allocator").rows())
    assert [a for a, _ in got_db] == [a for a, _ in got_pl] == [str(a) for a in want.index]
    for (_, d), (_, p), w in zip(got_db, got_pl, want.to_numpy(), strict=True):
        assert d == pytest.approx(w, rel=1e-9) and p == pytest.approx(w, rel=1e-9)


def test_typed_columns_stay_typed(outputs):
    pods = pd.read_parquet(outputs["gpu"][0] / "pods")
    assert str(pods["node"].dtype) == "Int64"
    rejected = ~pods["accepted"]
    assert rejected.any() and pods.loc[rejected, "node"].isna().all()
    assert pods.loc[~rejected, "node"].notna().all()
    assert pl.read_parquet(str(outputs["gpu"][0] / "pods" / "**" / "*.parquet"),
                           hive_partitioning=True).schema["node"] == pl.Int64
    req = pd.read_parquet(outputs["loss"][0] / "requests")
    assert str(req["locality"].dtype) == "Int64"
    assert req.loc[~req["accepted"], ["start", "end", "footprint", "locality"]].isna().all().all()
    summary = pd.read_parquet(outputs["loss"][0] / "summary.parquet")
    assert str(summary["n_failures"].dtype) == "Int64"   # null where the point has none
    assert summary["n_failures"].isna().any() and summary["n_failures"].notna().any()


def test_a_null_sweep_point_prints_as_none_in_the_run_table(tmp_path):
    import yaml

    from tests.helpers.configs import small_experiment

    cfg = small_experiment("nullpoint", seed=1, requests=200, allocators=["first_fit"],
                           matrix={"metrics.sample_interval": [None, 5.5]})
    exp = tmp_path / "exp.yaml"
    exp.write_text(yaml.safe_dump(cfg, sort_keys=False))
    r = ok("run", exp, "--out", tmp_path / "out")
    rows = [line.split() for line in r.output.splitlines() if line.startswith("first_fit")]
    assert [row[1] for row in rows] == ["none", "5.5"], r.output
    assert "nan" not in r.output


def test_arrow_column_writes_nulls_for_nan_and_for_the_sentinel():
    a = arrow_column(np.array([1.0, np.nan, 3.0]), pa.float64())
    assert a.null_count == 1 and a.to_pylist() == [1.0, None, 3.0]
    b = arrow_column(np.array([4, -1, 0]), pa.int64(), sentinel=-1)
    assert b.type == pa.int64() and b.to_pylist() == [4, None, 0]
    assert arrow_column([None, None], None).type == pa.float64()
    assert arrow_column([1.5, float("nan")], None).to_pylist() == [1.5, None]


def test_the_summary_keeps_an_int_column_that_some_runs_lack_as_int(tmp_path):
    rows = [{"run_id": "a", "n_failures": 3, "x": 1.5}, {"run_id": "b", "x": math.nan},
            {"run_id": "c", "n_failures": np.int64(0), "x": 2.0}]
    path = write_summary(tmp_path, rows, ["a", "b", "c"])
    t = pq.read_table(path)
    assert t.schema.field("n_failures").type == pa.int64()
    assert t.column("n_failures").to_pylist() == [3, None, 0]
    assert t.column("x").to_pylist() == [1.5, None, 2.0]
    assert str(pd.read_parquet(path)["n_failures"].dtype) == "Int64"


def test_every_file_of_a_table_has_the_same_columns_and_the_records_still_verify(outputs):
    """A sweep whose points differ (failures_fabric: no failures at its `null` point) gives
    one column list per table; the rewritten files' records still verify."""
    from dcsim.results.verify import verify
    from dcsim.results.writer import run_records

    out, _ = outputs["loss"]
    for table, files in tables_of(out).items():
        names = {tuple(pq.read_schema(f).names) for f in files}
        assert len(names) == 1, f"{table}: {len(names)} different column lists"
    ts = pd.read_parquet(out / "timeseries")
    assert "avail_cpu" in ts.columns            # pandas saw the later files' columns
    none = ts["failures"].isna()
    assert none.any() and ts.loc[none, "avail_cpu"].isna().all()
    assert ts.loc[~none, "avail_cpu"].notna().all()
    found = verify(out, run_records(out))
    assert not found.broken and not found.unverified


def test_merged_order_keeps_each_column_after_its_neighbour():
    from dcsim.results.unify import merged_order

    a = pa.schema([("time", pa.float64()), ("util", pa.float64()), ("p", pa.string())])
    b = pa.schema([("time", pa.float64()), ("util", pa.float64()), ("avail", pa.float64()),
                   ("p", pa.string())])
    assert [f.name for f in merged_order([a, b])] == ["time", "util", "avail", "p"]
    assert [f.name for f in merged_order([b, a])] == ["time", "util", "avail", "p"]
    clash = pa.schema([("time", pa.int64())])
    assert merged_order([a, clash]) is None
