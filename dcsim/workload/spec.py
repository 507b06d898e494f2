"""The ``workload:`` section of an experiment file, and :func:`build_source` from it.

A workload is either synthetic (``arrival`` + ``duration`` [+ ``demand``, ``bandwidth``,
``attrs``]) or a ``trace`` (optionally with synthetic ``bandwidth`` / ``attrs`` drawn per
request on top of it, e.g. Nara's random bandwidth on Azure-derived requests). A trace with
``resample: true`` is the mix: demand rows drawn at random from the table, synthetic
``arrival`` and ``duration`` (see :mod:`dcsim.workload.resample`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, ValidationError, field_validator

from dcsim.errors import ConfigError
from dcsim.model.topology import Topology
from dcsim.validation import ConfigModel
from dcsim.workload.arrivals import Arrival
from dcsim.workload.arrivals_time import PiecewiseArrivals, TraceRateArrivals
from dcsim.workload.base import RequestSource
from dcsim.workload.dist_base import BaseDist
from dcsim.workload.distributions import Dist, Empirical, validation_message
from dcsim.workload.resample import TableRows
from dcsim.workload.synthetic import AugmentedSource, SyntheticSource
from dcsim.workload.trace_format import read_trace
from dcsim.workload.trace_import import TABLE, registered_format_name, trace_format
from dcsim.workload.traces import TraceSource


class TraceSpec(ConfigModel):
    """Replay a table (``format: table``, CSV or Parquet) or a raw trace through its trace
    format (any registered one: the built-in importers and plugins' formats).

    ``path`` is relative to the experiment file's folder (then the working directory); for
    ``azure2017`` it is the folder of the rnn files. ``columns`` maps standard names to file
    columns (or numbers), ``scale`` multiplies columns, ``cap`` bounds them from above,
    ``time_scale`` multiplies arrival and duration, ``truncate`` drops the fractional part of
    the columns it names (Python's ``int()``), ``zero_to`` replaces an exact 0 (e.g. ``{cpu:
    1}``: Nara's "0 -> 1"), ``redraw_above`` skips a row with a column above the bound
    (resampled: the request is drawn again, as Nara's sets do; applied after ``cap``), ``limit``
    caps the number of requests (default: ``workload.requests``). ``split`` (azure2017) and
    ``options`` (the format's other options, e.g. ``lifetime: lower``, ``statuses: null``,
    ``horizon_days: 14``) go to the format, validated against its ``Options`` when the
    experiment is read. ``resample: true`` draws each request's demand as
    a whole row, uniformly with replacement, from the table's first ``limit`` rows (default: all
    of them), and takes arrival and duration from ``workload.arrival`` / ``workload.duration``;
    ``oversized``: a request whose demand is above the whole cluster's capacity (no allocator
    could place it: usually a unit mismatch) is an error at start (``error``, the default) or
    replayed and counted as a rejection (``reject``);
    the table then needs no ``arrival`` / ``duration`` columns (a table of request types).
    ``bandwidth_low`` (resampled only): each request's bandwidth is drawn uniformly between it
    and the row's ``bandwidth`` column (Nara's Azure set on delta: U(0.1, nic x 10)). """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    path: str
    format: str = TABLE
    columns: dict[str, str | float] = Field(default_factory=dict)
    scale: dict[str, float] = Field(default_factory=dict)
    cap: dict[str, float] = Field(default_factory=dict)
    truncate: list[str] = Field(default_factory=list)
    zero_to: dict[str, float] = Field(default_factory=dict)
    redraw_above: dict[str, float] = Field(default_factory=dict)
    bandwidth_low: float | None = Field(None, ge=0)
    time_scale: PositiveFloat = 1.0
    start_at_zero: bool = True
    limit: int | None = Field(None, ge=0)
    split: Literal["dev", "test"] | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    sort: bool = False
    dropna: bool = False
    batch_size: int = Field(65536, ge=1)
    resample: bool = False
    oversized: Literal["error", "reject"] = "error"

    @field_validator("format")
    @classmethod
    def _registered_format(cls, value: str) -> str:
        """``table`` or a registered trace format (asked only for a format)."""
        return registered_format_name(value)


class WorkloadSpec(ConfigModel):
    """Synthetic (``arrival`` + ``duration`` + ``demand``) or ``trace``, never both — except
    a resampled trace, which needs ``arrival`` and ``duration``. ``name`` is a label only (the
    results column of a swept workload)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    name: str | None = None
    requests: int | None = Field(None, ge=0)
    arrival: Arrival | None = None
    demand: dict[str, Dist] = Field(default_factory=dict)
    bandwidth: Dist | None = None
    duration: Dist | None = None
    attrs: dict[str, Dist] = Field(default_factory=dict)
    trace: TraceSpec | None = None
    batch_size: int = Field(4096, ge=1)


