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


#: what a filled and a hollow marker of the paired figure say, per correction
FILL_KEY = {"none": ("filled: the 95 % interval excludes 0", "hollow: it includes 0"),
            "holm": ("filled: significant after Holm's correction (5 %)",
                     "hollow: not significant after it"),
            "bonferroni": ("filled: significant after Bonferroni's correction (5 %)",
                           "hollow: not significant after it")}
#: the grey of the fill key's markers (no allocator's colour)
KEY_GREY = "0.35"


def fill_key(correction: str = "none") -> list:
    """The legend entries saying what a filled and a hollow marker mean (grey circles)."""
    from matplotlib.lines import Line2D

    filled, hollow = FILL_KEY[correction]
    return [Line2D([], [], linestyle="none", marker="o", ms=7, color=KEY_GREY,
                   mfc=KEY_GREY, label=filled),
            Line2D([], [], linestyle="none", marker="o", ms=7, color=KEY_GREY, mfc="white",
                   label=hollow)]


def paired_figure(paired: dict[str, pd.DataFrame], labels: dict[str, str], baseline: str,
                  by: str | None, params: Sequence[str], out: Path, *,
                  stem: str = PAIRED_STEM, allocators: Sequence[str] = (),
                  correction: str = "none") -> list[Path]:
    """The paired difference ``allocator − baseline`` of each metric (a panel each, as
    :func:`dcsim.report.paired` gives them): its mean and 95 % interval over seeds, drawn
    as :func:`metric_figure` draws a metric, with a line at 0. A filled marker is a
    difference that is significant (its interval excludes 0, or after ``correction``);
    a legend under the panels says so (:func:`fill_key`), and the allocators' entries show
    their marker half filled, neither of the two."""
    plt = _plt()
    first = next(iter(paired.values()))
    n = len(paired)
    fig, axes = plt.subplots(1, n, figsize=(3.6 * n + (0.8 if by is None else 1.6),
                                            _height(first, by, params) + 0.4),
                             squeeze=False, sharey=by is None, layout="constrained")
    for k, (ax, (m, df)) in enumerate(zip(axes.flat, paired.items(), strict=True)):
        _intervals(ax, df, by, params, f"allocator − {baseline}", None, zero=True,
                   legend=k == n - 1, names=k == 0 or by is not None, allocators=allocators)
        ax.set_title(labels[m], fontsize=10)
    fig.legend(handles=fill_key(correction), loc="outside lower center", ncol=2,
               fontsize=8, frameon=False)
    fig.suptitle(f"paired difference against {baseline}: mean and 95 % interval over seeds",
                 fontsize=10)
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
    sig = "significant" if "significant" in stats.columns else "excludes_zero"
    xs = list(dict.fromkeys(stats[by])) if by else []
    entries = []   # (label, style) per series, for a legend of neutral markers
    if by is None:
        y = np.arange(len(series))[::-1]   # the first series on top
        for i, (key, g) in enumerate(series):
            st = style(i, key)
            r = g.iloc[0]
            m, lo, hi = _err(r)
            face = st["color"] if not filled or bool(r[sig]) else "white"
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
            entries.append((_name(key, rest), st))
            if filled:  # a significant difference: a filled marker
                yes = g[sig].to_numpy(bool)
                ax.scatter(x[yes], m[yes], marker=st["marker"], color=st["color"], zorder=3)
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
                face.append(not filled or bool(sel.iloc[0][sig]))
            ax.errorbar(pos, means, yerr=[lows, highs], fmt="none", ecolor=st["color"],
                        capsize=3, elinewidth=1.4)
            ax.scatter(pos, means, marker=st["marker"], s=36, zorder=3,
                       color=[st["color"] if f else "white" for f in face],
                       edgecolors=st["color"], label=_name(key, rest))
            entries.append((_name(key, rest), st))
        ax.set_xticks(np.arange(len(xs)), [fmt(x) for x in xs], rotation=20)
    ax.set_xlabel(xlabel or by)
    ax.set_ylabel(label)
    if zero:
        ax.axhline(0, color="black", linewidth=0.9)
    if legend and filled:   # fill means significance: the allocators' entries half filled
        _legend(ax, [neutral(label, st, line=_numeric(xs)) for label, st in entries])
    elif legend:
        _legend(ax)


