"""``dcsim import-trace``: pick the importer of a trace format
(:mod:`dcsim.workload.importers`), check its options and input before it reads anything,
and write the standard table it returns."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dcsim.csv_tables import write_csv
from dcsim.errors import ConfigError
from dcsim.workload.importers import (
    import_alibaba2018,
    import_alibaba2018_containers,
    import_azure2017,
    import_azure2020,
    import_azure2020_vmtypes,
)
from dcsim.workload.traces import table_format

IMPORTERS: dict[str, Callable[..., pd.DataFrame]] = {
    "azure2017": import_azure2017,
    "alibaba2018": import_alibaba2018,
    "azure2020": import_azure2020,
    "alibaba2018_containers": import_alibaba2018_containers,
    "azure2020_vmtypes": import_azure2020_vmtypes,
}


def import_trace(kind: str, src: str | Path, **opts: Any) -> pd.DataFrame:
    """Run the importer named ``kind`` on ``src`` (a directory for azure2017, else a file)."""
    if kind not in IMPORTERS:
        raise ConfigError(f"unknown trace format {kind!r}; known: {', '.join(IMPORTERS)}")
    import inspect

    params = inspect.signature(IMPORTERS[kind]).parameters
    unknown = [k for k in opts if k not in params]
    if unknown:
        raise ConfigError(f"{kind} importer: unknown option(s) {unknown}; "
                          f"known: {', '.join(list(params)[1:])}")
    for k, v in opts.items():
        check_option(kind, k, v, params[k].default)
    path = Path(src)
    if path.is_file() and path.stat().st_size == 0:
        raise ConfigError(f"{src}: the file is empty (0 bytes); nothing to import as {kind}")
    try:
        return IMPORTERS[kind](src, **opts)
    except (TypeError, ValueError, KeyError) as e:
        raise ConfigError(f"{src}: does not read as a {kind} trace ({e})") from None


def check_option(kind: str, key: str, value: Any, default: Any) -> None:
    """An importer option of the type its default has (a misspelt boolean or a number for a
    list of names would otherwise fail inside the importer, blaming the file)."""
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    if isinstance(default, bool):
        ok, want = isinstance(value, bool), "true or false"
    elif isinstance(default, int):
        ok, want = isinstance(value, int) and not isinstance(value, bool), "an integer"
    elif isinstance(default, float):
        ok, want = (isinstance(value, int | float) and not isinstance(value, bool)
                    and np.isfinite(value)), "a number"
    elif isinstance(default, str):
        ok, want = isinstance(value, str), "a string"
    elif isinstance(default, tuple | list):
        ok = value is None or (isinstance(value, list | tuple)
                               and all(isinstance(x, str) for x in value))
        want = "a list of names (or null for all)"
    else:  # None: an optional integer (machine_id)
        ok = value is None or (isinstance(value, int) and not isinstance(value, bool))
        want = "an integer or null"
    if not ok:
        raise ConfigError(f"{kind} importer: option {key}: expected {want}, got {shown}")


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
