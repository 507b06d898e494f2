"""Summaries over seeds for reports: the mean and its 95 % Student-t interval, said honestly.

Used by the headline table a finished ``dcsim run`` prints (:func:`headline`) and by
``dcsim report`` (:mod:`dcsim.report.tables`):

- values that are the same in every seed have no interval to give: their cell says
  ``identical in every seed`` (:data:`IDENTICAL`), and a paired difference that is the same
  in every seed gets no significance star;
- an interval is clipped to the metric's range (a ratio to [0, 1]: the ``range`` of its
  declaration in :mod:`dcsim.results.schema`); a cell whose printed interval would reach
  outside it gives the clipped interval as ``[low, high]`` marked ``†`` (:data:`CLIP_MARK`);
- :func:`seed_notes` says once, not per cell, when the intervals come from fewer than 3
  seeds, and when the seeds replicate nothing at all (every allocator gave the same summary
  row in every seed: a replayed trace and deterministic allocators).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from dcsim.results.cells import CLIP_MARK, IDENTICAL, cell, number  # noqa: F401  (re-exported)
from dcsim.results.schema import SUMMARY_TAIL, TABLES, Col, param_text

#: the columns a table of intervals has, per group
STAT_COLUMNS = ["mean", "half_width", "ci_low", "ci_high", "n", "identical", "clipped"]


#: the metrics a finished `dcsim run` shows first, in this order, when its summary has them
HEADLINE = ("acceptance_ratio", "util_cpu", "util_mem", "mean_footprint", "mean_slowdown",
            "fr_after", "mean_fragment_rate", "migrations", "energy_j", "carbon_g",
            "alloc_gpu_share", "frag_gpus", "unalloc_gpus")


# ------------------------------------------------------------------------------ declarations
def column(name: str, mode: str | None = None, table: str = "summary") -> Col | None:
    """The declaration of a column of ``table`` (a family such as ``util_<resource>``
    matches its expanded names), in ``mode`` or, without one, in the first mode that has
    it."""
    modes = [mode] if mode is not None else list(TABLES)
    for m in modes:
        t = TABLES.get(m, {}).get(table)
        cols = t.columns if t else ()
        for c in cols:  # a column's own name first
            if c.name == name:
                return c
        for c in cols:  # then a family with a fixed part (util_<resource>, not <resource>)
            if c.expands_to(name):
                return c
    return None


def metric_range(name: str, mode: str | None = None, table: str = "summary"
                 ) -> tuple[float, float] | None:
    """The values a column can take, ``(low, high)`` (a ratio: (0, 1)); None when its
    declaration gives none."""
    c = column(name, mode, table)
    r = c.range if c is not None else None
    return (float(r[0]), float(r[1])) if r is not None else None


def difference_range(bounds: tuple[float, float] | None) -> tuple[float, float] | None:
    """The range of a difference of two values in ``bounds``: [low − high, high − low]."""
    return None if bounds is None else (bounds[0] - bounds[1], bounds[1] - bounds[0])


# ------------------------------------------------------------------------------ intervals
def interval_stats(frame: pd.DataFrame, keys: Sequence[str], value: str,
                   bounds: tuple[float, float] | None = None, level: float = 0.95
                   ) -> pd.DataFrame:
    """One row per group of ``keys`` (in order of appearance): the mean of ``value`` over
    its non-missing values, the half-width of the Student-t interval (NaN with fewer than
    two values; 0 when they are all equal), the interval ``ci_low``–``ci_high`` clipped to
    ``bounds``, ``n``, ``identical`` (at least two values, all equal) and ``clipped`` (the
    interval reached outside ``bounds``)."""
    keys = list(keys)
    g = frame.groupby(keys, sort=False, dropna=False, observed=True)[value]
    # the aggregates under names no key can have (a swept key may be called "n" or "sd")
    agg = g.agg(**{" mean": "mean", " sd": "std", " n": "count", " lo": "min", " hi": "max"})
    out = agg.reset_index(drop=True)
    groups = agg.index.to_frame(index=False)
    n = out[" n"].to_numpy(dtype=np.int64)
    mean = out[" mean"].to_numpy(dtype=np.float64)
    identical = (n >= 2) & ((out[" hi"] - out[" lo"]).to_numpy(dtype=np.float64)
                            <= 1e-12 * np.maximum(1.0, np.abs(mean)))
    t = stats.t.ppf(0.5 + level / 2, np.maximum(n - 1, 1))
    half = np.where(n >= 2, t * out[" sd"].to_numpy(dtype=np.float64)
                    / np.sqrt(np.maximum(n, 1)), np.nan)
    half = np.where(identical, 0.0, half)
    low, high = mean - half, mean + half
    clipped = np.zeros(len(out), dtype=bool)
    if bounds is not None:
        clipped = (low < bounds[0]) | (high > bounds[1])
        low, high = np.clip(low, *bounds), np.clip(high, *bounds)
    stat = pd.DataFrame({"mean": mean, "half_width": half, "ci_low": low, "ci_high": high,
                         "n": n, "identical": identical, "clipped": clipped})
    return pd.concat([groups[keys], stat], axis=1)


def mean_ci(values: pd.Series, level: float = 0.95) -> tuple[float, float, int]:
    """(mean, half-width of the Student-t interval, n) over the non-missing values.

    The half-width is NaN with fewer than two values; the mean is NaN with none.
    """
    v = pd.Series(values).dropna().to_numpy(dtype=np.float64)
    if len(v) < 2:
        return (float(v.mean()) if len(v) else np.nan), np.nan, len(v)
    half = stats.t.ppf(0.5 + level / 2, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v))
    return float(v.mean()), float(half), len(v)


def ci_cell(values, digits: int = 2) -> str:
    """A table cell: ``mean ± half-width`` of the 95 % interval, the mean alone with one
    value, ``—`` with none."""
    m, h, n = mean_ci(pd.Series(values))
    if n == 0:
        return "—"
    return f"{m:.{digits}f}" if np.isnan(h) else f"{m:.{digits}f} ± {h:.{digits}f}"


def clip_note(bounds: tuple[float, float] | None, of: str = "the metric's") -> str:
    """The footnote of a table with a clipped cell."""
    lo, hi = bounds if bounds is not None else (0.0, 1.0)
    return (f"{CLIP_MARK} interval clipped to {of} range [{lo:g}, {hi:g}]; the cell gives "
            "it as [low, high]")


# ------------------------------------------------------------------------------ notes
def replays_trace(config: Mapping[str, Any] | None) -> bool:
    """Whether the resolved experiment (``experiment.yaml``) replays a trace as it is (a
    ``trace:`` workload without ``resample``): every seed then sees the same requests."""
    config = config or {}
    workload = config.get("workload") or (config.get("vm") or {}).get("workload")
    trace = workload.get("trace") if isinstance(workload, Mapping) else None
    return isinstance(trace, Mapping) and not trace.get("resample", False)


def replicates_nothing(summary: pd.DataFrame, keys: Sequence[str],
                       mode: str | None = None) -> bool:
    """Whether the seeds are copies of one run: at least two seeds, and every group of
    ``keys`` (allocator and sweep point) has the same summary row in every seed (wall-clock
    times aside)."""
    keys = [k for k in keys if k in summary.columns]
    if not len(summary) or "seed" not in summary.columns or not keys:
        return False
    groups = summary.groupby(keys, sort=False, dropna=False, observed=True)
    if groups["seed"].nunique().max() < 2:
        return False
    skip = {*keys, "seed", *SUMMARY_TAIL}
    cols = [c for c in summary.select_dtypes(include=["number", "bool"]).columns
            if c not in skip and not _wall_clock(c, mode)]
    return bool(cols) and bool(groups[cols].nunique(dropna=False).le(1).to_numpy().all())


def _wall_clock(name: str, mode: str | None) -> bool:
    c = column(name, mode)
    return c is not None and c.unit == "wall-clock s"


def few_seeds_note(n_min: int, n_max: int) -> str | None:
    """The note of a table whose cells have between ``n_min`` and ``n_max`` seeds; None
    from 3 seeds on."""
    if n_min >= 3 or n_max < 1:
        return None
    seeds = f"{n_min} seed{'s' if n_min != 1 else ''}"
    have = f"these come from {seeds}" if n_min == n_max else f"some of these come from {seeds}"
    why = (f" (over 2 values the 95 % interval is ±{stats.t.ppf(0.975, 1):.1f} standard "
           "errors)" if n_min == 2 else " (1 seed gives no interval at all)")
    return (f"Intervals from fewer than 3 seeds are not informative, and {have}{why}: run "
            "3 or more (--seeds) before reading them.")


#: the note of one seed of a replayed trace (whether more would differ is not known)
ONE_SEED_TRACE = ("One seed, so no interval: the workload replays a trace as it is (no "
                  "resample), so more seeds would differ only through a randomised allocator.")


def replay_note(seeds: int, trace: bool) -> str:
    """The note of results whose seeds replicate nothing."""
    why = ("the workload replays a trace as it is (no resample) and every allocator gave "
           if trace else "every allocator gave ")
    return (f"Seeds do not replicate anything here: {why}the same summary row in every "
            f"seed, so the {seeds} seeds are {seeds} copies of one run and there is no "
            "interval to give; one seed is enough.")


def seed_notes(summary: pd.DataFrame, keys: Sequence[str], mode: str | None = None,
               config: Mapping[str, Any] | None = None) -> list[str]:
    """What to say once about the seeds of ``summary`` grouped by ``keys`` (allocator and
    sweep point): that they replicate nothing, or that fewer than 3 make no interval worth
    reading."""
    keys = [k for k in keys if k in summary.columns]
    if not len(summary) or "seed" not in summary.columns or not keys:
        return []
    trace = replays_trace(config)
    if replicates_nothing(summary, keys, mode):
        return [replay_note(int(summary["seed"].nunique()), trace)]
    n = summary.groupby(keys, sort=False, dropna=False, observed=True)["seed"].nunique()
    if trace and n.max() == 1:
        return [ONE_SEED_TRACE]
    note = few_seeds_note(int(n.min()), int(n.max()))
    return [note] if note else []


# ------------------------------------------------------------------------------ headline
def headline(summary: pd.DataFrame, by: list[str], limit: int = 4, mode: str | None = None,
             config: Mapping[str, Any] | None = None) -> tuple[str, list[str]]:
    """A plain-text table of ``summary`` and its notes: one row per combination of ``by``
    (the allocator and the swept parameters, in their order of appearance), the mean ± 95 %
    interval over seeds of up to ``limit`` headline metrics (:func:`cell`), and the seed
    count; the notes are the clipping footnote when a cell has one, then
    :func:`seed_notes`."""
    metrics = [m for m in HEADLINE if m in summary.columns
               and pd.api.types.is_numeric_dtype(summary[m])
               and (summary[m].fillna(0) != 0).any()][:limit]  # nothing to say: left out
    by = [b for b in by if b in summary.columns]
    if not metrics or not by:
        return "", []
    columns = [interval_stats(summary, by, m, metric_range(m, mode)) for m in metrics]
    seeds = summary.groupby(by, sort=False, dropna=False, observed=True).size()
    rows = [[*by, *metrics, "seeds"]]
    for i in range(len(columns[0])):
        key = columns[0].iloc[i][by]
        rows.append([*(param_text(k) for k in key), *(cell(c.iloc[i]) for c in columns),
                     str(seeds.iloc[i])])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i < len(by) else c.rjust(w)
                       for i, (c, w) in enumerate(zip(r, widths, strict=True))).rstrip()
             for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    ranges = dict.fromkeys(metric_range(m, mode) for j, m in enumerate(metrics)
                           if any(CLIP_MARK in r[len(by) + j] for r in rows[1:]))
    notes = [clip_note(b) for b in ranges]
    return "\n".join(lines), notes + seed_notes(summary, by, mode, config)