def neutral(label: str, st: dict, line: bool = True):
    """A legend entry of a series whose markers are filled or hollow by significance: its
    colour, line style and marker, the marker half filled (neither of the two)."""
    from matplotlib.lines import Line2D

    return Line2D([], [], color=st["color"], marker=st["marker"],
                  linestyle=st["linestyle"] if line else "none", fillstyle="left",
                  markerfacecoloralt="white", label=label)


def _err(row) -> tuple[float, float, float]:
    """(mean, length of the bar below it, above it) from a row's ``ci_low``–``ci_high``
    (no bar without an interval)."""
    m = float(row["mean"])
    lo, hi = float(row["ci_low"]), float(row["ci_high"])
    return m, (0.0 if math.isnan(lo) else max(m - lo, 0.0)), \
        (0.0 if math.isnan(hi) else max(hi - m, 0.0))


#: panels per row of a per-point figure
PANEL_COLUMNS = 3


def _panels(frame: pd.DataFrame, where: str,
            panels: Sequence[tuple[str, pd.DataFrame]] | None
            ) -> tuple[list[tuple[str, pd.DataFrame]], str]:
    """The (title, rows) of each panel, ``panels`` when given (one per sweep point), else
    ``frame`` alone; and the words a figure of one panel puts in its title (``where``, or
    ``at`` its one point)."""
    if panels is None:
        return [("", frame)], where
    panels = list(panels)
    one = panels[0][0] if len(panels) == 1 else ""
    return panels, (where or (f"at {one}" if one else ""))


def _grid(plt, n: int, width: float = 4.4, height: float = 3.3, **kw):
    """A figure of ``n`` panels, :data:`PANEL_COLUMNS` a row (one panel: the single
    figure's size); the panels past ``n`` are hidden."""
    if n <= 1:
        fig, ax = plt.subplots(figsize=(6.4, 4.0))
        return fig, [ax]
    ncol = min(n, PANEL_COLUMNS)
    nrow = math.ceil(n / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(width * ncol + 1.8, height * nrow),
                             squeeze=False, layout="constrained", **kw)
    flat = list(axes.flat)
    for ax in flat[n:]:
        ax.axis("off")
    return fig, flat[:n]


def _places(allocators: Sequence[str], frames) -> dict[str, int]:
    """Each allocator's style index: its place in ``allocators`` (the plan's), then the
    others in order of appearance."""
    place = {a: i for i, a in enumerate(allocators)}
    for df in frames:
        for a in dict.fromkeys(df["allocator"]) if "allocator" in df.columns else ():
            place.setdefault(a, len(place))
    return place


def _shared_legend(fig, axes) -> None:
    """One legend for every panel: beside a single panel, else right of the figure (each
    allocator once)."""
    if len(axes) == 1:
        _legend(axes[0])
        return
    seen: dict[str, object] = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(lab, h)
    if seen:
        fig.legend(list(seen.values()), list(seen), loc="outside right upper", fontsize=8,
                   frameon=False)


