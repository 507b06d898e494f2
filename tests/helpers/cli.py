"""CLI and dataset helpers shared by the executor tests (Dask, resume)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from click.testing import CliRunner

from dcsim.cli import main

VOLATILE = ["wall_time_s", "mean_decision_s"]


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def ok(*args):
    r = invoke(*args)
    assert r.exit_code == 0, r.output + (r.stderr or "")
    return r


def dataset(out: Path) -> dict[str, pd.DataFrame]:
    """Every row of summary, requests and timeseries, in a canonical order (the wall-clock
    columns dropped)."""
    tables = {"summary": pd.read_parquet(out / "summary.parquet").drop(columns=VOLATILE)}
    for kind, key in (("requests", "id"), ("timeseries", "time")):
        df = pd.read_parquet(out / kind)
        df = df.drop(columns=[c for c in ("decision_s",) if c in df.columns])
        df["allocator"] = df["allocator"].astype(str)
        df["seed"] = df["seed"].astype(int)
        tables[kind] = df.sort_values(["allocator", "seed", "load", key]
                                      if "load" in df.columns else ["allocator", "seed", key]
                                      ).reset_index(drop=True)
    return tables


def assert_same_dataset(a: Path, b: Path, runs: int | None = None) -> None:
    """``a`` and ``b`` hold the same rows (and ``runs`` runs, if given); none is empty."""
    da, db = dataset(a), dataset(b)
    if runs is not None:
        assert len(da["summary"]) == runs
    for kind in da:
        assert len(da[kind]) > 0
        pd.testing.assert_frame_equal(da[kind], db[kind], obj=kind)
