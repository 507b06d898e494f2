"""Reading dcsim's result files back, checked against the tables the schema declares: a
file that cannot be read, or a column of another type than declared (or than another
file of the same table gives it), is one :class:`ResultsError` line naming the file and
the column (``dcsim report`` and :func:`dcsim.report.load` read through here)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from dcsim.errors import ConfigError
from dcsim.results.schema import TABLES
from dcsim.results.stats import column


class ResultsError(ConfigError):
    """A results folder holds something that is not its experiment's, or a file that cannot
    be read; the message is one line naming the file (and the column)."""


def one_line(e: BaseException, limit: int = 160) -> str:
    """An exception's message on one line, shortened."""
    text = " ".join(str(e).split()) or type(e).__name__
    text = re.sub(r"^Could not open Parquet input source '[^']*': ", "", text)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def read_parquet(f: Path) -> pd.DataFrame:
    try:
        return pq.read_table(f).to_pandas()
    except (OSError, pa.ArrowException, ValueError) as e:
        raise ResultsError(f"{f}: unreadable Parquet file ({one_line(e)})") from None


def _kind(t: pa.DataType) -> str:
    return "text" if pa.types.is_string(t) or pa.types.is_large_string(t) else str(t)


def _arrow_fits(declared: str, t: pa.DataType) -> bool:
    if pa.types.is_null(t) or declared == "inferred":
        return True
    if declared in ("int64", "float64"):
        return pa.types.is_integer(t) or pa.types.is_floating(t)
    if declared == "bool":
        return pa.types.is_boolean(t)
    if declared == "string":
        return pa.types.is_string(t) or pa.types.is_large_string(t) \
            or pa.types.is_dictionary(t)
    if declared.startswith("list<"):
        return pa.types.is_list(t) or pa.types.is_large_list(t)
    return True


def read_files(folder: Path, files: list[Path], mode: str) -> pd.DataFrame:
    """``files`` of the streamed table ``folder`` as one DataFrame with ``allocator`` and
    ``seed`` from their partitions; a file that cannot be read, or whose column has another
    type than the table declares (or than the other files give it), is a
    :class:`ResultsError` naming both."""
    table = folder.name
    decl = TABLES.get(mode, {}).get(table)
    schemas = []
    first: dict[str, tuple[pa.DataType, Path]] = {}
    declared: dict[str, Any] = {}
    for p in files:
        try:
            sch = pq.read_schema(p)
        except (OSError, pa.ArrowException, ValueError) as e:
            raise ResultsError(f"{p}: unreadable Parquet file ({one_line(e)})") from None
        for fld in sch:
            if fld.name not in declared:
                declared[fld.name] = column(fld.name, mode, table) if decl else None
            c = declared[fld.name]
            if c is not None and not _arrow_fits(c.type, fld.type):
                raise ResultsError(f"{p}: column {fld.name!r} holds {_kind(fld.type)}, not "
                                   f"the {c.type} values dcsim/results/schema.py declares "
                                   "for it, so it cannot be reported")
            seen = first.setdefault(fld.name, (fld.type, p))
            if not pa.types.is_null(fld.type) and not pa.types.is_null(seen[0]) \
                    and fld.type != seen[0]:
                raise ResultsError(f"{p}: column {fld.name!r} holds {_kind(fld.type)}, but "
                                   f"{_kind(seen[0])} in {seen[1]}")
        schemas.append(sch)
    part = pa.schema([("allocator", pa.string()), ("seed", pa.int64())])
    schema = pa.unify_schemas([*schemas, part])
    try:
        data = ds.dataset([str(p) for p in files], schema=schema, format="parquet",
                          partitioning=ds.partitioning(part, flavor="hive"),
                          partition_base_dir=str(folder)).to_table()
    except (OSError, pa.ArrowException, ValueError):
        for p in files:  # name the file
            try:
                pq.read_table(p)
            except (OSError, pa.ArrowException, ValueError) as e:
                raise ResultsError(f"{p}: unreadable Parquet file ({one_line(e)})") from None
        raise
    return data.to_pandas()