def cdf_figure(items: pd.DataFrame, column: str, label: str, out: Path,
               where: str = "", *, panels: Sequence[tuple[str, pd.DataFrame]] | None = None,
               allocators: Sequence[str] = ()) -> list[Path]:
    """The empirical CDF of a per-request (job, VM) column, one line per allocator, all
    seeds pooled: one panel per (title, rows) of ``panels`` (a sweep point each), or of
    ``items`` alone, titled ``where``."""
    plt = _plt()
    panels, where = _panels(items, where, panels)
    place = _places(allocators, [df for _t, df in panels])
    fig, axes = _grid(plt, len(panels), sharey=True)
    for ax, (title, df) in zip(axes, panels, strict=True):
        for alloc, g in df.groupby("allocator", sort=False):
            v = np.sort(g[column].dropna().to_numpy(float))
            if not v.size:
                continue
            st = _style(place[alloc])
            ax.step(v, np.arange(1, v.size + 1) / v.size, where="post", label=str(alloc),
                    color=st["color"], linestyle=st["linestyle"])
        if not len(df):
            ax.text(0.5, 0.5, "no rows at this point", ha="center", va="center",
                    transform=ax.transAxes, fontsize=8)
        ax.set_xlabel(label)
        ax.set_ylabel("fraction ≤ x")
        ax.set_ylim(0, 1.01)
        if len(panels) > 1:
            ax.set_title(title, fontsize=9)
    _shared_legend(fig, axes)
    if len(panels) == 1:
        axes[0].set_title(f"distribution of {column} {where}".rstrip(), fontsize=10)
    else:
        fig.suptitle(f"distribution of {column}: a panel per sweep point", fontsize=10)
    return _save(fig, out, f"cdf_{column}")


def timeseries_figure(ts: pd.DataFrame, column: str, label: str, out: Path, where: str = "",
                      bins: int = 50, bounds: tuple[float, float] | None = None,
                      x: str = "time", xlabel: str = "simulated time", *,
                      panels: Sequence[tuple[str, pd.DataFrame]] | None = None,
                      allocators: Sequence[str] = ()) -> list[Path]:
    """A time-series column over simulated time (or over another column ``x``, e.g. the
    gpu mode's arrived percent): per allocator, each seed's samples averaged in equal bins
    of ``x`` (at most ``bins``, and no more than a run has samples, so each bin holds a
    sample of most seeds), then the mean over seeds with its 95 % band, clipped to
    ``bounds`` (the column's range). One panel per (title, rows) of ``panels`` (a sweep
    point each), or of ``ts`` alone, titled ``where``."""
    plt = _plt()
    panels, where = _panels(ts, where, panels)
    place = _places(allocators, [df for _t, df in panels])
    fig, axes = _grid(plt, len(panels), sharey=True)
    for ax, (title, df) in zip(axes, panels, strict=True):
        _timeseries(ax, df, column, bins, bounds, x, place)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(label)
        if len(panels) > 1:
            ax.set_title(title, fontsize=9)
    _shared_legend(fig, axes)
    over = "over time" if x == "time" else f"against {x}"
    if len(panels) == 1:
        axes[0].set_title(f"{column} {over} {where} (mean over seeds, 95 % band)"
                          .replace("  ", " "), fontsize=10)
    else:
        fig.suptitle(f"{column} {over} (mean over seeds, 95 % band): a panel per sweep "
                     "point", fontsize=10)
    return _save(fig, out, f"timeseries_{column}")


def _timeseries(ax, ts: pd.DataFrame, column: str, bins: int,
                bounds: tuple[float, float] | None, x: str, place: dict[str, int]) -> None:
    if not len(ts):
        ax.text(0.5, 0.5, "no samples at this point", ha="center", va="center",
                transform=ax.transAxes, fontsize=8)
        return
    per_run = ts.groupby(["allocator", "seed"], sort=False).size()
    bins = max(2, min(bins, int(per_run.median()) if len(per_run) else bins))
    t = ts[x].to_numpy(float)
    edges = np.linspace(np.nanmin(t), np.nanmax(t), bins + 1) if t.size else np.zeros(2)
    if edges[-1] <= edges[0]:
        edges = np.array([edges[0], edges[0] + 1.0])
    mids = (edges[:-1] + edges[1:]) / 2
    for alloc, g in ts.groupby("allocator", sort=False):
        b = np.clip(np.searchsorted(edges, g[x].to_numpy(float), side="right") - 1,
                    0, len(mids) - 1)
        per = g.assign(_bin=b).groupby(["seed", "_bin"])[column].mean().unstack("_bin")
        stats = [mean_ci(per[c]) if c in per.columns else (np.nan, np.nan, 0)
                 for c in range(len(mids))]
        m = np.array([s[0] for s in stats])
        h = np.array([s[1] for s in stats])
        st = _style(place[alloc])
        ok = ~np.isnan(m)
        ax.plot(mids[ok], m[ok], label=str(alloc), color=st["color"],
                linestyle=st["linestyle"])
        band = ok & ~np.isnan(h)
        lo, hi = m - h, m + h
        if bounds is not None:
            lo, hi = np.clip(lo, *bounds), np.clip(hi, *bounds)
        ax.fill_between(mids[band], lo[band], hi[band], color=st["color"], alpha=0.15,
                        linewidth=0)


