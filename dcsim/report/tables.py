"""Mean and 95 % interval over seeds per allocator and sweep point (:func:`describe`), and
paired differences against a baseline allocator (:func:`paired`), as DataFrames and as
text grids (plain, Markdown).

**Paired differences.** Every allocator of a seed sees the same requests (common random
numbers), so the difference ``metric(allocator) − metric(baseline)`` is taken seed by seed
at each sweep point, and its mean and Student-t interval are computed over those
differences. Seed-to-seed variation of the workload cancels, so the interval is usually far
narrower than the two separate intervals suggest. Only seeds both ran are paired.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from dcsim.errors import ConfigError
from dcsim.results.stats import mean_ci

#: what each number of a table is
STAT_COLUMNS = ["mean", "half_width", "ci_low", "ci_high", "n"]


def _stats(values: pd.Series) -> dict[str, float]:
    m, h, n = mean_ci(values)
    return {"mean": m, "half_width": h, "ci_low": m - h, "ci_high": m + h, "n": n}


def _groups(summary: pd.DataFrame, params: Sequence[str]):
    keys = [*params, "allocator"]
    return keys, summary.groupby(keys, sort=False, dropna=False, observed=True)


def describe(summary: pd.DataFrame, metric: str, params: Sequence[str]) -> pd.DataFrame:
    """One row per (sweep point, allocator): the metric's mean, 95 % half-width, interval
    and number of seeds."""
    keys, groups = _groups(summary, params)
    rows = [{**dict(zip(keys, k if isinstance(k, tuple) else (k,), strict=True)),
             "metric": metric, **_stats(g[metric])} for k, g in groups]
    return pd.DataFrame(rows, columns=[*keys, "metric", *STAT_COLUMNS])


def paired(summary: pd.DataFrame, metric: str, baseline: str, params: Sequence[str]
           ) -> pd.DataFrame:
    """One row per (sweep point, allocator other than ``baseline``): the mean paired
    difference ``allocator − baseline`` over the seeds both ran, its interval, and
    ``excludes_zero`` (the interval lies wholly above or below 0)."""
    if baseline not in set(summary["allocator"]):
        raise ConfigError(f"--baseline: no allocator {baseline!r}; the allocators are "
                          f"{', '.join(dict.fromkeys(summary['allocator']))}")
    keys = [*params, "seed"]
    base = summary[summary["allocator"] == baseline].set_index(keys)[metric]
    rows = []
    others = summary[summary["allocator"] != baseline]
    for k, g in others.groupby([*params, "allocator"], sort=False, dropna=False,
                               observed=True):
        k = k if isinstance(k, tuple) else (k,)
        mine = g.set_index(keys)[metric]
        both = mine.index.intersection(base.index)
        diff = mine.loc[both] - base.loc[both]
        st = _stats(diff)
        rows.append({**dict(zip([*params, "allocator"], k, strict=True)), "metric": metric,
                     "baseline": baseline, **st,
                     "excludes_zero": bool(st["n"] >= 2 and not math.isnan(st["half_width"])
                                           and (st["ci_low"] > 0 or st["ci_high"] < 0))})
    return pd.DataFrame(rows, columns=[*params, "allocator", "metric", "baseline",
                                       *STAT_COLUMNS, "excludes_zero"])


def _cell(row, digits: int, flag: bool = False) -> str:
    m, h = row["mean"], row["half_width"]
    if not isinstance(m, float | np.floating) or math.isnan(m):
        return "—"
    text = f"{m:.{digits}g}" if abs(m) >= 10 ** digits else f"{m:.{digits}f}"
    if not math.isnan(h):
        text += f" ± {h:.{digits}f}"
    if flag and row.get("excludes_zero"):
        text += " *"
    return text


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
            cells.append(_cell(sel.iloc[0], digits, flag) if len(sel) else "—")
        out.append([*(fmt(k) for k in key), *cells])
    return out


def missing(v) -> bool:
    """Whether a sweep value is absent (None, or NaN as a column reads it back)."""
    return v is None or (isinstance(v, float) and math.isnan(v))


def same(col: pd.Series, v) -> pd.Series:
    """Where ``col`` holds the sweep value ``v`` (an absent value matches absent ones)."""
    return col.isna() if missing(v) else col == v


def fmt(v) -> str:
    """A sweep value as a table or legend shows it (``none`` when absent)."""
    if missing(v):
        return "none"
    return f"{v:g}" if isinstance(v, float) else str(v)


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
