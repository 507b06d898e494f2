"""``dcsim import-trace``: look a trace format up among the registered ones, check its
options and input before it reads anything, and write the standard table it returns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from dcsim.csv_tables import write_csv
from dcsim.errors import ConfigError
from dcsim.workload.trace_format import TraceFormat, read_trace
from dcsim.workload.traces import table_format

#: ``workload.trace.format`` of a table already in dcsim's standard form (replayed as it
#: is, not a trace format)
TABLE = "table"


def trace_formats() -> dict[str, type[TraceFormat]]:
    """Every registered trace format, by name: the built-ins first, then plugins'."""
    from dcsim.registered_union import registered_classes

    return registered_classes("trace_format")


def registered_format_name(value: str) -> str:
    """``value``, when it is ``table`` or a registered trace format (a pydantic field
    validator's check: the error lists the formats)."""
    if value != TABLE:
        known = trace_formats()
        if value not in known:
            raise ValueError(f"unknown trace format {value!r}; expected one of "
                             f"{', '.join([TABLE, *(n for n in known if n != TABLE)])}")
    return value


def trace_format(name: str) -> type[TraceFormat]:
    """The trace format registered as ``name``; an unknown name lists the known ones."""
    found = trace_formats()
    if name not in found or name == TABLE:
        raise ConfigError(f"unknown trace format {name!r}; known: "
                          f"{', '.join(n for n in found if n != TABLE)} (see `dcsim plugins "
                          "--kind trace_format`)")
    return found[name]


def import_trace(kind: str, src: str | Path, **opts: Any) -> pd.DataFrame:
    """Read ``src`` (a directory for azure2017, else a file) with the trace format named
    ``kind`` and its options ``opts`` (validated first: an unknown option or a value of the
    wrong type names the option)."""
    fmt = trace_format(kind)
    options = fmt.parse_options(opts, f"{kind} importer: option", sep=" ")
    return read_trace(fmt, src, options)


def write_table(df: pd.DataFrame, path: str | Path) -> Path:
    """Write a standard table as Parquet or CSV, chosen by the file name."""
    path = Path(path)
    fmt = table_format(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "parquet":
        df.to_parquet(path, index=False)
    else:
        write_csv(df, path)
    return path