def heatmap_figure(items: pd.DataFrame, x: str, y: str, out: Path, where: str = "",
                   bins: int = 6, *, panels: Sequence[tuple[str, pd.DataFrame]] | None = None
                   ) -> list[Path]:
    """Acceptance by request size: the accepted share in bins of ``x`` (columns) and
    ``y`` (rows), one panel per allocator (AHAB's Fig. 4/5; at most 8) and per (title,
    rows) of ``panels`` (a sweep point each: its own rows of panels, each titled with the
    allocator and the point), or of ``items`` alone, titled ``where``. The bins are the
    same in every panel."""
    plt = _plt()
    panels, where = _panels(items, where, panels)
    allocs = list(dict.fromkeys(items["allocator"]))[:8]
    xe, ye = _edges(items[x], bins), _edges(items[y], bins)
    ncol = min(len(allocs), 4)
    per_point = math.ceil(len(allocs) / ncol)
    nrow = per_point * len(panels)
    fig, axes = plt.subplots(nrow, ncol, figsize=(3.4 * ncol, 3.2 * nrow), squeeze=False,
                             layout="constrained")
    im = None
    used = []
    for p, (title, df) in enumerate(panels):
        block = list(axes.flat)[p * per_point * ncol:(p + 1) * per_point * ncol]
        for ax, alloc in zip(block, allocs, strict=False):
            used.append(ax)
            g = df[df["allocator"] == alloc]
            im = _acceptance(ax, g, x, y, xe, ye) or im
            ax.set_title(str(alloc) if len(panels) == 1 else f"{alloc}\n{title}",
                         fontsize=9)
    for ax in axes.flat:
        if ax not in used:
            ax.axis("off")
    if im is not None:
        fig.colorbar(im, ax=axes, shrink=0.8 if nrow < 4 else 0.4, label="accepted share")
    if len(panels) == 1:
        fig.suptitle(f"acceptance by {x} and {y} {where}".rstrip(), fontsize=10)
    else:
        fig.suptitle(f"acceptance by {x} and {y}: a row of panels per sweep point",
                     fontsize=10)
    return _save(fig, out, f"heatmap_{x}_{y}")


def _acceptance(ax, g: pd.DataFrame, x: str, y: str, xe: np.ndarray, ye: np.ndarray):
    xi = np.clip(np.searchsorted(xe, g[x].to_numpy(float), side="right") - 1, 0,
                 len(xe) - 2)
    yi = np.clip(np.searchsorted(ye, g[y].to_numpy(float), side="right") - 1, 0,
                 len(ye) - 2)
    acc = np.full((len(ye) - 1, len(xe) - 1), np.nan)
    frame = pd.DataFrame({"x": xi, "y": yi, "a": g["accepted"].to_numpy(float)})
    for (yy, xx), v in frame.groupby(["y", "x"])["a"].mean().items():
        acc[yy, xx] = v
    im = ax.imshow(acc, origin="lower", vmin=0, vmax=1, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(xe) - 1), [_span(xe, k) for k in range(len(xe) - 1)],
                  rotation=45, fontsize=7)
    ax.set_yticks(range(len(ye) - 1), [_span(ye, k) for k in range(len(ye) - 1)],
                  fontsize=7)
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.grid(False)
    return im


def _legend(ax, handles: list | None = None) -> None:
    """The legend beside the plot, where it hides nothing."""
    kw = {"handles": handles} if handles is not None else {}
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, **kw)


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
