"""Parquet tables a user gives (traces, rate tables, failure and carbon traces, VM arrivals,
queue workloads), read without trusting the pandas metadata a file carries.

``pandas.read_parquet`` rebuilds the frame from the ``pandas`` entry of the file's schema
metadata (the index, column types); a file whose entry is corrupt or hostile then ends in a
``JSONDecodeError`` traceback instead of a table. dcsim reads columns by name and never
wants a stored index, so :func:`plain` drops the schema's metadata before converting (pyarrow
parses the ``pandas`` entry even with ``ignore_metadata=True``). The module imports nothing
of dcsim, so any layer may use it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd


def read_parquet(path: str | Path, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """The Parquet file at ``path`` (its ``columns`` only, if given) as a DataFrame with a
    plain range index, whatever its pandas metadata says."""
    import pyarrow.parquet as pq

    cols = list(columns) if columns is not None else None
    return plain(pq.read_table(path, columns=cols))


def plain(table) -> pd.DataFrame:
    """An Arrow table or record batch as a DataFrame, its schema's metadata dropped."""
    return table.replace_schema_metadata(None).to_pandas()


def parquet_rows(path: str | Path) -> int:
    """The rows a Parquet file holds, from its footer (nothing else is read)."""
    import pyarrow.parquet as pq

    return pq.ParquetFile(path).metadata.num_rows
