"""Files dcsim did not write, read as a user would be handed them (issue #47, item 7): a
Parquet trace whose pandas metadata is corrupt replays like a clean one; a manifest or a run
record nested 200,000 deep, and a summary whose ``allocator`` column is empty, are one line
naming the file, never a traceback."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from tests.helpers.cli import invoke, ok
from tests.helpers.configs import small_experiment

CFG = small_experiment("untrusted", seed=3, seeds=2, requests=200,
                       allocators=["random", "first_fit"])
DEEP = "[" * 200_000 + "]" * 200_000


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("untrusted")
    exp = tmp / "exp.yaml"
    exp.write_text(yaml.safe_dump(CFG, sort_keys=False))
    ok("run", exp, "--out", tmp / "ref")
    return tmp / "ref"


def copy(src: Path, tmp_path: Path) -> Path:
    out = tmp_path / "out"
    shutil.copytree(src, out)
    return out


def one_line(r, *pieces):
    assert r.exit_code == 1 and "Traceback" not in r.output, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.output
    for p in pieces:
        assert p in lines[0], lines[0]


def test_a_trace_with_corrupt_pandas_metadata_replays_like_a_clean_one(tmp_path):
    table = pa.table({"arrival": [0.0, 0.5, 1.0, 2.0], "duration": [1.0, 2.0, 1.0, 3.0],
                      "cpu": [1.0, 2.0, 1.0, 3.0], "mem": [1.0, 1.0, 2.0, 2.0]})
    pq.write_table(table, tmp_path / "clean.parquet")
    meta = {**(table.schema.metadata or {}), b"pandas": b"{not json"}
    pq.write_table(table.replace_schema_metadata(meta), tmp_path / "corrupt.parquet")
    outs = []
    for name in ("clean", "corrupt"):
        cfg = {**CFG, "name": "trace", "workload": {"trace": {"path": f"{name}.parquet"}}}
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
        ok("run", tmp_path / f"{name}.yaml", "--out", tmp_path / name)
        outs.append(tmp_path / name)
    clean, corrupt = (pd.read_parquet(o / "requests").drop(columns="run_id", errors="ignore")
                      .sort_values(["allocator", "seed", "id"]).reset_index(drop=True)
                      for o in outs)
    assert len(clean) == 2 * 2 * 4
    pd.testing.assert_frame_equal(clean.drop(columns=["decision_s"], errors="ignore"),
                                  corrupt.drop(columns=["decision_s"], errors="ignore"))


def test_a_manifest_nested_deep_is_one_line(finished, tmp_path):
    out = copy(finished, tmp_path)
    (out / "manifest.json").write_text(DEEP)
    one_line(invoke("report", out), "manifest.json: unreadable (maximum recursion depth")


def test_a_run_record_nested_deep_is_one_line(finished, tmp_path):
    out = copy(finished, tmp_path)
    rec = sorted((out / "runs").glob("*.json"))[0]
    rec.write_text(DEEP)
    one_line(invoke("report", out), f"{rec.name}: unreadable (maximum recursion depth")


def test_a_summary_with_an_empty_allocator_column_is_one_line(finished, tmp_path):
    out = copy(finished, tmp_path)
    s = pd.read_parquet(out / "summary.parquet")
    s["allocator"] = None
    s.to_parquet(out / "summary.parquet")
    one_line(invoke("report", out), "summary.parquet: column 'allocator' is empty in 4 of "
                                    "its 4 rows")