def parse_workload(spec: WorkloadSpec | dict[str, Any], where: str = "workload") -> WorkloadSpec:
    """Validate a ``workload:`` mapping; ConfigError names the field path and the reason."""
    if isinstance(spec, WorkloadSpec):
        ws = spec
    else:
        if not isinstance(spec, dict):
            raise ConfigError(f"{where}: expected a mapping, got {type(spec).__name__}")
        try:
            ws = WorkloadSpec.model_validate(spec)
        except ValidationError as e:
            raise ConfigError(validation_message(e, where, spec)) from None
    if ws.trace is not None:
        trace_options(ws.trace, f"{where}.trace")
    if ws.trace is not None and ws.trace.resample:
        _check_resample(ws, where)
    elif ws.trace is not None:
        extra = [k for k in ("arrival", "duration") if getattr(ws, k) is not None]
        if ws.demand:
            extra.append("demand")
        if extra:
            raise ConfigError(f"{where}: give either trace or {'/'.join(extra)}, not both "
                              f"(a trace's demand comes from workload.trace.columns)")
        if ws.trace.bandwidth_low is not None:
            raise ConfigError(f"{where}.trace.bandwidth_low: only with resample: true")
    else:
        missing = [k for k in ("arrival", "duration") if getattr(ws, k) is None]
        if missing:
            raise ConfigError(f"{where}: a synthetic workload needs {' and '.join(missing)} "
                              "(or give a trace)")
        if ws.requests is None:
            raise ConfigError(f"{where}.requests: required for a synthetic workload")
    return ws


def _check_resample(ws: WorkloadSpec, where: str) -> None:
    tr, w = ws.trace, f"{where}.trace"
    missing = [k for k in ("arrival", "duration") if getattr(ws, k) is None]
    if missing:
        raise ConfigError(f"{where}: a resampled trace (trace.resample: true) needs "
                          f"{' and '.join(missing)}; the trace's own timing is not used")
    if ws.requests is None:
        raise ConfigError(f"{where}.requests: required for a resampled trace")
    if ws.demand:
        raise ConfigError(f"{where}.demand: a resampled trace gives the demand (from "
                          f"{w}.columns); remove demand")
    if tr.time_scale != 1.0:
        raise ConfigError(f"{w}.time_scale: not used with resample (timing is synthetic)")
    if tr.bandwidth_low is not None and ws.bandwidth is not None:
        raise ConfigError(f"{w}.bandwidth_low: draws the bandwidth up to the row's own; "
                          f"remove {where}.bandwidth (or bandwidth_low)")


def trace_options(tr: TraceSpec, where: str = "workload.trace") -> BaseModel | None:
    """``tr.options`` (with ``tr.split``) validated against its format's ``Options``, the
    first error naming ``<where>.options.<option>``; None for ``format: table``."""
    if tr.format == TABLE:
        if tr.options:
            raise ConfigError(f"{where}.options: only for a trace format, not format: table")
        if tr.split is not None:
            raise ConfigError(f"{where}.split: only for format azure2017")
        return None
    fmt = trace_format(tr.format)
    opts = dict(tr.options)
    if tr.split is not None:
        if "split" not in fmt.Options.model_fields:
            raise ConfigError(f"{where}.split: only for format azure2017 (format "
                              f"{tr.format} has no split)")
        opts["split"] = tr.split
    return fmt.parse_options(opts, f"{where}.options")


def resolve_path(path: str | Path, base_dir: Path | None, where: str) -> Path:
    """``path`` if absolute, else under ``base_dir`` if it exists there, else under the CWD."""
    p = Path(path).expanduser()
    if p.is_absolute():
        candidates = [p]
    else:
        candidates = ([Path(base_dir) / p] if base_dir is not None else []) + [Path.cwd() / p]
    for c in candidates:
        if c.exists():
            return c
    raise ConfigError(f"{where}: {str(path)!r} not found (looked in "
                      f"{', '.join(str(c.parent) for c in candidates)})")


def _load_arrival(a: Any, base_dir: Path | None, where: str) -> Any:
    """An arrival process whose rate table lives in a file, with the file read (its path
    resolved like a trace's); any other process as it is."""
    if isinstance(a, PiecewiseArrivals | TraceRateArrivals) and a.path is not None:
        path = resolve_path(a.path, base_dir, f"{where}.path")
        try:
            return a.model_copy(update={"path": str(path)}).load()
        except ConfigError as e:
            raise ConfigError(f"{where}.path: {str(e).replace(str(path), str(a.path))}"
                              ) from None
    return a


def _load(d: Any, base_dir: Path | None, where: str) -> Any:
    if isinstance(d, Empirical) and d.path is not None:
        d = d.model_copy(update={"path": str(resolve_path(d.path, base_dir, f"{where}.path"))})
        return d.load()
    return d


_CACHE: dict[tuple[Any, ...], Any] = {}


def _imported(fmt: str, path: Path, options: BaseModel) -> Any:
    """Read a trace with its format, remembering the last two tables (each run of an
    experiment builds its source again; raw traces are treated as immutable, keyed by path
    and mtime)."""
    cls = trace_format(fmt)
    key = (fmt, cls, str(path.resolve()), path.stat().st_mtime_ns,
           repr(sorted(options.model_dump().items())))
    if key not in _CACHE:
        if len(_CACHE) >= 2:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = read_trace(cls, path, options)
    return _CACHE[key]


