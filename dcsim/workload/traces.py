"""Trace replay: requests read from a CSV or Parquet table, a chunk at a time.

A table has one row per request. ``columns`` maps the standard names — ``arrival``,
``duration`` (or ``end``, then duration = end − arrival), one per resource, ``bandwidth``, and
any attribute to carry — to the file's column names; an unmapped standard name is looked up
under its own name, and a number instead of a name gives a constant column (e.g. ``gpu: 0``).
``bandwidth`` defaults to the file's ``bandwidth`` column, else 0. Other keys of ``columns``
become per-request attributes (``priority: priority`` carries ``priority``).

Per row: each mapped column is multiplied by ``scale[name]``, then duration = end − arrival
when ``end`` is mapped, then arrival and duration are multiplied by ``time_scale``, then the
columns named in ``truncate`` lose their fractional part (Python's ``int()``, toward zero),
then ``zero_to[name]`` replaces a value of exactly 0, then ``cap[name]`` bounds a column from
above, then a row with any column above ``redraw_above[name]`` is skipped (counted in
``redrawn``; drawing rows at random, skipping is the same as drawing again while over the
bound), then arrivals shift so the first is 0 (``start_at_zero``).

A table of request *types* rather than requests (e.g. a VM-type table) has no timing:
``timing=False`` (used when resampling) lets ``arrival`` and ``duration`` be absent (then 0).

Memory stays flat: CSV is read with ``pandas.read_csv(chunksize=...)``, Parquet with
``ParquetFile.iter_batches`` (one row group at a time: write big files with several row
groups). Arrival times must be non-decreasing across the file; ``sort: true`` instead loads
the whole file and sorts it (stable) — that mode does not stream.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from dcsim.csv_tables import read_csv
from dcsim.errors import ConfigError
from dcsim.model.topology import DEFAULT_RESOURCES
from dcsim.parquet_tables import plain, read_parquet
from dcsim.workload.base import RequestBatch

_CSV = (".csv", ".csv.gz", ".csv.bz2", ".csv.xz", ".csv.zip", ".csv.zst")
_PARQUET = (".parquet", ".pq")


def table_format(path: Path | str) -> str:
    """``csv`` or ``parquet`` from the file name; ConfigError otherwise."""
    name = str(path).lower()
    if name.endswith(_CSV):
        return "csv"
    if name.endswith(_PARQUET):
        return "parquet"
    raise ConfigError(f"{path}: unknown table format (use .csv, .csv.gz or .parquet)")


#: the most rows a Parquet trace's row group may hold: a replay reads a row group's pages
#: together, so memory grows with it (a 10^9-row group would need gigabytes per column)
MAX_ROW_GROUP = 16 * 2**20


class TraceSource:
    """Replay the requests of a table (a path, or an in-memory DataFrame)."""

    def __init__(
        self,
        path: str | Path | pd.DataFrame,
        columns: Mapping[str, str | float] | None = None,
        scale: Mapping[str, float] | None = None,
        time_scale: float = 1.0,
        start_at_zero: bool = True,
        limit: int | None = None,
        resources: tuple[str, ...] = DEFAULT_RESOURCES,
        batch_size: int = 65536,
        sort: bool = False,
        dropna: bool = False,
        cap: Mapping[str, float] | None = None,
        name: str | None = None,
        truncate: tuple[str, ...] | list[str] = (),
        zero_to: Mapping[str, float] | None = None,
        redraw_above: Mapping[str, float] | None = None,
        timing: bool = True,
    ) -> None:
        if isinstance(path, pd.DataFrame):
            self._frame, self.path, self.format = path, None, "frame"
            self.name = name or "<table>"
        else:
            self._frame, self.path = None, Path(path)
            self.name = name or str(path)
            self.format = table_format(self.path)
            if not self.path.is_file():
                raise ConfigError(f"{self.name}: no such file")
        if not time_scale > 0:
            raise ConfigError(f"{self.name}: time_scale must be positive")
        if batch_size < 1 or (limit is not None and limit < 0):
            raise ConfigError(f"{self.name}: batch_size must be >= 1 and limit >= 0")
        self.resources = tuple(resources)
        self.scale = dict(scale or {})
        self.cap = dict(cap or {})
        self.truncate = tuple(truncate)
        self.zero_to = dict(zero_to or {})
        self.redraw_above = dict(redraw_above or {})
        self.timing = bool(timing)
        self.time_scale, self.start_at_zero = float(time_scale), bool(start_at_zero)
        self.limit, self.batch_size = limit, int(batch_size)
        self.sort, self.dropna = bool(sort), bool(dropna)
        self.dropped = 0  # rows dropped for missing values by the last replay
        self.redrawn = 0  # rows skipped for redraw_above by the last replay
        self._plan(dict(columns or {}), self.file_columns())

    # ------------------------------------------------------------------ columns
    def file_columns(self) -> list[str]:
        """Column names of the table (read from the header / schema only). A Parquet
        file's row groups are checked against :data:`MAX_ROW_GROUP` here, where its footer
        is read anyway."""
        if self._frame is not None:
            return [str(c) for c in self._frame.columns]
        try:
            if self.format == "csv":
                try:
                    return [str(c) for c in read_csv(self.path, nrows=0).columns]
                except UnicodeDecodeError:
                    raise ConfigError(_not_utf8(self.path, self.name)) from None
            import pyarrow.parquet as pq

            f = pq.ParquetFile(self.path)
            meta = f.metadata
            largest = max((meta.row_group(i).num_rows for i in range(meta.num_row_groups)),
                          default=0)
            if largest > MAX_ROW_GROUP:   # a replay holds one row group's pages at a time
                raise ConfigError(
                    f"{self.name}: a row group of {largest:,} rows, above the "
                    f"{MAX_ROW_GROUP:,} a replay reads at once with flat memory; rewrite the "
                    "file in smaller row groups (pyarrow.parquet.write_table(..., "
                    "row_group_size=1_000_000))")
            return list(f.schema_arrow.names)
        except ConfigError:
            raise
        except Exception as e:  # unreadable, empty, not a table
            raise ConfigError(f"{self.name}: cannot read the table ({e})") from None

    def _plan(self, columns: dict[str, str | float], have: list[str]) -> None:
        if "end" in columns and "duration" in columns:
            raise ConfigError(f"{self.name}: map either 'duration' or 'end', not both")
        self._end = "end" in columns
        untimed = not self.timing
        num: dict[str, str | float] = {"arrival": columns.pop(
            "arrival", 0.0 if untimed and "arrival" not in have else "arrival")}
        key = "end" if self._end else "duration"
        num[key] = columns.pop(key, 0.0 if untimed and key not in have else key)
        for r in self.resources:
            num[r] = columns.pop(r, r)
        num["bandwidth"] = columns.pop("bandwidth", "bandwidth" if "bandwidth" in have else 0.0)
        self._num, self._attrs = num, columns
        if not isinstance(num["arrival"], str) and self.timing:
            raise ConfigError(f"{self.name}: 'arrival' must name a column")
        explicit = set(self._attrs)
        for std, src in [*num.items(), *self._attrs.items()]:
            if isinstance(src, bool) or not isinstance(src, str | int | float):
                raise ConfigError(f"{self.name}: columns.{std} must be a column name or number")
            if isinstance(src, str) and src not in have:
                how = (f"(mapped from {std!r})" if src != std or std in explicit
                       else "(map it in columns, or give a number)")
                raise ConfigError(f"{self.name}: column {src!r} {how} not found; columns "
                                  f"are: {', '.join(have)}")
        known = set(num) | set(self._attrs) | {"duration"}
        for what, d in (("scale", self.scale), ("cap", self.cap), ("zero_to", self.zero_to),
                        ("redraw_above", self.redraw_above),
                        ("truncate", dict.fromkeys(self.truncate))):
            for k in d:
                if k not in known:
                    raise ConfigError(f"{self.name}: {what}.{k}: not a mapped column "
                                      f"({', '.join(sorted(known))})")
        self._needed = sorted({s for s in [*num.values(), *self._attrs.values()]
                               if isinstance(s, str)})

    # ------------------------------------------------------------------ reading
    def _chunks(self) -> Iterator[pd.DataFrame]:
        bs = self.batch_size
        if self.sort:
            whole = self._read_all()
            if isinstance(self._num["arrival"], str):  # else no timing: keep the file order
                key = pd.to_numeric(whole[self._num["arrival"]], errors="coerce")
                whole = whole.iloc[np.argsort(key.to_numpy(np.float64), kind="stable")]
            for i in range(0, len(whole), bs):
                yield whole.iloc[i:i + bs]
        elif self._frame is not None:
            for i in range(0, len(self._frame), bs):
                yield self._frame.iloc[i:i + bs][self._needed]
        elif self.format == "csv":
            try:
                with read_csv(self.path, usecols=self._needed, chunksize=bs) as reader:
                    yield from reader
            except UnicodeDecodeError:
                raise ConfigError(_not_utf8(self.path, self.name)) from None
        else:
            import pyarrow.parquet as pq

            # buffered, not pre-buffered reads: a column chunk is streamed, not held whole
            # (the defaults hold whole row groups: memory grew with the file)
            f = pq.ParquetFile(self.path, buffer_size=1 << 20, pre_buffer=False)
            for rb in f.iter_batches(batch_size=bs, columns=self._needed):
                yield plain(rb)

    def _read_all(self) -> pd.DataFrame:
        if self._frame is not None:
            return self._frame[self._needed]
        if self.format == "csv":
            try:
                return read_csv(self.path, usecols=self._needed)
            except UnicodeDecodeError:
                raise ConfigError(_not_utf8(self.path, self.name)) from None
        return read_parquet(self.path, columns=self._needed)

    def batches(self, rng: np.random.Generator | None = None) -> Iterator[RequestBatch]:
        """Yield the table's requests in order; ``rng`` is not used (a trace is fixed)."""
        self.dropped = self.redrawn = 0
        row0, sent, t0, last = 0, 0, None, -np.inf
        for frame in self._chunks():
            if self.limit is not None and sent >= self.limit:
                return
            batch = self._convert(frame, row0)
            row0 += len(frame)
            if batch is None:
                continue
            if self.limit is not None and sent + len(batch) > self.limit:
                batch = _head(batch, self.limit - sent)
            a = batch.arrival
            if a[0] < last or np.any(a[1:] < a[:-1]):
                i = 0 if a[0] < last else int(np.argmax(a[1:] < a[:-1])) + 1
                raise ConfigError(
                    f"{self.name}: arrival times are not sorted (request {sent + i + 1} arrives "
                    f"before the one above it); sort the file by {self._num['arrival']!r} or "
                    "set sort: true (which loads the whole file into memory)")
            last = float(a[-1])
            if self.start_at_zero:
                t0 = float(a[0]) if t0 is None else t0
                batch.arrival = a - t0
            sent += len(batch)
            yield batch

    def check_replay(self, capacity: np.ndarray, largest: np.ndarray,
                     oversized: str = "error", where: str = "workload.trace") -> int:
        """Read the replay once (memory stays flat) before anything runs: refuse a table with
        no requests, and (``oversized="error"``) requests whose demand of some resource is
        above ``capacity``, the whole cluster's (a request may span servers, so no allocator
        could ever place one: almost always a unit mismatch); ``largest`` is the largest
        server's, for the message. Returns the number of requests."""
        n, over, first = 0, 0, None
        tol = 1e-9 * np.maximum(np.abs(capacity), 1.0)
        for batch in self.batches():
            k = len(batch)
            if oversized == "error" and k and len(capacity):
                bad = (batch.demand > capacity + tol).any(axis=1)
                if bad.any():
                    over += int(bad.sum())
                    if first is None:
                        i = int(np.argmax(bad))
                        j = int(np.argmax(batch.demand[i] > capacity + tol))
                        first = (int(self._last_rows[i]) + 1, self.resources[j],
                                 float(batch.demand[i, j]), j)
            n += k
        if n == 0:
            raise ConfigError(f"{where}.path: {self.name} has no requests"
                              + (" (every row was dropped)" if self.dropped else "")
                              + (" (every row was above redraw_above)" if self.redrawn else ""))
        if over:
            row, r, v, j = first
            raise ConfigError(
                f"{where}: {over} of {n} requests need more than the whole cluster holds, "
                f"which no allocator could ever place (first: row {row}, {r} {v:g} > "
                f"{capacity[j]:g} in all servers; the largest server has {r} {largest[j]:g}); "
                f"a unit mismatch? fix scale/columns, or set {where}.oversized: reject to "
                "replay them as rejections")
        return n

    def _convert(self, frame: pd.DataFrame, row0: int) -> RequestBatch | None:
        n = len(frame)
        cols: dict[str, np.ndarray] = {}
        bad = np.zeros(n, dtype=bool)
        for std, src in self._num.items():
            if not isinstance(src, str):
                cols[std] = np.full(n, float(src))
                continue
            v = seconds_or_numbers(frame[src])
            bad |= np.isnan(v)
            cols[std] = v
        if bad.any() and not self.dropna:
            i = int(np.argmax(bad))
            std, src = next((k, s) for k, s in self._num.items() if np.isnan(cols[k][i]))
            raw = frame[src].iloc[i]
            value = "it is empty" if pd.isna(raw) else f"it holds {str(raw)!r}"
            raise ConfigError(
                f"{self.name}: row {row0 + i + 1}: column {src!r} is empty or not a number "
                f"({value}); fix the file or set dropna: true")
        for std in ("arrival", *self.resources, "bandwidth"):
            src = self._num.get(std)
            inf = np.isinf(cols[std]) if isinstance(src, str) else None
            if inf is not None and inf.any():
                i = int(np.argmax(inf))
                raise ConfigError(f"{self.name}: row {row0 + i + 1}: column {src!r} is not a "
                                  f"finite number ({cols[std][i]:g})")
        attrs = {k: (np.full(n, float(s)) if not isinstance(s, str)
                     else np.array(frame[s].to_numpy(), copy=True))  # writable, not a view
                 for k, s in self._attrs.items()}
        if bad.any():
            keep = ~bad
            self.dropped += int(bad.sum())
            cols = {k: v[keep] for k, v in cols.items()}
            attrs = {k: v[keep] for k, v in attrs.items()}
            rows = np.flatnonzero(keep)
            n = len(rows)
        else:
            rows = np.arange(n)
        self._last_rows = row0 + rows  # the file rows (0-based) of the batch, for messages
        if n == 0:
            return None
        for k, f in self.scale.items():
            if k in attrs:
                attrs[k] = pd.to_numeric(pd.Series(attrs[k]), errors="coerce").to_numpy(
                    np.float64) * f
            elif k in cols:
                cols[k] = cols[k] * f
        if self._end:
            cols["duration"] = (cols.pop("end") - cols["arrival"]) * self.scale.get("duration", 1)
        cols["arrival"] = cols["arrival"] * self.time_scale
        cols["duration"] = cols["duration"] * self.time_scale

        def numeric(k: str) -> np.ndarray:
            if k in attrs:
                attrs[k] = pd.to_numeric(pd.Series(attrs[k]), errors="coerce").to_numpy(
                    np.float64)
                return attrs[k]
            return cols[k]

        def put(k: str, v: np.ndarray) -> None:
            (attrs if k in attrs else cols)[k] = v

        for k in self.truncate:  # int() of the value: toward zero
            put(k, np.trunc(numeric(k)))
        for k, z in self.zero_to.items():
            v = numeric(k)
            put(k, np.where(v == 0, float(z), v))
        for k, c in self.cap.items():
            put(k, np.minimum(numeric(k), c))
        if self.redraw_above:
            over = np.zeros(n, dtype=bool)
            for k, c in self.redraw_above.items():
                over |= numeric(k) > c
            if over.any():
                keep = ~over
                self.redrawn += int(over.sum())
                cols = {k: v[keep] for k, v in cols.items()}
                attrs = {k: v[keep] for k, v in attrs.items()}
                rows = rows[keep]
                self._last_rows = row0 + rows
                n = len(rows)
                if n == 0:
                    return None
        for k in ("duration", *self.resources, "bandwidth"):
            neg = cols[k] < 0
            if neg.any():
                i = int(np.argmax(neg))
                raise ConfigError(f"{self.name}: row {row0 + int(rows[i]) + 1}: {k} is negative "
                                  f"({cols[k][i]:g})")
        demand = np.column_stack([cols[r] for r in self.resources]) if self.resources else \
            np.zeros((n, 0))
        return RequestBatch(cols["arrival"], cols["duration"], demand,
                            np.array(cols["bandwidth"], copy=True), attrs)


