"""Parquet output: the only module that writes Arrow. Files appear whole or not at all.

Layout of an experiment's output directory (documented in docs/reference/outputs.md)::

    summary.parquet                                   one row per finished run
    <table>/allocator=<label>/seed=<s>/<run>.parquet  a mode's streamed tables: requests/
                                                      and timeseries/ (loss), jobs/ (queue),
                                                      migrations/ (reschedule), vms/
                                                      (vm_online), component_failures/
                                                      (failures:); see results.schema
    runs/<run>.json                                   a finished run's summary row, the
                                                      fingerprint of its code and the size
                                                      and checksum of each of its files
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

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from dcsim.atomic import write_atomic
from dcsim.results.schema import (
    ARROW,
    Bound,
    SchemaError,
    Table,
    check_batch,
    param_value,
)
from dcsim.results.verify import FILES_KEY, file_entry


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


def arrow_column(values: Any, typ: pa.DataType | None, sentinel: int | None = None) -> pa.Array:
    """One column of a batch as Arrow, of its declared type (None: inferred). Where a value
    does not apply it is null, never NaN: a float NaN is written as null, and so is an int
    column's ``sentinel`` (:attr:`~dcsim.results.schema.Col.sentinel`), so that pandas,
    polars and duckdb all skip it (polars' ``mean`` and duckdb's ``avg`` over a NaN give
    NaN). A column of nulls only is float64."""
    if sentinel is not None:
        arr = np.asarray(values)
        out = pa.array(arr, type=typ, mask=arr == sentinel)
    else:
        out = pa.array(values, type=typ, from_pandas=True)
    return out.cast(pa.float64()) if pa.types.is_null(out.type) else out


def nullable_ints(names: Any) -> dict[bytes, bytes] | None:
    """Schema metadata that makes pandas read the int columns ``names`` (which may hold
    nulls) as its nullable ``Int64``, not as float64 with NaN: the part of the metadata
    pandas itself writes for such a column, which pyarrow's ``to_pandas`` follows (polars
    and duckdb read the Arrow type, int64, as it is)."""
    names = list(names)
    if not names:
        return None
    meta = {"index_columns": [], "column_indexes": [], "columns": [
        {"name": n, "field_name": n, "pandas_type": "int64", "numpy_type": "Int64",
         "metadata": None} for n in names]}
    return {b"pandas": json.dumps(meta).encode()}


class _Stream:
    """One declared table of one run, written in row groups to a hidden temporary name.
    Every batch must have exactly the table's columns, all of one length; the first fixes
    the open ``<attribute>`` family (:mod:`dcsim.results.schema`)."""

    def __init__(self, final: Path, table: Bound, constants: dict[str, Any],
                 constant_types: dict[str, str], row_group: int):
        self.final = final
        self.table = table
        self.row_group = row_group
        self.pending: list[pa.Table] = []
        self.pending_rows = 0
        self.tmp = final.with_name(f".{final.name}.tmp")
        self.constants = {k: (param_value(v, constant_types.get(k, "inferred")),
                              ARROW.get(constant_types.get(k, "inferred")))
                          for k, v in constants.items()}
        self.writer: pq.ParquetWriter | None = None
        self.schema: pa.Schema | None = None
        self.columns: list[tuple[str, pa.DataType | None]] | None = None

    def write(self, columns: dict[str, Any]) -> None:
        if self.columns is None:
            self.columns = self.table.resolve(columns)
        n = check_batch(self.table.table, columns, [c for c, _ in self.columns])
        arrays = {name: arrow_column(columns[name], typ, self.table.sentinels.get(name))
                  for name, typ in self.columns}
        for k, (v, typ) in self.constants.items():
            if k in arrays:  # a sweep column would silently replace the table's own
                raise SchemaError(f"{self.table.table}: the sweep column {k!r} is also one "
                                  f"of the table's own columns")
            arrays[k] = pa.array([v] * n, type=typ)
        if self.schema is None:
            self.schema = pa.schema([pa.field(k, a.type) for k, a in arrays.items()],
                                    metadata=nullable_ints(self.table.sentinels))
            self.final.parent.mkdir(parents=True, exist_ok=True)
            self.writer = pq.ParquetWriter(self.tmp, self.schema, compression="zstd")
        table = pa.Table.from_arrays([arrays[f.name].cast(f.type) for f in self.schema],
                                     schema=self.schema)
        self.pending.append(table)
        self.pending_rows += n
        if self.pending_rows >= self.row_group:
            self._write_pending()

    def _write_pending(self) -> None:
        if self.pending:
            self.writer.write_table(pa.concat_tables(self.pending))
            self.pending = []
            self.pending_rows = 0

    def commit(self) -> dict[str, Any] | None:
        """Rename the file into place; its size and checksum (None: nothing written)."""
        if self.writer is None:
            return None
        self._write_pending()
        self.writer.close()
        entry = file_entry(self.tmp)
        os.replace(self.tmp, self.final)
        return entry

    def abort(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.tmp.unlink(missing_ok=True)


class RunWriter:
    """The sink of one run: streams each declared table, then commits them with the summary
    row. ``tables`` are the run's bound tables by folder name (``requests``, ``jobs``, ...;
    :mod:`dcsim.results.schema`); ``constants`` its sweep values, of ``constant_types``."""

    def __init__(
        self, out: Path, run_id: str, label: str, seed: int, constants: dict[str, Any],
        tables: dict[str, Bound], constant_types: dict[str, str] | None = None,
        row_group: int = 65536,
    ):
        self.out = Path(out)
        self.run_id = run_id
        part = partition_dir(label, seed)
        self._rel = {name: f"{name}/{part}/{run_id}.parquet" for name in tables}
        self._streams = {
            name: _Stream(self.out / name / part / f"{run_id}.parquet", bound, constants,
                          constant_types or {}, row_group)
            for name, bound in tables.items()
        }

    def __call__(self, kind: str, columns: dict[str, Any]) -> None:
        stream = self._streams.get(kind)
        if stream is None:
            raise SchemaError(f"a run wrote to table {kind!r}; this mode declares "
                              f"{', '.join(self._streams) or 'none'}")
        stream.write(columns)

    def commit(self, summary: dict[str, Any], code: dict[str, Any] | None = None) -> None:
        """Rename the tables into place, then write ``runs/<run_id>.json``: the summary row,
        under ``code`` the fingerprint of the code that made it
        (:mod:`dcsim.results.provenance`) and under ``files`` each file's size and checksum
        (:mod:`dcsim.results.verify`)."""
        files = {}
        for name, s in self._streams.items():
            entry = s.commit()
            if entry is not None:
                files[self._rel[name]] = entry
        record = summary if code is None else {**summary, CODE_KEY: code}
        record = {**record, FILES_KEY: files}
        write_atomic(run_record_path(self.out, self.run_id), _json_bytes(record))

    def abort(self) -> None:
        for s in self._streams.values():
            s.abort()


def write_table_file(path: Path, table: Table, columns: dict[str, Any],
                     **families: list[str]) -> Path:
    """Write one declared table (:mod:`dcsim.results.schema`) as a single Parquet file,
    atomically; the columns are checked as a run's are."""
    bound = table.bind(**families)
    names = bound.resolve(columns)
    check_batch(table.name, columns, [n for n, _ in names])
    arrow = pa.table({n: arrow_column(columns[n], t, bound.sentinels.get(n)) for n, t in names})
    arrow = arrow.replace_schema_metadata(nullable_ints(n for n in bound.sentinels
                                                        if n in arrow.column_names))
    sink = pa.BufferOutputStream()
    pq.write_table(arrow, sink)
    write_atomic(Path(path), sink.getvalue().to_pybytes())
    return Path(path)


