"""Declared result schemas (#17): the writer refuses unknown, missing and ragged columns,
sweep columns have one type per sweep, and docs/reference/outputs.md lists exactly the
declared columns of every mode's tables."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from click.testing import CliRunner

from dcsim.cli import main
from dcsim.results.schema import (
    SUMMARY_HEAD,
    SUMMARY_TAIL,
    TABLES,
    Col,
    SchemaError,
    Table,
    param_types,
    param_value,
)
from dcsim.results.writer import RunWriter

ROOT = Path(__file__).resolve().parent.parent
OUTPUTS = ROOT / "docs" / "reference" / "outputs.md"

TINY = Table("things", (
    Col("id", "int64", "—", "index"),
    Col("<resource>", "float64", "units", "demand"),
    Col("<attribute>", "inferred", "—", "workload columns"),
    Col("ok", "bool", "—", "flag"),
    Col("util_bw_<tier>", "float64", "fraction", "per tier", when="links"),
), "one per thing")


def writer(tmp_path, table=TINY, constants=None, types=None, **families):
    bound = table.bind(**families)
    return RunWriter(tmp_path, "r-s0-x", "lab", 0, constants or {}, {table.name: bound},
                     constant_types=types)


def test_bind_expands_families_and_leaves_out_absent_columns():
    b = TINY.bind(resource=["cpu", "mem"])
    assert [n for n, _ in b.columns] == ["id", "cpu", "mem", "<attribute>", "ok"]
    assert b.open_family is not None
    b2 = TINY.bind(flags=["links"], resource=["cpu"], tier=["host", "rack"], attribute=[])
    assert [n for n, _ in b2.columns] == ["id", "cpu", "ok", "util_bw_host", "util_bw_rack"]
    assert dict(b2.columns)["id"] == pa.int64()


def test_writer_keeps_declared_columns_with_their_types_and_attributes(tmp_path):
    w = writer(tmp_path, constants={"rate": 4}, types={"rate": "float64"}, resource=["cpu"])
    w("things", {"id": np.arange(3), "cpu": [1, 2, 3], "N": [5, 6, 7], "ok": [True] * 3})
    w("things", {"id": np.arange(3, 5), "cpu": [4, 5], "N": [8, 9], "ok": [False] * 2})
    w.commit({"done": 1})
    df = pd.read_parquet(tmp_path / "things" / "allocator=lab" / "seed=0" / "r-s0-x.parquet")
    assert list(df.columns) == ["id", "cpu", "N", "ok", "rate"]
    assert df["cpu"].dtype == np.float64 and df["rate"].dtype == np.float64
    assert df["id"].tolist() == [0, 1, 2, 3, 4] and df["N"].tolist() == [5, 6, 7, 8, 9]


@pytest.mark.parametrize("batch, message", [
    ({"id": [1], "cpu": [1.0], "ok": [True], "N": [1], "extra": [2]},
     "things: unknown column 'extra'"),
    ({"id": [1], "ok": [True]}, "things: column 'cpu' is missing"),
    ({"id": [1, 2], "cpu": [1.0], "ok": [True, False]}, "things: column 'cpu' has 1 values"),
])
def test_writer_refuses_unknown_missing_and_ragged_columns(tmp_path, batch, message):
    table = Table("things", TINY.columns[:2] + TINY.columns[3:4], "x")
    w = writer(tmp_path, table, resource=["cpu"])
    if "N" in batch and "extra" in batch:   # no open family here: N is unknown too
        message = "things: unknown column 'N'"
    with pytest.raises(SchemaError, match=message):
        w("things", batch)
    w.abort()
    assert not list(tmp_path.rglob("*.parquet*"))


def test_a_column_first_seen_in_a_later_batch_is_refused(tmp_path):
    w = writer(tmp_path, resource=["cpu"])
    w("things", {"id": [0], "cpu": [1.0], "ok": [True]})         # no attributes
    with pytest.raises(SchemaError, match="unknown column 'N'"):
        w("things", {"id": [1], "cpu": [1.0], "N": [3], "ok": [True]})
    with pytest.raises(SchemaError, match="table 'other'"):
        w("other", {"id": [1]})
    w.abort()


def test_sweep_columns_get_one_type_for_the_whole_sweep():
    pts = [{"rate": 4, "kind": None, "x": 1, "flag": True, "r": None},
           {"rate": 4.5, "kind": "greedy", "x": 2, "flag": False, "r": None}]
    assert param_types(pts) == {"rate": "float64", "kind": "string", "x": "int64",
                                "flag": "bool", "r": "string"}
    assert param_value({"b": 1, "a": 2}, "string") == '{"a": 2, "b": 1}'
    assert param_value(4, "float64") == 4.0 and param_value(None, "string") is None


def test_a_sweep_of_none_and_text_reads_as_one_dataset(tmp_path):
    """The bug #17 names: a swept value null in one run and text in another made the
    folder unreadable by pd.read_parquet."""
    exp = tmp_path / "e.yaml"
    exp.write_text(
        "name: e\nseed: 1\nseeds: 1\n"
        "topology: {kind: fat_tree, pods: 1, racks: 2, hosts: 2, server: {cpu: 4}}\n"
        "workload: {requests: 30, arrival: {process: poisson, rate: 2},\n"
        "           demand: {cpu: 1}, duration: {dist: exponential, mean: 1},\n"
        "           attrs: {tag: {dist: constant, value: 1}}}\n"
        "allocators: [first_fit]\n"
        "matrix:\n  workload.name: [~, hello]\n")
    r = CliRunner().invoke(main, ["run", str(exp), "--out", str(tmp_path / "o")])
    assert r.exit_code == 0, r.output
    req = pd.read_parquet(tmp_path / "o" / "requests")
    assert sorted(req["name"].dropna().unique()) == ["hello"] and req["name"].isna().any()


# ------------------------------------------------------------------------------ the docs
def documented_tables() -> dict[tuple[str, str], set[str]]:
    """``(mode, table)`` -> the backticked names in the first column of the markdown table
    after each ``<!-- schema: MODE TABLE -->`` marker of outputs.md."""
    text = OUTPUTS.read_text()
    out = {}
    for m in re.finditer(r"<!-- schema: (\w+) (\w+) -->\n((?:\|.*\n)+)", text):
        names: set[str] = set()
        for line in m.group(3).splitlines()[2:]:
            first = line.split("|")[1]
            if first.strip().startswith("*"):       # *sweep parameters*
                continue
            names |= set(re.findall(r"`([^`]+)`", first.split(", e.g.")[0]))
        out[(m.group(1), m.group(2))] = names
    return out


def test_outputs_page_lists_exactly_the_declared_columns():
    docs = documented_tables()
    declared = {(mode, name) for mode, tables in TABLES.items() for name in tables}
    assert set(docs) == declared, "each declared table needs a <!-- schema: --> table"
    for (mode, name), names in docs.items():
        want = {c.name for c in TABLES[mode][name].columns}
        if name == "summary":
            names = names - set(SUMMARY_HEAD) - set(SUMMARY_TAIL)
        if (mode, name) == ("loss", "requests"):   # attributes are described in words
            want.discard("<attribute>")
            names = {n for n in names if n not in ("allocator", "seed")}
        names = {n for n in names if n not in ("allocator", "seed")}
        assert names == want, (mode, name, sorted(names ^ want))