def seconds_or_numbers(col: pd.Series) -> np.ndarray:
    """A column as float64: a timestamp column (a Parquet ``timestamp`` of any unit, with or
    without a time zone) as seconds since 1970-01-01 UTC, a duration column as seconds,
    anything else as numbers (NaN where a value is not one). Reading a timestamp's raw
    integers instead would give its storage unit: milliseconds for ``timestamp[ms]``."""
    if pd.api.types.is_datetime64_any_dtype(col.dtype):
        t = pd.to_datetime(col, utc=True)
        return (t - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy(
            np.float64, na_value=np.nan)
    if pd.api.types.is_timedelta64_dtype(col.dtype):
        return col.dt.total_seconds().to_numpy(np.float64, na_value=np.nan)
    return pd.to_numeric(col, errors="coerce").to_numpy(np.float64, na_value=np.nan)


def _head(b: RequestBatch, m: int) -> RequestBatch:
    return RequestBatch(b.arrival[:m], b.duration[:m], b.demand[:m], b.bandwidth[:m],
                        {k: v[:m] for k, v in b.attrs.items()})


def _not_utf8(path: Path, name: str) -> str:
    """The message for a CSV table that is not UTF-8: the file, line and byte of the first
    bad byte (a compressed file: its decompressed text) and how to convert it."""
    import codecs

    from pandas.io.common import get_handle

    decoder = codecs.getincrementaldecoder("utf-8")()
    offset, line = 0, 1
    try:
        with get_handle(path, "rb", compression="infer", is_text=False) as h:
            while chunk := h.handle.read(1 << 16):
                try:
                    decoder.decode(chunk)
                except UnicodeDecodeError as e:
                    bad = max(e.start, 0)
                    line += chunk[:bad].count(b"\n")
                    offset += bad
                    return (f"{name}: not UTF-8 text (line {line}, byte {offset}: "
                            f"{chunk[bad:bad + 1]!r}); convert it, e.g. `iconv -f latin1 -t "
                            "utf-8`, if it is Latin-1")
                offset += len(chunk)
                line += chunk.count(b"\n")
    except OSError:
        pass
    return f"{name}: not UTF-8 text; convert it, e.g. `iconv -f latin1 -t utf-8`"
