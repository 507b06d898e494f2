"""Mean and 95 % interval over seeds per allocator and sweep point (:func:`describe`), and
paired differences against a baseline allocator (:func:`paired`), as DataFrames and as
text grids (plain, Markdown).

**Paired differences.** Every allocator of a seed sees the same requests (common random
numbers), so the difference ``metric(allocator) − metric(baseline)`` is taken seed by seed
at each sweep point, and its mean and Student-t interval are computed over those
differences. Seed-to-seed variation of the workload cancels, so the interval is usually far
narrower than the two separate intervals suggest. Only seeds both ran are paired.

**Significance.** ``excludes_zero`` says the 95 % interval excludes 0, the same as the
two-sided t-test's ``p_value`` below 0.05. With several allocators against one baseline
that is several tests at once; ``correction="holm"`` (or ``"bonferroni"``) adjusts the
p-values over the family of one metric at one sweep point (the allocators' differences
against the baseline there, those with an interval) and ``significant`` is then the
adjusted ``p_adjusted`` below 0.05 (without a correction, ``significant`` is
``excludes_zero``). The tables' ``*`` and the figure's filled markers show ``significant``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from dcsim.errors import ConfigError
from dcsim.report.numbers import ALPHA, CORRECTIONS, adjust, cell, p_values
from dcsim.results.schema import param_text
from dcsim.results.stats import (
    STAT_COLUMNS,
    difference_range,
    interval_stats,
    metric_range,
)

_AUTO = "auto"


def _bounds(metric: str, bounds):
    return metric_range(metric) if bounds == _AUTO else bounds


def describe(summary: pd.DataFrame, metric: str, params: Sequence[str],
             bounds: tuple[float, float] | None | str = _AUTO) -> pd.DataFrame:
    """One row per (sweep point, allocator): the metric's mean, 95 % half-width, interval
    (clipped to ``bounds``, by default the metric's declared range, e.g. [0, 1] for a
    ratio), number of seeds, ``identical`` (the same value in every seed) and ``clipped``."""
    keys = [*params, "allocator"]
    out = interval_stats(summary, keys, metric, _bounds(metric, bounds))
    out.insert(len(keys), "metric", metric)
    return out[[*keys, "metric", *STAT_COLUMNS]]


#: the columns :func:`paired` adds to :data:`~dcsim.results.stats.STAT_COLUMNS`
TEST_COLUMNS = ["excludes_zero", "p_value", "p_adjusted", "significant"]


def paired(summary: pd.DataFrame, metric: str, baseline: str, params: Sequence[str],
           bounds: tuple[float, float] | None | str = _AUTO,
           correction: str = "none") -> pd.DataFrame:
    """One row per (sweep point, allocator other than ``baseline``): the mean paired
    difference ``allocator − baseline`` over the seeds both ran, its interval (clipped to
    the range of a difference of values in ``bounds``: [−1, 1] for a ratio), ``identical``
    (the same difference in every seed: no interval, and never significant),
    ``excludes_zero`` (an interval wholly above or below 0), ``p_value`` (the two-sided
    t-test of the differences' mean 0; NaN without an interval), ``p_adjusted`` (adjusted by
    ``correction`` over the sweep point's allocators: :func:`mark`) and ``significant``."""
    if correction not in CORRECTIONS:
        raise ConfigError(f"--correction: no correction {correction!r}; the corrections "
                          f"are {', '.join(CORRECTIONS)}")
    if baseline not in set(summary["allocator"]):
        raise ConfigError(f"--baseline: no allocator {baseline!r}; the allocators are "
                          f"{', '.join(dict.fromkeys(summary['allocator']))}")
    keys = [*params, "seed"]
    base = summary.loc[summary["allocator"] == baseline, [*keys, metric]]
    others = summary.loc[summary["allocator"] != baseline, [*params, "allocator", "seed",
                                                           metric]]
    both = others.merge(base, on=keys, how="left", suffixes=("", "_baseline"))
    both["_diff"] = both[metric] - both[f"{metric}_baseline"]
    group = [*params, "allocator"]
    out = interval_stats(both, group, "_diff", difference_range(_bounds(metric, bounds)))
    out.insert(len(group), "metric", metric)
    out.insert(len(group) + 1, "baseline", baseline)
    out["excludes_zero"] = ((out["n"] >= 2) & ~out["identical"] & out["half_width"].notna()
                            & ((out["ci_low"] > 0) | (out["ci_high"] < 0)))
    out["p_value"] = p_values(out["mean"], out["half_width"], out["n"], out["identical"])
    out = mark(out, params, correction)
    return out[[*group, "metric", "baseline", *STAT_COLUMNS, *TEST_COLUMNS]]


def mark(df: pd.DataFrame, params: Sequence[str], correction: str = "none") -> pd.DataFrame:
    """``df`` (rows of :func:`paired`) with ``p_adjusted``, its ``p_value`` adjusted by
    ``correction`` within each family, one per sweep point (the rows that share the values
    of ``params``), and ``significant``: ``p_adjusted`` below 0.05 (``excludes_zero`` with
    no correction: the interval and the test agree)."""
    df = df.copy()
    adjusted = np.full(len(df), np.nan)
    keys = list(params)
    groups = (df.groupby(keys, sort=False, dropna=False, observed=True).indices.values()
              if keys else [np.arange(len(df))])
    p = df["p_value"].to_numpy(float)
    for rows in groups:
        adjusted[rows] = adjust(p[rows], correction)
    df["p_adjusted"] = adjusted
    if correction == "none":
        df["significant"] = df["excludes_zero"].astype(bool)
    else:
        df["significant"] = np.nan_to_num(adjusted, nan=1.0) < ALPHA
    return df


def counts(df: pd.DataFrame) -> list[tuple[str, int, int, int, int, int]]:
    """Per allocator of ``df`` (rows of :func:`paired`), in order: (allocator, cells with a
    test, above zero and below zero by the interval alone, above and below after the
    correction: ``significant``)."""
    out = []
    for alloc, g in df.groupby("allocator", sort=False):
        tested = g["p_value"].notna()
        up, down = g["mean"] > 0, g["mean"] < 0
        raw, sig = g["excludes_zero"].astype(bool), g["significant"].astype(bool)
        out.append((str(alloc), int(tested.sum()), int((raw & up).sum()),
                    int((raw & down).sum()), int((sig & up).sum()), int((sig & down).sum())))
    return out


def row_params(summary: pd.DataFrame, params: Sequence[str], by: str | None) -> list[str]:
    """The sweep parameters that key a table's rows: those other than ``by``, less the ones
    the others determine (a matrix entry that sets several keys together, such as Nara's
    topology with its episode length, varies them as one: only the first keys the rows)."""
    rest = [p for p in params if p != by]
    for q in reversed(list(rest)):
        others = [p for p in ([by] if by else []) + rest if p != q]
        if not others:
            continue
        n = summary.groupby(others, dropna=False, sort=False, observed=True)[q].nunique(
            dropna=False)
        if len(n) and n.max() <= 1:
            rest.remove(q)
    return rest


def grid(stats: pd.DataFrame, params: Sequence[str], by: str | None, digits: int = 3,
         flag: bool = False, rows: Sequence[str] | None = None) -> list[list[str]]:
    """A table of text cells: a row per allocator (and values of the sweep parameters
    ``rows``, by default those other than ``by``), a column per value of ``by`` (one column
    without it)."""
    rest = list(rows) if rows is not None else [p for p in params if p != by]
    head = [*rest, "allocator"]
    if by is not None:
        cols = list(dict.fromkeys(stats[by]))
        out = [head + [f"{by}={fmt(v)}" for v in cols]]
    else:
        cols = [None]
        out = [head + ["mean ± 95 % interval"]]
    for key, g in stats.groupby([*rest, "allocator"], sort=False, dropna=False,
                                observed=True):
        key = key if isinstance(key, tuple) else (key,)
        cells = []
        for c in cols:
            sel = g if c is None else g[same(g[by], c)]
            cells.append(cell(sel.iloc[0], digits, flag) if len(sel) else "—")
        out.append([*(fmt(k) for k in key), *cells])
    return out


def missing(v) -> bool:
    """Whether a sweep value is absent (None, or NaN as a column reads it back)."""
    return v is None or (isinstance(v, float) and math.isnan(v))


def same(col: pd.Series, v) -> pd.Series:
    """Where ``col`` holds the sweep value ``v`` (an absent value matches absent ones)."""
    return col.isna() if missing(v) else col == v


def fmt(v) -> str:
    """A sweep value as a table or legend shows it (``none`` when absent), as every table
    dcsim prints spells it (:func:`dcsim.results.schema.param_text`)."""
    return param_text(v)


def in_order(df: pd.DataFrame, labels: Sequence[str]) -> pd.DataFrame:
    """``df``'s rows with the allocators in the order of ``labels`` (others after them),
    each allocator's rows in their own order: groupby(sort=False) then follows it."""
    rank = {a: i for i, a in enumerate(labels)}
    return df.iloc[df["allocator"].map(rank).fillna(len(rank)).to_numpy().argsort(
        kind="stable")]


def plain(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                       for i, (c, w) in enumerate(zip(r, widths, strict=True))).rstrip()
             for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def markdown(rows: list[list[str]]) -> str:
    def esc(c: str) -> str:
        return c.replace("|", "\\|")
    lines = ["| " + " | ".join(esc(c) for c in rows[0]) + " |",
             "|" + "|".join("---" for _ in rows[0]) + "|"]
    lines += ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows[1:]]
    return "\n".join(lines)