def run_record_path(out: Path, run_id: str) -> Path:
    return Path(out) / "runs" / f"{run_id}.json"


#: the key of a run's record that holds its code fingerprint rather than a summary column
CODE_KEY = "code"


def run_records(out: Path) -> dict[str, dict[str, Any]]:
    """The records of the runs already committed in ``out`` (``runs/<run_id>.json``: the
    summary row, and the code fingerprint under :data:`CODE_KEY`), by run id."""
    runs = {}
    for p in sorted((Path(out) / "runs").glob("*.json")):
        record = read_record(p)
        if record is not None:
            runs[p.stem] = record
    return runs


def read_record(p: Path) -> dict[str, Any] | None:
    """The run record at ``p``, or None when it is not one (unreadable, not JSON, not an
    object): such a run is not known to have finished."""
    try:
        record = json.loads(p.read_text())
    except (OSError, ValueError, RecursionError):
        return None
    return record if isinstance(record, dict) else None


def bad_records(out: Path) -> list[Path]:
    """The ``runs/*.json`` of ``out`` that are not run records (:func:`read_record`)."""
    return [p for p in sorted((Path(out) / "runs").glob("*.json")) if read_record(p) is None]


def summary_row(record: dict[str, Any]) -> dict[str, Any]:
    """A run's record without its code fingerprint and file list: its summary row."""
    return {k: v for k, v in record.items() if k not in (CODE_KEY, FILES_KEY)}


def finished_runs(out: Path) -> dict[str, dict[str, Any]]:
    """Summary rows of the runs already committed in ``out``, by run id."""
    return {k: summary_row(v) for k, v in run_records(out).items()}


def write_summary(out: Path, rows: list[dict[str, Any]], order: list[str]) -> Path:
    """Write ``summary.parquet`` (rows in run order) atomically."""
    df = pd.DataFrame(rows)
    for c in df.columns:   # an int column that some runs lack stays int (nullable Int64)
        values = [r[c] for r in rows if r.get(c) is not None]
        if values and len(values) < len(rows) and all(
                isinstance(v, int | np.integer) and not isinstance(v, bool) for v in values):
            df[c] = pd.array([r.get(c) for r in rows], dtype="Int64")
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
