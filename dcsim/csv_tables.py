"""CSV tables whose floats come back bit for bit, whatever the pandas version.

A trace written to CSV and read back must give the same arrival times: a difference of one
ulp moves an event across another at the same time, and a run's rows change. Two things
decide it:

- **Writing.** :func:`write_csv` formats every float with ``repr(float(x))``, the shortest
  text that parses back to the same double (``0.30000000000000004``, ``1e-300``, ``2.0``),
  rather than relying on pandas' own formatter (which does the same today, but float32
  columns come out in float32's shortest form, which is not the float64 value).
- **Reading.** pandas' default float parser before 3.1 (``float_precision="high"``) is off
  by one ulp on about a quarter of 17-digit values (measured: pandas 3.0.0, 105,118 of
  400,006); ``"round_trip"`` is exact. From 3.1 every mode uses fast_float, which is
  exact, and the keyword is deprecated (``Pandas4Warning``). :func:`read_csv` therefore
  asks for ``round_trip`` before 3.1 and for nothing after.

Every CSV that dcsim reads (traces, VM arrivals, failure traces, queue workloads, empirical
distributions, raw trace imports) goes through :func:`read_csv`. The module imports nothing
of dcsim, so any layer may use it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd


def _default_parser_is_exact(version: str) -> bool:
    """Whether pandas ``version``'s default float parser is correctly rounded (3.1 on)."""
    major, minor = (int("".join(ch for ch in p if ch.isdigit()) or 0)
                    for p in (version.split(".") + ["0"])[:2])
    return (major, minor) >= (3, 1)


#: what :func:`read_csv` passes to ``pandas.read_csv`` for exact floats on this pandas
READ_OPTIONS: dict[str, Any] = (
    {} if _default_parser_is_exact(pd.__version__) else {"float_precision": "round_trip"})


def read_csv(source: Any, **kwargs: Any) -> Any:
    """``pandas.read_csv(source, **kwargs)`` with floats parsed exactly (correctly rounded,
    so that :func:`write_csv`'s text gives back the written doubles). Returns what pandas
    returns: a DataFrame, or a reader with ``chunksize``."""
    options = {} if kwargs.get("engine") == "python" else READ_OPTIONS  # Python's float()
    return pd.read_csv(source, **{**options, **kwargs})


def _shortest(x: float) -> str:
    return repr(float(x))


def write_csv(df: pd.DataFrame, path: str | Path, **kwargs: Any) -> None:
    """``df.to_csv(path, index=False)`` with every float written as ``repr(float(x))``, the
    shortest text that :func:`read_csv` turns back into the same double."""
    df.to_csv(path, index=False, float_format=_shortest, **kwargs)


#: the suffixes of the compressed CSVs pandas reads (their lines are not counted)
COMPRESSED = (".gz", ".bz2", ".xz", ".zst", ".zip", ".tar")


def count_in_file(path: str | Path, token: bytes) -> int:
    """Occurrences of ``token`` in the file at ``path``, read in 4 MB blocks (a bound on a
    file's size before it is parsed, not a parse)."""
    n, tail = 0, b""
    with open(path, "rb") as f:
        while block := f.read(1 << 22):
            chunk = tail + block   # a token across two blocks is whole in the next chunk
            n += chunk.count(token)
            tail = chunk[-(len(token) - 1):] if len(token) > 1 else b""   # never counted twice
    return n


def data_lines(path: str | Path) -> int | None:
    """The data rows of a plain CSV file (its lines after the header, the last one counted
    even without a final newline), counted without parsing; None for a compressed one."""
    p = Path(path)
    if p.suffix.lower() in COMPRESSED:
        return None
    lines = count_in_file(p, b"\n")
    if p.stat().st_size:
        with open(p, "rb") as f:
            f.seek(-1, 2)
            if f.read(1) != b"\n":   # a last line without its newline
                lines += 1
    return max(lines - 1, 0)