def build_source(spec: WorkloadSpec | dict[str, Any], topology: Topology,
                 base_dir: Path | str | None = None, where: str = "workload",
                 check: bool = False) -> RequestSource:
    """The request source an experiment's ``workload:`` section describes, for ``topology``.
    ``check`` (before a run, e.g. by ``dcsim validate``): also read a trace through once and
    refuse an empty one or requests no allocator could place (:func:`check_demand`)."""
    ws = parse_workload(spec, where)
    if check:
        check_demand(ws, topology, base_dir, where)
    base = Path(base_dir) if base_dir is not None else None
    attrs = {k: _load(d, base, f"{where}.attrs.{k}") for k, d in ws.attrs.items()}
    bandwidth = _load(ws.bandwidth, base, f"{where}.bandwidth")
    resources = tuple(topology.resources)
    if ws.trace is None or ws.trace.resample:
        rows = None
        if ws.trace is not None:
            rows = TableRows(_trace_source(ws, resources, base, where),
                             bandwidth_low=ws.trace.bandwidth_low)
        demand = {k: _load(d, base, f"{where}.demand.{k}") for k, d in ws.demand.items()}
        capacity = dict(zip(resources, map(float, topology.total_capacity()), strict=True))
        return SyntheticSource(
            arrival=_load_arrival(ws.arrival, base, f"{where}.arrival"),
            n_requests=ws.requests, demand=demand,
            duration=_load(ws.duration, base, f"{where}.duration"), bandwidth=bandwidth,
            resources=resources, attrs=attrs, batch_size=ws.batch_size,
            total_capacity=capacity, where=where, rows=rows)
    source = _trace_source(ws, resources, base, where)
    if bandwidth is not None or attrs:
        source = AugmentedSource(source, bandwidth=bandwidth, attrs=attrs, where=where)
    return source


def _trace_source(ws: WorkloadSpec, resources: tuple[str, ...], base: Path | None,
                  where: str) -> TraceSource:
    """The replay of ``workload.trace`` (for resampling: its first ``limit`` rows, sorted)."""
    tr = ws.trace
    w = f"{where}.trace"
    path = resolve_path(tr.path, base, f"{w}.path")
    if tr.resample:
        limit = tr.limit
    else:
        limit = tr.limit if tr.limit is not None else ws.requests
    options = trace_options(tr, w)
    if options is None:
        table: Any = path
        name = str(tr.path)
    else:
        try:
            table = _imported(tr.format, path, options)
        except ConfigError as e:
            raise ConfigError(f"{w}: {e}") from None
        name = f"{tr.path} ({tr.format})"
    try:
        return TraceSource(
            table, columns=tr.columns, scale=tr.scale, time_scale=tr.time_scale,
            start_at_zero=tr.start_at_zero, limit=limit, resources=resources,
            batch_size=tr.batch_size, sort=tr.sort or tr.resample, dropna=tr.dropna,
            cap=tr.cap, name=name, truncate=tr.truncate, zero_to=tr.zero_to,
            redraw_above=tr.redraw_above, timing=not tr.resample)
    except ConfigError as e:
        raise ConfigError(f"{w}: {e}") from None


def check_demand(ws: WorkloadSpec, topology: Topology, base_dir: Path | str | None,
                 where: str = "workload") -> None:
    """Refuse demand the whole cluster could never hold (a request may span servers, so the
    bound is the cluster's total capacity, not one server's): a trace's rows (unless
    ``trace.oversized: reject``; and a trace with no requests) or a synthetic distribution
    whose values can exceed it. Either is almost always a unit mismatch."""
    cap = topology.server_capacity
    total = cap.sum(axis=0) if len(cap) else np.zeros(len(topology.resources))
    largest = cap.max(axis=0) if len(cap) else total
    base = Path(base_dir) if base_dir is not None else None
    if ws.trace is not None:
        src = _trace_source(ws, tuple(topology.resources), base, where)
        src.check_replay(total, largest, ws.trace.oversized, where=f"{where}.trace")
        return
    for j, r in enumerate(topology.resources):
        d = ws.demand.get(r)
        if not isinstance(d, BaseDist):
            continue
        d = _load(d, base, f"{where}.demand.{r}")
        hi = d.upper_bound()
        if math.isfinite(hi) and hi > total[j] * (1 + 1e-9):
            raise ConfigError(
                f"{where}.demand.{r}: draws values up to {hi:g}, above the whole cluster's "
                f"{r} ({total[j]:g}; the largest server has {largest[j]:g}): no allocator "
                f"could ever place such a request; a unit mismatch? (or bound it with max:)")
        lo = d.lower_bound()
        if lo > total[j] * (1 + 1e-9):
            raise ConfigError(
                f"{where}.demand.{r}: every value drawn is at least {lo:g}, above the whole "
                f"cluster's {r} ({total[j]:g}; the largest server has {largest[j]:g}); a unit "
                "mismatch?")
