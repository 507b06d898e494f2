"""The report's figures (matplotlib, the ``plot`` extra), each written as PNG and SVG.

A colour-blind-safe palette (Okabe & Ito) with a marker and a line style per series, so
lines stay apart in grey print too; axis labels carry units where the column has one
(:mod:`dcsim.results.schema`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from dcsim.report.tables import fmt, same
from dcsim.results.stats import mean_ci

#: Okabe & Ito's palette, black last
COLOURS = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442",
           "#000000"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]
STYLES = ["-", "--", "-.", ":"]
#: the file stem of the paired-difference figure, the report page's first
PAIRED_STEM = "paired_difference"


def available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 10, "axes.grid": True, "grid.alpha": 0.3,
                         "svg.fonttype": "none", "figure.dpi": 110})
    return plt


def _style(i: int) -> dict:
    return {"color": COLOURS[i % len(COLOURS)], "marker": MARKERS[i % len(MARKERS)],
            "linestyle": STYLES[i % len(STYLES)]}


def _save(fig, out: Path, stem: str) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for ext in ("png", "svg"):
        p = out / f"{stem}.{ext}"
        fig.savefig(p, bbox_inches="tight")
        paths.append(p)
    _plt().close(fig)
    return paths


def _numeric(values: Sequence) -> bool:
    return all(isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool)
               and not (isinstance(v, float) and math.isnan(v)) for v in values)


def metric_figure(stats: pd.DataFrame, metric: str, label: str, by: str | None,
                  params: Sequence[str], out: Path, *, stem: str | None = None,
                  title: str | None = None, xlabel: str | None = None,
                  allocators: Sequence[str] = ()) -> list[Path]:
    """The metric's mean and 95 % interval (``ci_low``–``ci_high``, as
    :func:`dcsim.report.describe` gives them: clipped to the metric's range) against the
    swept parameter ``by``: a line per allocator with its interval as a band, or points with
    their intervals side by side when ``by`` is not numeric; without a sweep a point and its
    interval per allocator, one row each. The axis is not forced to start at 0, so
    differences of a point or two stay visible. Written as ``out/<stem>.png`` and ``.svg``
    (default stem ``metric_<metric>``). An allocator of ``allocators`` (the plan's) keeps
    its colour in every figure."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, _height(stats, by, params)))
    _intervals(ax, stats, by, params, label, xlabel, allocators=allocators)
    ax.set_title(title or f"{label}: mean and 95 % interval over seeds", fontsize=10)
    return _save(fig, out, stem or f"metric_{metric}")


def paired_figure(paired: dict[str, pd.DataFrame], labels: dict[str, str], baseline: str,
                  by: str | None, params: Sequence[str], out: Path, *,
                  stem: str = PAIRED_STEM, allocators: Sequence[str] = ()) -> list[Path]:
    """The paired difference ``allocator − baseline`` of each metric (a panel each, as
    :func:`dcsim.report.paired` gives them): its mean and 95 % interval over seeds, drawn
    as :func:`metric_figure` draws a metric, with a line at 0. A filled marker is a
    difference whose interval excludes 0."""
    plt = _plt()
    first = next(iter(paired.values()))
    n = len(paired)
    fig, axes = plt.subplots(1, n, figsize=(3.6 * n + (0.8 if by is None else 1.6),
                                            _height(first, by, params)),
                             squeeze=False, sharey=by is None, layout="constrained")
    for k, (ax, (m, df)) in enumerate(zip(axes.flat, paired.items(), strict=True)):
        _intervals(ax, df, by, params, f"allocator − {baseline}", None, zero=True,
                   legend=k == n - 1, names=k == 0 or by is not None, allocators=allocators)
        ax.set_title(labels[m], fontsize=10)
    fig.suptitle(f"paired difference against {baseline}: mean and 95 % interval over seeds "
                 "(filled: the interval excludes 0)", fontsize=10)
    return _save(fig, out, stem)


def _height(stats: pd.DataFrame, by: str | None, params: Sequence[str]) -> float:
    """A figure's height: without a sweep, a row per series."""
    if by is not None:
        return 4.0
    rest = [p for p in params if p != by]
    series = stats.groupby([*rest, "allocator"], sort=False, dropna=False,
                           observed=True).ngroups
    return max(2.2, 0.9 + 0.32 * series)


def _intervals(ax, stats: pd.DataFrame, by: str | None, params: Sequence[str], label: str,
               xlabel: str | None, *, zero: bool = False, legend: bool = True,
               names: bool = True, allocators: Sequence[str] = ()) -> None:
    """Draw each series' mean and interval (``ci_low``–``ci_high``) on ``ax``: against
    ``by`` (lines and bands when numeric, points side by side otherwise), or one row per
    series without it; ``zero``: a line at 0. A series is styled by its allocator's place
    in ``allocators`` when each allocator is one series."""
    rest = [p for p in params if p != by]
    series = list(stats.groupby([*rest, "allocator"], sort=False, dropna=False,
                                observed=True))
    place = {a: i for i, a in enumerate(allocators)}

    def style(i: int, key) -> dict:
        alloc = key[-1] if isinstance(key, tuple) else key
        return _style(place[alloc] if not rest and alloc in place else i)

    filled = "excludes_zero" in stats.columns
    xs = list(dict.fromkeys(stats[by])) if by else []
    if by is None:
        y = np.arange(len(series))[::-1]   # the first series on top
        for i, (key, g) in enumerate(series):
            st = style(i, key)
            r = g.iloc[0]
            m, lo, hi = _err(r)
            face = st["color"] if not filled or r["excludes_zero"] else "white"
            ax.errorbar([m], [y[i]], xerr=[[lo], [hi]], fmt=st["marker"], color=st["color"],
                        mfc=face, ms=7, capsize=4, elinewidth=1.6)
        if names:  # panels sharing the axis show the first panel's names
            ax.set_yticks(y, [_name(k, rest) for k, _ in series])
        ax.set_ylim(-0.7, len(series) - 0.3)
        ax.locator_params(axis="x", nbins=5)   # narrow panels: labels apart
        ax.set_xlabel(label)
        ax.grid(axis="y", visible=False)
        if zero:
            ax.axvline(0, color="black", linewidth=0.9)
        return
    if _numeric(xs):
        for i, (key, g) in enumerate(series):
            g = g.sort_values(by)
            st = style(i, key)
            x, m = g[by].to_numpy(float), g["mean"].to_numpy(float)
            ax.plot(x, m, label=_name(key, rest), **st, mfc="white" if filled else None)
            if filled:  # a difference whose interval excludes 0: a filled marker
                sig = g["excludes_zero"].to_numpy(bool)
                ax.scatter(x[sig], m[sig], marker=st["marker"], color=st["color"], zorder=3)
            lo, hi = g["ci_low"].to_numpy(float), g["ci_high"].to_numpy(float)
            ok = ~(np.isnan(lo) | np.isnan(hi))
            ax.fill_between(x[ok], lo[ok], hi[ok], color=st["color"], alpha=0.15,
                            linewidth=0)
    else:
        width = 0.7 / max(len(series), 1)
        for i, (key, g) in enumerate(series):
            st = style(i, key)
            pos, means, lows, highs, face = [], [], [], [], []
            for j, x in enumerate(xs):
                sel = g[same(g[by], x)]
                if not len(sel):
                    continue
                m, lo, hi = _err(sel.iloc[0])
                pos.append(j + (i - (len(series) - 1) / 2) * width)
                means.append(m)
                lows.append(lo)
                highs.append(hi)
                face.append(not filled or bool(sel.iloc[0]["excludes_zero"]))
            ax.errorbar(pos, means, yerr=[lows, highs], fmt="none", ecolor=st["color"],
                        capsize=3, elinewidth=1.4)
            ax.scatter(pos, means, marker=st["marker"], s=36, zorder=3,
                       color=[st["color"] if f else "white" for f in face],
                       edgecolors=st["color"], label=_name(key, rest))
        ax.set_xticks(np.arange(len(xs)), [fmt(x) for x in xs], rotation=20)
    ax.set_xlabel(xlabel or by)
    ax.set_ylabel(label)
    if zero:
        ax.axhline(0, color="black", linewidth=0.9)
    if legend:
        _legend(ax)


def _err(row) -> tuple[float, float, float]:
    """(mean, length of the bar below it, above it) from a row's ``ci_low``–``ci_high``
    (no bar without an interval)."""
    m = float(row["mean"])
    lo, hi = float(row["ci_low"]), float(row["ci_high"])
    return m, (0.0 if math.isnan(lo) else max(m - lo, 0.0)), \
        (0.0 if math.isnan(hi) else max(hi - m, 0.0))


def cdf_figure(items: pd.DataFrame, column: str, label: str, out: Path,
               where: str) -> list[Path]:
    """The empirical CDF of a per-request (job, VM) column, one line per allocator, all
    seeds pooled."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for i, (alloc, g) in enumerate(items.groupby("allocator", sort=False)):
        v = np.sort(g[column].dropna().to_numpy(float))
        if not v.size:
            continue
        st = _style(i)
        ax.step(v, np.arange(1, v.size + 1) / v.size, where="post", label=str(alloc),
                color=st["color"], linestyle=st["linestyle"])
    ax.set_xlabel(label)
    ax.set_ylabel("fraction ≤ x")
    ax.set_ylim(0, 1.01)
    _legend(ax)
    ax.set_title(f"distribution of {column} {where}", fontsize=10)
    return _save(fig, out, f"cdf_{column}")


def timeseries_figure(ts: pd.DataFrame, column: str, label: str, out: Path, where: str,
                      bins: int = 50, bounds: tuple[float, float] | None = None,
                      x: str = "time", xlabel: str = "simulated time") -> list[Path]:
    """A time-series column over simulated time (or over another column ``x``, e.g. the
    gpu mode's arrived percent): per allocator, each seed's samples averaged in equal bins
    of ``x`` (at most ``bins``, and no more than a run has samples, so each bin holds a
    sample of most seeds), then the mean over seeds with its 95 % band, clipped to
    ``bounds`` (the column's range)."""
    plt = _plt()
    per_run = ts.groupby(["allocator", "seed"], sort=False).size()
    bins = max(2, min(bins, int(per_run.median()) if len(per_run) else bins))
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    t = ts[x].to_numpy(float)
    edges = np.linspace(np.nanmin(t), np.nanmax(t), bins + 1) if t.size else np.zeros(2)
    if edges[-1] <= edges[0]:
        edges = np.array([edges[0], edges[0] + 1.0])
    mids = (edges[:-1] + edges[1:]) / 2
    for i, (alloc, g) in enumerate(ts.groupby("allocator", sort=False)):
        b = np.clip(np.searchsorted(edges, g[x].to_numpy(float), side="right") - 1,
                    0, len(mids) - 1)
        per = g.assign(_bin=b).groupby(["seed", "_bin"])[column].mean().unstack("_bin")
        stats = [mean_ci(per[c]) if c in per.columns else (np.nan, np.nan, 0)
                 for c in range(len(mids))]
        m = np.array([s[0] for s in stats])
        h = np.array([s[1] for s in stats])
        st = _style(i)
        ok = ~np.isnan(m)
        ax.plot(mids[ok], m[ok], label=str(alloc), color=st["color"],
                linestyle=st["linestyle"])
        band = ok & ~np.isnan(h)
        lo, hi = m - h, m + h
        if bounds is not None:
            lo, hi = np.clip(lo, *bounds), np.clip(hi, *bounds)
        ax.fill_between(mids[band], lo[band], hi[band], color=st["color"], alpha=0.15,
                        linewidth=0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(label)
    _legend(ax)
    over = "over time" if x == "time" else f"against {x}"
    ax.set_title(f"{column} {over} {where} (mean over seeds, 95 % band)", fontsize=10)
    return _save(fig, out, f"timeseries_{column}")


def heatmap_figure(items: pd.DataFrame, x: str, y: str, out: Path, where: str,
                   bins: int = 6) -> list[Path]:
    """Acceptance by request size: the accepted share in bins of ``x`` (columns) and
    ``y`` (rows), one panel per allocator (AHAB's Fig. 4/5)."""
    plt = _plt()
    allocs = list(dict.fromkeys(items["allocator"]))[:8]
    xe, ye = _edges(items[x], bins), _edges(items[y], bins)
    ncol = min(len(allocs), 4)
    nrow = math.ceil(len(allocs) / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(3.4 * ncol, 3.2 * nrow), squeeze=False,
                             layout="constrained")
    im = None
    for ax, alloc in zip(axes.flat, allocs, strict=False):
        g = items[items["allocator"] == alloc]
        xi = np.clip(np.searchsorted(xe, g[x].to_numpy(float), side="right") - 1, 0,
                     len(xe) - 2)
        yi = np.clip(np.searchsorted(ye, g[y].to_numpy(float), side="right") - 1, 0,
                     len(ye) - 2)
        acc = np.full((len(ye) - 1, len(xe) - 1), np.nan)
        frame = pd.DataFrame({"x": xi, "y": yi, "a": g["accepted"].to_numpy(float)})
        for (yy, xx), v in frame.groupby(["y", "x"])["a"].mean().items():
            acc[yy, xx] = v
        im = ax.imshow(acc, origin="lower", vmin=0, vmax=1, cmap="viridis", aspect="auto")
        ax.set_title(str(alloc), fontsize=9)
        ax.set_xticks(range(len(xe) - 1), [_span(xe, k) for k in range(len(xe) - 1)],
                      rotation=45, fontsize=7)
        ax.set_yticks(range(len(ye) - 1), [_span(ye, k) for k in range(len(ye) - 1)],
                      fontsize=7)
        ax.set_xlabel(x)
        ax.set_ylabel(y)
        ax.grid(False)
    for ax in list(axes.flat)[len(allocs):]:
        ax.axis("off")
    if im is not None:
        fig.colorbar(im, ax=axes, shrink=0.8, label="accepted share")
    fig.suptitle(f"acceptance by {x} and {y} {where}", fontsize=10)
    return _save(fig, out, f"heatmap_{x}_{y}")


def _legend(ax) -> None:
    """The legend beside the plot, where it hides nothing."""
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)


def _edges(col: pd.Series, bins: int) -> np.ndarray:
    v = col.dropna().to_numpy(float)
    if not v.size:
        return np.array([0.0, 1.0])
    u = np.unique(v)
    if u.size <= bins:  # one bin per value
        mids = (u[:-1] + u[1:]) / 2
        return np.concatenate([[u[0] - 0.5], mids, [u[-1] + 0.5]])
    e = np.unique(np.quantile(v, np.linspace(0, 1, bins + 1)))
    e[-1] = np.nextafter(e[-1], np.inf)
    return e


def _span(e: np.ndarray, k: int) -> str:
    return f"{e[k]:.3g}–{e[k + 1]:.3g}"


def _name(key, rest: Sequence[str]) -> str:
    key = key if isinstance(key, tuple) else (key,)
    extra = [f"{p}={fmt(v)}" for p, v in zip(rest, key[:-1], strict=True)]
    return ", ".join([str(key[-1]), *extra])
