"""One schema per table across a results folder, so that every reader sees every column.

A run writes the columns its own configuration has: in a sweep whose points differ (one
with ``failures:``, one without; one with power, one without) the runs' ``timeseries/``
files differ by the ``avail_*`` or ``power_*`` columns. Readers then disagree without a
word: ``pd.read_parquet(folder)`` and duckdb's ``read_parquet`` take the first file's
schema and drop the columns only later files have; polars refuses the read. So when an
experiment's runs are committed, :func:`unify_tables` gives each of its tables one column
list: a file that lacks a column another run's file of the same table has is rewritten
(streamed a row group at a time, atomically) with that column as nulls, in the one order,
and its run's record (``runs/<id>.json``) gets the new size and checksum. A column a run
lacks is "does not apply" there, a null, as in ``summary.parquet``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from dcsim.results.verify import FILES_KEY, file_entry
from dcsim.results.writer import nullable_ints, run_record_path, write_json

#: rows per batch while a file is rewritten
BATCH = 65536


def merged_order(schemas: Iterable[pa.Schema]) -> list[pa.Field] | None:
    """One field list holding every field of ``schemas``, each after the field it follows
    in the first schema that has it; None when two schemas give one name two types."""
    order: list[pa.Field] = []
    index: dict[str, int] = {}
    for schema in schemas:
        prev = -1
        for f in schema:
            if f.name in index:
                if not order[index[f.name]].type.equals(f.type):
                    return None
                prev = index[f.name]
                continue
            order.insert(prev + 1, f.remove_metadata())
            index = {g.name: i for i, g in enumerate(order)}
            prev = index[f.name]
    return order


def _pandas_ints(schema: pa.Schema) -> set[str]:
    meta = (schema.metadata or {}).get(b"pandas")
    if not meta:
        return set()
    try:
        cols = json.loads(meta).get("columns", [])
    except (ValueError, AttributeError):
        return set()
    return {c.get("name") for c in cols if isinstance(c, dict) and c.get("numpy_type") == "Int64"}


def unify_tables(out: Path, records: dict[str, dict]) -> list[str]:
    """Give each table of the runs in ``records`` (run id -> record, as
    :func:`~dcsim.results.writer.run_records` reads them) one column list (see the
    module's text); return the files rewritten, relative to ``out``."""
    out = Path(out)
    by_table: dict[str, list[tuple[str, str]]] = {}
    for run_id, record in records.items():
        for rel in (record.get(FILES_KEY) or {}):
            by_table.setdefault(rel.split("/", 1)[0], []).append((run_id, rel))
    changed: list[str] = []
    for items in by_table.values():
        schemas = {rel: pq.read_schema(out / rel) for _, rel in items}
        names = {tuple(s.names) for s in schemas.values()}
        if len(names) < 2:
            continue
        order = merged_order(schemas.values())
        if order is None:     # a column typed differently by two runs: left as it is
            continue
        target = [f.name for f in order]
        types = {f.name: f.type for f in order}
        ints = set().union(*(_pandas_ints(s) for s in schemas.values()))
        for run_id, rel in items:
            have = schemas[rel]
            if have.names == target:
                continue
            missing = types.keys() - set(have.names)
            ints_here = ints | {n for n in missing if pa.types.is_integer(types[n])}
            schema = pa.schema(order, metadata=nullable_ints(sorted(ints_here)))
            _rewrite(out / rel, schema)
            record = records[run_id]
            record[FILES_KEY][rel] = file_entry(out / rel)
            write_json(run_record_path(out, run_id), record)
            changed.append(rel)
    return changed


def _rewrite(path: Path, schema: pa.Schema) -> None:
    """``path`` with ``schema``'s columns (those it lacks as nulls), atomically."""
    tmp = path.with_name(f".{path.name}.tmp")
    src = pq.ParquetFile(path)
    try:
        with pq.ParquetWriter(tmp, schema, compression="zstd") as w:
            for batch in src.iter_batches(batch_size=BATCH):
                cols = [batch.column(f.name) if f.name in batch.schema.names
                        else pa.nulls(batch.num_rows, type=f.type) for f in schema]
                w.write_batch(pa.RecordBatch.from_arrays(cols, schema=schema))
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        src.close()
