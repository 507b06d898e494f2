"""Arrivals whose rate varies in time: non-homogeneous Poisson processes (``diurnal``, a
sinusoid; ``nhpp``, a piecewise-constant rate table; ``trace_rate``, a table estimated from a
trace's arrival times) and the Markov-modulated Poisson process (``mmpp``, bursts).

**Sampling: exact inversion of the integrated rate**, not thinning. With Λ(t) = ∫₀ᵗ λ(u) du
and E₁, E₂, … unit exponentials, the arrivals after ``start`` are
Λ⁻¹(Λ(start) + E₁ + … + Eₖ) (the time-change theorem), exact in law. Why not Lewis–Shedler
thinning:

- **One unit exponential per arrival**: a batch of ``n`` arrivals takes exactly ``n`` draws
  from the workload's generator, the very draws ``poisson`` takes (numpy's ``exponential(1 /
  rate)`` is ``1 / rate`` times the same unit exponential). The demand, duration and other
  columns drawn after the arrivals then come from the same positions of the stream as under
  ``poisson`` with the same seed, so a diurnal and a flat workload share their requests, and
  the k-th arrival moves continuously as a rate parameter is swept. Thinning takes a random
  number of draws per arrival and reshuffles everything after it.
- **No rejected candidates**: thinning draws ``max λ / mean λ`` candidates per arrival,
  unbounded for a spiky table, and needs a bound on λ that a table or trace gives only by a
  scan.
- Λ is piecewise linear for a table (inverted exactly by a search and a division) and closed
  form for the sinusoid (inverted by a bracketed Newton iteration to ~1e-13 relative, within
  one period, so long runs keep their precision).

Every process is memoryless in the sense a batch needs: given the time of the last arrival
(and, for ``mmpp``, the phase then), the next arrivals do not depend on the earlier ones. The
``mmpp`` keeps its phase across batches (:meth:`MMPPArrivals.stream`); the others are
functions of ``start`` only. All draw only from the workload's generator, so a seed gives the
same arrivals whatever the allocator (the runner gives allocators their own generator).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    NonNegativeFloat,
    PositiveFloat,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from dcsim.errors import ConfigError
from dcsim.parquet_tables import parquet_rows, read_parquet
from dcsim.workload.arrival_base import HUGE, BaseArrivals, TimesFn, not_huge

__all__ = ["DiurnalArrivals", "MMPPArrivals", "PiecewiseArrivals", "RateTable",
           "TraceRateArrivals"]

_Rate = Annotated[float, Field(gt=0.0), AfterValidator(not_huge)]
_NEWTON_ITERS = 200  # a cap only: Newton from a bracket converges in a handful of steps


def _unit_sums(rng: np.random.Generator, n: int) -> np.ndarray:
    """E₁, E₁ + E₂, …: the integrated-rate distances of the next ``n`` arrivals (the same
    draws as ``poisson``'s gaps)."""
    return np.cumsum(rng.exponential(1.0, n))


def _ordered(t: np.ndarray, start: float) -> np.ndarray:
    """Times after ``start``, non-decreasing even where rounding crossed a breakpoint."""
    return np.maximum.accumulate(np.maximum(t, start))


# ---------------------------------------------------------------------- a piecewise rate
class RateTable:
    """A piecewise-constant rate: ``rates[i]`` on [``times[i]``, ``times[i+1]``), the last
    rate from ``times[-1]`` on, or the table repeated every ``period``; ``times[0] == 0``.
    Λ is piecewise linear: :meth:`cumulative` evaluates it and :meth:`inverse` inverts it
    exactly (a zero-rate segment is skipped: no arrival falls in it)."""

    def __init__(self, times: np.ndarray, rates: np.ndarray, period: float | None) -> None:
        self.times = np.asarray(times, np.float64)
        self.rates = np.asarray(rates, np.float64)
        self.period = period
        ends = np.append(self.times[1:], period if period is not None else self.times[-1])
        #: Λ at each breakpoint (and, with a period, at its end)
        self.knots = np.concatenate([[0.0], np.cumsum(self.rates * (ends - self.times))])
        self.per_period = float(self.knots[-1]) if period is not None else math.nan

    @property
    def mean_rate(self) -> float:
        """The long-run rate: the mean over a period, else the last rate."""
        return self.per_period / self.period if self.period is not None else float(
            self.rates[-1])

    def rate_at(self, t: np.ndarray | float) -> np.ndarray:
        t = np.asarray(t, np.float64)
        if self.period is not None:
            t = np.mod(t, self.period)
        return self.rates[np.searchsorted(self.times, t, side="right") - 1]

    def cumulative(self, t: np.ndarray | float) -> np.ndarray:
        """Λ(t) = ∫₀ᵗ λ."""
        t = np.asarray(t, np.float64)
        whole = 0.0
        if self.period is not None:
            m = np.floor(t / self.period)
            t, whole = t - m * self.period, m * self.per_period
        i = np.searchsorted(self.times, t, side="right") - 1
        return whole + self.knots[i] + self.rates[i] * (t - self.times[i])

    def inverse(self, y: np.ndarray) -> np.ndarray:
        """The first t with Λ(t) = y (y > 0)."""
        y = np.asarray(y, np.float64)
        base = 0.0
        if self.period is not None:
            m = np.floor(y / self.per_period)
            y, base = y - m * self.per_period, m * self.period
        k = len(self.times)
        j = np.searchsorted(self.knots[:k], y, side="left") - 1  # knots[j] < y <= knots[j+1]
        j = np.maximum(j, 0)
        r = self.rates[j]
        step = np.divide(y - self.knots[j], r, out=np.zeros_like(y), where=r > 0)
        return base + self.times[j] + step

    def times_after(self, rng: np.random.Generator, n: int, start: float) -> np.ndarray:
        y = float(self.cumulative(start)) + _unit_sums(rng, n)
        return _ordered(self.inverse(y), start)


def _times_problem(times: np.ndarray, at: Callable[[int], str]) -> str | None:
    """Why ``times`` cannot be a table's breakpoints (``at(i)`` names entry i), or None."""
    if len(times) == 0:
        return "the table is empty"
    if not np.all(np.isfinite(times)):
        return "a time is not a finite number"
    if times[0] != 0:
        return f"the first time must be 0 (the rate from the start), got {times[0]:g}"
    bad = np.flatnonzero(~(np.diff(times) > 0))
    if len(bad):
        i = int(bad[0]) + 1
        return (f"must be increasing; {at(i)} ({times[i]:g}) is not after {at(i - 1)} "
                f"({times[i - 1]:g})")
    return None


def _rates_problem(rates: np.ndarray, period: float | None,
                   at: Callable[[int], str]) -> str | None:
    """Why ``rates`` cannot be a table's rates, or None."""
    if len(rates) == 0:
        return "the table is empty"
    bad = np.flatnonzero(~(rates >= 0))
    if len(bad):
        i = int(bad[0])
        return f"{at(i)} is {rates[i]:g}; a rate is >= 0"
    if np.any(rates > HUGE):
        return "above 1e+100, where float times between arrivals stay usable"
    tiny = np.flatnonzero((rates > 0) & (rates < 1.0 / HUGE))
    if len(tiny):
        i = int(tiny[0])
        return (f"{at(i)} is {rates[i]:g}; a rate is 0 (no arrivals) or at least 1e-100, "
                "where float times between arrivals stay usable")
    if period is not None:
        if not np.any(rates > 0):
            return "all zero: no request would ever arrive"
    elif not rates[-1] > 0:
        return ("the last rate holds forever without a period and is 0: the requests after "
                "it would never arrive; give a period to repeat the table, or a last rate > 0")
    return None


def _period_problem(times: np.ndarray, period: float | None) -> str | None:
    if period is not None and len(times) and not period > times[-1]:
        return f"{period:g} must be after the last time ({times[-1]:g})"
    return None


def _check_file_table(times: np.ndarray, rates: np.ndarray, period: float | None,
                      columns: tuple[str, str]) -> None:
    """A table read from a file: messages name the column and the (1-based) data row."""
    def row(i: int) -> str:
        return f"row {i + 1}"

    for name, problem in ((f"column {columns[0]!r}", _times_problem(times, row)),
                          ("period", _period_problem(times, period)),
                          (f"column {columns[1]!r}", _rates_problem(rates, period, row))):
        if problem:
            raise ValueError(f"{name}: {problem}")


#: the most rows a rate table's file may have (``max_rows`` raises it for a trusted file):
#: counted from a Parquet file's footer, and in a plain CSV's lines, before it is parsed
MAX_TABLE_ROWS = 10_000_000


def _read_columns(path: Path, columns: list[str], max_rows: int | None = None
                  ) -> dict[str, np.ndarray]:
    """Numeric columns of a CSV or Parquet file (ConfigError naming the file otherwise);
    with ``max_rows``, a file that may hold more rows is refused before it is read."""
    import pandas as pd

    from dcsim.csv_tables import data_lines, read_csv

    if not path.exists():
        raise ConfigError(f"{path}: no such file")
    if max_rows is not None:
        try:
            rows = (parquet_rows(path) if path.suffix in (".parquet", ".pq")
                    else data_lines(path))
        except (OSError, ValueError) as e:
            raise ConfigError(f"{path}: cannot read ({e})") from None
        if rows is not None and rows > max_rows:
            raise ConfigError(f"{path}: {rows:,} rows, above the {max_rows:,} a rate table "
                              "may have; set max_rows to read a larger trusted file")
    try:
        if path.suffix in (".parquet", ".pq"):
            frame = read_parquet(path, columns=columns)
        else:
            frame = read_csv(path, usecols=columns)
    except (KeyError, ValueError) as e:
        raise ConfigError(f"{path}: cannot read column(s) {', '.join(map(repr, columns))} "
                          f"({e})") from None
    out = {}
    for c in columns:
        col = pd.to_numeric(frame[c], errors="coerce").to_numpy(np.float64)
        if np.isnan(col).any():
            raise ConfigError(f"{path}: column {c!r}, row {int(np.argmax(np.isnan(col))) + 1}: "
                              "not a number")
        out[c] = col
    return out


class _FileBacked(BaseArrivals):
    """A process whose table may come from a file: ``path`` is resolved by
    :func:`dcsim.workload.spec.build_source` (experiment folder, then the working directory)
    and read by :meth:`load`; used unloaded, it reads ``path`` from the working directory."""

    path: str | None = None
    _table: RateTable | None = PrivateAttr(default=None)

    def _build(self, base: Path | None) -> RateTable:
        raise NotImplementedError

    def load(self, base_dir: Path | None = None) -> _FileBacked:
        """A copy holding its rate table (errors name the file and the row)."""
        out = self.model_copy()
        try:
            out._table = self._build(base_dir)
        except ValueError as e:
            raise ConfigError(f"{self.path}: {e}") from None
        return out

    @property
    def table(self) -> RateTable:
        if self._table is None:
            self._table = self.load()._table
        return self._table

    @property
    def rate(self) -> float:
        """The long-run mean rate (what ``offered_load`` uses)."""
        return self.table.mean_rate

    def rate_at(self, t: np.ndarray | float) -> np.ndarray:
        """λ(t)."""
        return self.table.rate_at(t)

    def cumulative(self, t: np.ndarray | float) -> np.ndarray:
        """Λ(t) = ∫₀ᵗ λ: the expected number of arrivals in [0, t]."""
        return self.table.cumulative(t)

    def times(self, rng: np.random.Generator, n: int, start: float = 0.0) -> np.ndarray:
        return self.table.times_after(rng, n, start)


class PiecewiseArrivals(_FileBacked):
    """A non-homogeneous Poisson process with a piecewise-constant rate: ``rates[i]``
    arrivals per time unit from ``times[i]`` until ``times[i+1]`` (``times[0]`` is 0), the
    last rate from the last time on, or the whole table repeated every ``period``. Inline
    (``times`` + ``rates``) or from a CSV/Parquet file (``path``, ``time_column``,
    ``rate_column``); ``rate_scale`` multiplies every rate. Sampled by exact inversion of
    the piecewise-linear integrated rate (see the module)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    process: Literal["nhpp"] = "nhpp"
    times_: list[float] | None = Field(None, alias="times")
    period: PositiveFloat | None = None
    rate_scale: PositiveFloat = 1.0
    rates: list[float] | None = None
    time_column: str = "time"
    rate_column: str = "rate"
    max_rows: Annotated[int, Field(ge=1)] = MAX_TABLE_ROWS

    # the checks of an inline table, field by field (a file's run in load())
    @field_validator("times_")
    @classmethod
    def _times_ok(cls, v: list[float] | None) -> list[float] | None:
        problem = None if v is None else _times_problem(np.asarray(v, np.float64),
                                                        lambda i: f"times[{i}]")
        if problem:
            raise ValueError(problem)
        return v

    @field_validator("period")
    @classmethod
    def _period_ok(cls, v: float | None, info: ValidationInfo) -> float | None:
        times = info.data.get("times_")
        problem = None if times is None else _period_problem(np.asarray(times), v)
        if problem:
            raise ValueError(problem)
        return v

    @field_validator("rates")
    @classmethod
    def _rates_ok(cls, v: list[float] | None, info: ValidationInfo) -> list[float] | None:
        if v is None:
            return v
        times = info.data.get("times_")
        if times is not None and len(times) != len(v):
            raise ValueError(f"{len(v)} rates but {len(times)} times")
        problem = _rates_problem(np.asarray(v, np.float64) * info.data.get("rate_scale", 1.0),
                                 info.data.get("period"), lambda i: f"rates[{i}]")
        if problem:
            raise ValueError(problem)
        return v

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, populate_by_name=True,
                              serialize_by_alias=True)

    @model_validator(mode="after")
    def _validate(self) -> PiecewiseArrivals:
        inline = self.times_ is not None or self.rates is not None
        if inline == (self.path is not None):
            raise ValueError("give either times and rates, or path (a CSV or Parquet file "
                             "with columns time_column and rate_column)")
        if inline:
            if self.times_ is None or self.rates is None:
                raise ValueError("give times and rates together (or a path)")
            self._table = self._build(None)
        return self

    def _build(self, base: Path | None) -> RateTable:
        if self.path is None:
            t, r = np.asarray(self.times_, np.float64), np.asarray(self.rates, np.float64)
        else:
            path = Path(self.path)
            if not path.is_absolute() and base is not None and (base / path).exists():
                path = base / path
            cols = _read_columns(path, [self.time_column, self.rate_column], self.max_rows)
            t, r = cols[self.time_column], cols[self.rate_column]
        r = r * self.rate_scale
        if self.path is not None:
            _check_file_table(t, r, self.period, (self.time_column, self.rate_column))
        return RateTable(t, r, self.period)


class TraceRateArrivals(_FileBacked):
    """A non-homogeneous Poisson process whose rate curve is estimated from a trace: the
    arrival times in ``column`` of a CSV/Parquet file (times ``time_scale``, then shifted so
    the first is 0) are counted in bins of width ``bin``, and bin i's rate is its count /
    ``bin``; the curve repeats after the last bin (a day of trace gives every day), and
    ``rate_scale`` multiplies it. The last bin ends at the first multiple of ``bin`` after
    the last arrival, so a ``bin`` that does not divide the trace's span under-estimates the
    last bin. Sampled as ``nhpp`` (exact inversion)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    process: Literal["trace_rate"] = "trace_rate"
    path: str
    column: str = "arrival"
    bin: _Rate
    time_scale: PositiveFloat = 1.0
    rate_scale: PositiveFloat = 1.0

    def _build(self, base: Path | None) -> RateTable:
        path = Path(self.path)
        if not path.is_absolute() and base is not None and (base / path).exists():
            path = base / path
        t = np.sort(_read_columns(path, [self.column])[self.column]) * self.time_scale
        if len(t) == 0:
            raise ValueError(f"column {self.column!r}: no arrival times")
        if not np.all(np.isfinite(t)):
            raise ValueError(f"column {self.column!r}: a non-finite arrival time")
        t = t - t[0]
        bins = int(t[-1] // self.bin) + 1
        if bins > 10_000_000:
            raise ValueError(f"bin: {self.bin:g} cuts the trace's span ({t[-1]:g}) into "
                             f"{bins} bins; give a wider bin")
        counts = np.bincount((t // self.bin).astype(np.int64), minlength=bins)[:bins]
        rates = counts.astype(np.float64) / self.bin * self.rate_scale
        edges = np.arange(bins, dtype=np.float64) * self.bin
        return RateTable(edges, rates, bins * self.bin)


# ---------------------------------------------------------------------- diurnal
class DiurnalArrivals(BaseArrivals):
    """A non-homogeneous Poisson process with a sinusoidal rate, λ(t) = ``mean`` +
    ``amplitude`` · cos(2π (t − ``peak``) / ``period``): highest (mean + amplitude) at
    ``peak`` (default ``period / 4``, i.e. λ(t) = mean + amplitude · sin(2π t / period)),
    lowest half a period later; ``amplitude`` at most ``mean``, so λ ≥ 0. Sampled by exact
    inversion of Λ(t) = mean·t + (amplitude·period / 2π)(sin(2π(t − peak)/period) +
    sin(2π peak/period)) (see the module)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, populate_by_name=True,
                              serialize_by_alias=True)
    process: Literal["diurnal"] = "diurnal"
    mean_: _Rate = Field(alias="mean")
    amplitude: NonNegativeFloat
    period: _Rate
    peak: float | None = None

    @field_validator("amplitude")
    @classmethod
    def _amplitude_ok(cls, v: float, info: ValidationInfo) -> float:
        mean = info.data.get("mean_")
        if mean is not None and v > mean:
            raise ValueError(f"{v:g} is above mean ({mean:g}): the rate would fall to "
                             f"{mean - v:g} < 0 at its trough")
        return v

    @property
    def rate(self) -> float:
        return self.mean_

    @property
    def _peak(self) -> float:
        return self.period / 4.0 if self.peak is None else self.peak

    def rate_at(self, t: np.ndarray | float) -> np.ndarray:
        """λ(t)."""
        w = 2.0 * math.pi / self.period
        return self.mean_ + self.amplitude * np.cos(w * (np.asarray(t, np.float64)
                                                         - self._peak))

    def _within(self, tau: np.ndarray) -> np.ndarray:
        """Λ(τ) for τ in one period [0, period]."""
        w = 2.0 * math.pi / self.period
        c = self.amplitude / w
        return self.mean_ * tau + c * (np.sin(w * (tau - self._peak)) + math.sin(w * self._peak))

    def cumulative(self, t: np.ndarray | float) -> np.ndarray:
        """Λ(t) = ∫₀ᵗ λ: the expected number of arrivals in [0, t]."""
        t = np.asarray(t, np.float64)
        m = np.floor(t / self.period)
        return m * (self.mean_ * self.period) + self._within(t - m * self.period)

    def _inverse(self, y: np.ndarray) -> np.ndarray:
        """The t with Λ(t) = y: whole periods, then Newton within one, kept in a bracket."""
        P, mean = self.period, self.mean_
        m = np.floor(y / (mean * P))
        r = y - m * (mean * P)
        w = 2.0 * math.pi / P
        c = self.amplitude / w
        s0 = math.sin(w * self._peak)
        # |c sin(...)| <= c: mean τ lies within c of r - c s0
        lo = np.clip((r - c - c * s0) / mean, 0.0, P)
        hi = np.clip((r + c - c * s0) / mean, 0.0, P)
        tau = np.clip((r - c * s0) / mean, lo, hi)
        eps = np.finfo(np.float64).eps
        tol = 16 * eps * (np.abs(r) + 3 * c)
        act = np.arange(len(r))  # the entries still iterating
        for _ in range(_NEWTON_ITERS):
            t, a, b = tau[act], lo[act], hi[act]
            f = self._within(t) - r[act]
            done = np.abs(f) <= tol[act]
            a = np.where(f < 0, t, a)
            b = np.where(f > 0, t, b)
            d = self.rate_at(t)
            step = np.divide(f, d, out=np.full_like(f, np.inf), where=d > 0)
            nxt = t - step
            nxt = np.where((nxt > a) & (nxt < b), nxt, 0.5 * (a + b))  # else bisect
            done |= (np.abs(nxt - t) <= 4 * eps * np.maximum(t, 1.0)) | (
                b - a <= 4 * eps * np.maximum(b, 1.0))
            tau[act] = np.where(done, t, nxt)
            lo[act], hi[act] = a, b
            act = act[~done]
            if not len(act):
                break
        return m * P + tau

    def times(self, rng: np.random.Generator, n: int, start: float = 0.0) -> np.ndarray:
        y = float(self.cumulative(start)) + _unit_sums(rng, n)
        return _ordered(self._inverse(y), start)


# ---------------------------------------------------------------------- MMPP
def _square(rows: list[list[float]], k: int) -> np.ndarray:
    if len(rows) != k or any(len(r) != k for r in rows):
        raise ValueError(f"must be {k} x {k} (rates has {k} states)")
    return np.asarray(rows, np.float64)


def _irreducible(q: np.ndarray) -> None:
    """Refuse a chain (generator or jump matrix) in which some state cannot reach another."""
    k = len(q)
    off = q - np.diag(np.diag(q))
    for i in range(k):
        if not off[i].any():
            raise ValueError(f"state {i} is never left (absorbing); every state needs a way "
                             "out")
    reach = (off > 0) | np.eye(k, dtype=bool)
    for _ in range(k):  # transitive closure
        reach = reach | ((reach.astype(np.int64) @ reach.astype(np.int64)) > 0)
    if not reach.all():
        i, j = np.argwhere(~reach)[0]
        raise ValueError(f"state {j} cannot be reached from state {i}; the chain must be "
                         "irreducible (every state reachable from every other)")


def _stationary(q: np.ndarray) -> np.ndarray:
    """π with πQ = 0 and Σπ = 1 (unique for an irreducible chain)."""
    k = len(q)
    a = np.vstack([q.T, np.ones(k)])
    b = np.zeros(k + 1)
    b[-1] = 1.0
    pi = np.clip(np.linalg.lstsq(a, b, rcond=None)[0], 0.0, None)
    return pi / pi.sum()


class MMPPArrivals(BaseArrivals):
    """A Markov-modulated Poisson process (bursts): a continuous-time Markov chain over
    states ``0..k-1`` (its phase) and Poisson arrivals at ``rates[phase]``. The chain is
    given by its ``generator`` Q (``Q[i][j]`` ≥ 0 the rate of jumping from i to j, each row
    summing to 0), or by the mean ``sojourn`` time in each state plus the ``jump``
    probabilities (zero diagonal, rows summing to 1; default: uniform over the other
    states), i.e. Q[i][j] = jump[i][j] / sojourn[i]. The chain must be irreducible. The
    first phase is drawn from the stationary law π (πQ = 0; ``initial: stationary``) or
    given (``initial: i``); ``rate`` is the stationary mean rate Σ πᵢ ratesᵢ.

    A batch draws its ``n`` unit exponentials first, then the chain's path from ``start``
    (sojourns and jumps, in blocks) until the integrated rate covers them, and inverts the
    piecewise-linear Λ along that path (see the module). The phase at the batch's last
    arrival carries to the next batch (:meth:`stream`); the rest of the path is dropped,
    which is exact: at an arrival the future depends only on the phase (strong Markov)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    process: Literal["mmpp"] = "mmpp"
    rates: list[NonNegativeFloat] = Field(min_length=2)
    generator: list[list[float]] | None = None
    sojourn: list[PositiveFloat] | None = None
    jump: list[list[NonNegativeFloat]] | None = None
    initial: Literal["stationary"] | Annotated[int, Field(ge=0)] = "stationary"
    _chain: tuple[Any, ...] | None = PrivateAttr(default=None)

    @field_validator("rates")
    @classmethod
    def _rates_ok(cls, v: list[float]) -> list[float]:
        if any(r > HUGE for r in v):
            raise ValueError("above 1e+100, where float times between arrivals stay usable")
        if not any(r > 0 for r in v):
            raise ValueError("all zero: no request would ever arrive")
        return v

    @field_validator("generator")
    @classmethod
    def _generator_ok(cls, v: list[list[float]] | None, info: ValidationInfo
                      ) -> list[list[float]] | None:
        if v is None or "rates" not in info.data:
            return v
        q = _square(v, len(info.data["rates"]))
        off = q - np.diag(np.diag(q))
        if (off < 0).any():
            i, j = np.argwhere(off < 0)[0]
            raise ValueError(f"row {i}, column {j} is negative ({q[i, j]:g}); off-diagonal "
                             "entries are rates >= 0")
        sums = q.sum(axis=1)
        bad = np.flatnonzero(np.abs(sums) > 1e-9 * (np.abs(q).sum(axis=1) + 1e-300))
        if len(bad):
            i = int(bad[0])
            raise ValueError(f"row {i} sums to {sums[i]:g}, not 0 (the diagonal is minus the "
                             "sum of the row's other entries)")
        _irreducible(q)
        return v

    @field_validator("sojourn")
    @classmethod
    def _sojourn_ok(cls, v: list[float] | None, info: ValidationInfo) -> list[float] | None:
        k = len(info.data.get("rates", v or []))
        if v is not None and len(v) != k:
            raise ValueError(f"{len(v)} entries but rates has {k} states")
        for i, x in enumerate(v or []):   # 1 / sojourn is a rate: the same bounds
            if not 1.0 / HUGE <= x <= HUGE:
                raise ValueError(f"sojourn[{i}] is {x:g}, outside [1e-100, 1e+100], where "
                                 "float times between state changes stay usable")
        return v

    @field_validator("jump")
    @classmethod
    def _jump_ok(cls, v: list[list[float]] | None, info: ValidationInfo
                 ) -> list[list[float]] | None:
        if v is None or "rates" not in info.data:
            return v
        p = _square(v, len(info.data["rates"]))
        if np.any(np.diag(p) != 0):
            raise ValueError("the diagonal must be 0 (a jump leaves the state; the time in it "
                             "is sojourn)")
        sums = p.sum(axis=1)
        bad = np.flatnonzero(np.abs(sums - 1) > 1e-6)
        if len(bad):
            raise ValueError(f"row {int(bad[0])} sums to {sums[bad[0]]:.9g}, not 1")
        _irreducible(p)
        return v

    @field_validator("initial")
    @classmethod
    def _initial_ok(cls, v: Any, info: ValidationInfo) -> Any:
        k = len(info.data.get("rates", ()))
        if v != "stationary" and k and v >= k:
            raise ValueError(f"state {v} does not exist (states 0..{k - 1})")
        return v

    @model_validator(mode="after")
    def _validate(self) -> MMPPArrivals:
        if (self.generator is None) == (self.sojourn is None):
            raise ValueError("give exactly one of generator (the chain's transition rates) "
                             "or sojourn (mean time in each state, with optional jump)")
        if self.jump is not None and self.generator is not None:
            raise ValueError("jump: only with sojourn (a generator holds the jumps)")
        k = len(self.rates)
        if self.generator is not None:
            q = np.asarray(self.generator, np.float64)
        else:
            p = ((np.ones((k, k)) - np.eye(k)) / (k - 1) if self.jump is None
                 else np.asarray(self.jump, np.float64))
            leave = 1.0 / np.asarray(self.sojourn, np.float64)
            q = p * leave[:, None]
            q[np.diag_indices(k)] = -leave
        leave = -np.diag(q)
        pi = _stationary(q)
        jumps = q / leave[:, None]
        jumps[np.diag_indices(k)] = 0.0
        cum = [list(np.cumsum(row / row.sum())) for row in jumps]
        self._chain = (np.asarray(self.rates, np.float64), leave, cum, pi)
        return self

    @property
    def stationary(self) -> np.ndarray:
        """π, the stationary law of the phase (πQ = 0, Σπ = 1)."""
        return self._chain[3].copy()

    @property
    def rate(self) -> float:
        """The stationary mean rate Σ πᵢ ratesᵢ: the long-run arrivals per time unit."""
        lam, _, _, pi = self._chain
        return float(pi @ lam)

    def stream(self) -> TimesFn:
        """The run's ``times``, carrying the phase from one batch to the next."""
        return _MMPPStream(self)

    def times(self, rng: np.random.Generator, n: int, start: float = 0.0) -> np.ndarray:
        """``n`` arrivals after ``start`` from a fresh phase (``initial``)."""
        return _MMPPStream(self)(rng, n, start)


class _MMPPStream:
    """One run of an MMPP: the phase at the last arrival, between batches."""

    def __init__(self, process: MMPPArrivals) -> None:
        self.lam, self.leave, self.cum, self.pi = process._chain
        self.phase: int | None = None if process.initial == "stationary" else process.initial
        # transitions per unit of integrated rate, to size the blocks of path drawn
        self.per_unit = float(self.pi @ self.leave) / float(self.pi @ self.lam)

    def __call__(self, rng: np.random.Generator, n: int, start: float = 0.0) -> np.ndarray:
        if n == 0:
            return np.zeros(0)
        if self.phase is None:
            self.phase = int(min(np.searchsorted(np.cumsum(self.pi), rng.random(),
                                                 side="right"), len(self.pi) - 1))
        y = _unit_sums(rng, n)
        target = float(y[-1])
        ends, levels, phases = [start], [0.0], []  # the path: segment ends, Λ there, phase
        s, t, level = self.phase, start, 0.0
        lam, leave, cum, last = self.lam.tolist(), self.leave.tolist(), self.cum, len(self.lam)
        while level < target:
            m = int(min(max((target - level) * self.per_unit * 1.25, 1.0) + 16, 1_000_000))
            sojourn = rng.exponential(1.0, m).tolist()
            u = rng.random(m).tolist()
            for e, v in zip(sojourn, u, strict=True):
                tau = e / leave[s]
                phases.append(s)
                t += tau
                level += lam[s] * tau
                ends.append(t)
                levels.append(level)
                if level >= target:
                    break
                s = min(bisect.bisect_right(cum[s], v), last - 1)
        knots = np.asarray(levels)
        j = np.maximum(np.searchsorted(knots, y, side="left") - 1, 0)
        rate = self.lam[np.asarray(phases)[j]]
        step = np.divide(y - knots[j], rate, out=np.zeros_like(y), where=rate > 0)
        self.phase = phases[int(j[-1])]
        return _ordered(np.asarray(ends)[j] + step, start)
