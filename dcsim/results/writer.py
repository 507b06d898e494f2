"""Parquet output: the only module that writes Arrow. Files appear whole or not at all.

Layout of an experiment's output directory (documented in docs/reference/outputs.md)::

    summary.parquet                                   one row per finished run
    requests/allocator=<label>/seed=<s>/<run>.parquet one row per request
    timeseries/allocator=<label>/seed=<s>/<run>.parquet
    runs/<run>.json                                   a finished run's summary row
    experiment.yaml, manifest.json

A run streams its records into hidden ``.<run>.parquet.tmp`` files (pyarrow's dataset
discovery ignores dot-files) in row groups, so memory stays flat; :meth:`RunWriter.commit`
renames them into place and writes ``runs/<run>.json`` last. A run without its json is
unfinished and is run again on resume.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from dcsim.atomic import write_atomic

# Types of the fixed request columns; everything else is inferred from the first batch.
_REQUEST_TYPES: dict[str, pa.DataType] = {
    "id": pa.int64(),
    "arrival": pa.float64(),
    "duration": pa.float64(),
    "bandwidth": pa.float64(),
    "accepted": pa.bool_(),
    "start": pa.float64(),
    "end": pa.float64(),
    "n_servers": pa.int64(),
    "servers": pa.list_(pa.int64()),
    "locality": pa.int64(),
    "footprint": pa.float64(),
    "measured": pa.bool_(),
    "decision_s": pa.float64(),
}
_SAMPLE_TYPES: dict[str, pa.DataType] = {
    "time": pa.float64(),
    "received": pa.int64(),
    "accepted": pa.int64(),
    "active": pa.float64(),
}
_TYPES = {"requests": _REQUEST_TYPES, "timeseries": _SAMPLE_TYPES}


def partition_dir(label: str, seed: int) -> str:
    """``allocator=<label>/seed=<seed>``, with the label made safe as a path segment."""
    return f"allocator={quote(label, safe='()+,-._@:')}/seed={seed}"


#: the longest label, once encoded as a path segment (``allocator=`` and the run file's
#: ``-s<seed>-<digest>.parquet`` must still fit the usual 255-byte file-name limit)
MAX_LABEL_PATH = 200


def label_problem(label: str) -> str | None:
    """Why ``label`` cannot name a results partition and its files, or None."""
    encoded = quote(label, safe="()+,-._@:")
    if len(encoded) > MAX_LABEL_PATH:
        return (f"too long for a file name: {len(encoded)} characters once encoded for a "
                f"path (at most {MAX_LABEL_PATH}; non-ASCII characters take 6 or more)")
    if any(ord(c) < 32 or ord(c) == 127 for c in label):
        return "contains a control character"
    return None


class _Stream:
    """One Parquet file written in row groups to a hidden temporary name."""

    def __init__(
        self, final: Path, constants: dict[str, Any], types: dict[str, pa.DataType],
        row_group: int,
    ):
        self.final = final
        self.types = types
        self.row_group = row_group
        self.pending: list[pa.Table] = []
        self.pending_rows = 0
        self.tmp = final.with_name(f".{final.name}.tmp")
        self.constants = constants
        self.writer: pq.ParquetWriter | None = None
        self.schema: pa.Schema | None = None

    def write(self, columns: dict[str, list]) -> None:
        n = len(next(iter(columns.values())))
        data = {k: v for k, v in columns.items() if len(v) == n}
        for k, v in self.constants.items():
            data[k] = [v] * n
        if self.schema is None:
            fields = []
            for k, v in data.items():
                typ = self.types.get(k)
                arr = pa.array(v, type=typ) if typ is not None else pa.array(v)
                if pa.types.is_null(arr.type):
                    arr = arr.cast(pa.float64())
                fields.append(pa.field(k, arr.type))
            self.schema = pa.schema(fields)
            self.final.parent.mkdir(parents=True, exist_ok=True)
            self.writer = pq.ParquetWriter(self.tmp, self.schema, compression="zstd")
        table = pa.Table.from_pydict(
            {f.name: data.get(f.name, [None] * n) for f in self.schema}, schema=self.schema
        )
        self.pending.append(table)
        self.pending_rows += n
        if self.pending_rows >= self.row_group:
            self._write_pending()

    def _write_pending(self) -> None:
        if self.pending:
            self.writer.write_table(pa.concat_tables(self.pending))
            self.pending = []
            self.pending_rows = 0

    def commit(self) -> None:
        if self.writer is not None:
            self._write_pending()
            self.writer.close()
            os.replace(self.tmp, self.final)

    def abort(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.tmp.unlink(missing_ok=True)


class RunWriter:
    """The sink of one run: streams records, then commits them with the summary row."""

    def __init__(
        self, out: Path, run_id: str, label: str, seed: int, constants: dict[str, Any],
        row_group: int = 65536,
    ):
        self.out = Path(out)
        self.run_id = run_id
        part = partition_dir(label, seed)
        self._streams = {
            kind: _Stream(
                self.out / kind / part / f"{run_id}.parquet", constants, _TYPES[kind], row_group
            )
            for kind in ("requests", "timeseries")
        }

    def __call__(self, kind: str, columns: dict[str, list]) -> None:
        self._streams[kind].write(columns)

    def commit(self, summary: dict[str, Any]) -> None:
        for s in self._streams.values():
            s.commit()
        write_atomic(run_record_path(self.out, self.run_id), _json_bytes(summary))

    def abort(self) -> None:
        for s in self._streams.values():
            s.abort()


def run_record_path(out: Path, run_id: str) -> Path:
    return Path(out) / "runs" / f"{run_id}.json"


def finished_runs(out: Path) -> dict[str, dict[str, Any]]:
    """Summary rows of the runs already committed in ``out``, by run id."""
    runs = {}
    for p in sorted((Path(out) / "runs").glob("*.json")):
        runs[p.stem] = json.loads(p.read_text())
    return runs


def write_summary(out: Path, rows: list[dict[str, Any]], order: list[str]) -> Path:
    """Write ``summary.parquet`` (rows in run order) atomically."""
    df = pd.DataFrame(rows)
    if "run_id" in df.columns and order:
        rank = {r: i for i, r in enumerate(order)}
        df = df.sort_values("run_id", key=lambda s: s.map(rank)).reset_index(drop=True)
    table = pa.Table.from_pandas(df, preserve_index=False)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    path = Path(out) / "summary.parquet"
    write_atomic(path, sink.getvalue().to_pybytes())
    return path


def _json_bytes(obj: Any) -> bytes:
    def clean(v: Any) -> Any:
        if isinstance(v, float) and math.isnan(v):
            return None
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [clean(x) for x in v]
        if hasattr(v, "item"):  # numpy scalar
            return clean(v.item())
        return v

    return (json.dumps(clean(obj), indent=1, sort_keys=False) + "\n").encode()


def write_json(path: Path, obj: Any) -> None:
    write_atomic(Path(path), _json_bytes(obj))
