"""``dcsim report``: tables, paired comparisons, figures and one HTML page from a results
directory (:func:`make_report`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from dcsim.errors import ConfigError
from dcsim.report import figures as figs
from dcsim.report.data import ITEM_TABLE, Results, load
from dcsim.report.numbers import CORRECTIONS
from dcsim.report.tables import (
    counts,
    describe,
    fmt,
    grid,
    in_order,
    markdown,
    paired,
    plain,
    row_params,
    same,
)
from dcsim.results.stats import (
    CLIP_MARK,
    HEADLINE,
    clip_note,
    column,
    difference_range,
    metric_range,
    seed_notes,
)
from dcsim.results.verify import refuse_links

#: per mode: (per-item columns worth a CDF, in order of preference)
CDF_COLUMNS = {"queue": ("slowdown", "completion_time"),
               "loss": ("footprint", "n_servers", "wait"),
               "vm_online": ("migrations",)}
#: per mode: the time-series column drawn
TIMESERIES = {"loss": "util_cpu", "queue": "util_cpu", "vm_online": "fragment_rate",
              "gpu": "alloc_gpu_share"}
#: per mode: the time-series columns drawn too when the run has them
TIMESERIES_MORE = {"loss": ("power_w",), "gpu": ("frag_gpus",)}
#: per mode whose time series is not over simulated time: its x column and axis label
#: (gpu: the FGD paper's Fig. 9a, against the arrived GPU request)
TIMESERIES_X = {"gpu": ("arrived_pct", "arrived GPU request (% of the cluster's GPUs)")}
NOT_METRICS = {"seed", "wall_time_s", "window_start", "window_end", "sim_time"}
#: the most sweep points a per-point figure (CDF, heat map, time series) draws a panel for
#: unless ``--point`` chooses them: spread over the plan, first and last included
MAX_POINTS = 8
#: how a correction is named in the tables' words
CORRECTION_NAMES = {"holm": "Holm", "bonferroni": "Bonferroni"}


@dataclass
class Report:
    results: Results
    metrics: list[str]
    by: str | None
    baseline: str | None
    #: the sweep parameters keying the tables' rows (:func:`~dcsim.report.tables.row_params`)
    rows: list[str] = field(default_factory=list)
    stats: dict[str, pd.DataFrame] = field(default_factory=dict)
    paired: dict[str, pd.DataFrame] = field(default_factory=dict)
    #: (title, [png, svg]) per figure
    figures: list[tuple[str, list[Path]]] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    #: the figures need matplotlib (or "")
    note: str = ""
    #: what to say once about the seeds (:func:`dcsim.results.stats.seed_notes`)
    notes: list[str] = field(default_factory=list)
    #: the multiple-comparison correction of the paired differences' significance
    #: (:data:`~dcsim.report.numbers.CORRECTIONS`)
    correction: str = "none"
    #: the sweep points the per-point figures draw, each {parameter: value}
    points: list[dict] = field(default_factory=list)
    #: which sweep points those figures show, in words ("" without a sweep)
    points_note: str = ""

    def star(self) -> str:
        """What the ``*`` of a paired cell (and a filled marker) means."""
        if self.correction == "none":
            return "the interval excludes 0"
        return (f"significant at 5 % after {CORRECTION_NAMES[self.correction]}'s correction "
                "over the allocators at each sweep point")

    def significance(self, metric: str) -> str:
        """The count lines of a paired table: per allocator, how many of its differences
        with an interval lie above and below 0 (and how many stay after the correction),
        then what the counts are of."""
        df = self.paired[metric]
        after = CORRECTION_NAMES.get(self.correction)
        lines = []
        for alloc, n, up, down, up_c, down_c in counts(df):
            if not n:
                lines.append(f"{alloc} − {self.baseline}: no difference with an interval")
            elif after:
                lines.append(f"{alloc} − {self.baseline}: {up} of {n} above zero ({up_c} "
                             f"after {after}), {down} below ({down_c} after {after})")
            else:
                lines.append(f"{alloc} − {self.baseline}: {up} of {n} above zero, {down} "
                             "below")
        params = self.results.params
        sizes = df.groupby(params, sort=False, dropna=False, observed=True)["p_value"] \
            .count() if params else pd.Series([df["p_value"].count()])
        family = int(sizes.max())
        if not family:
            return "\n".join(lines)
        # some points may have differences without an interval: fewer in their family
        size = f"up to {family}" if int(sizes.min()) < family else str(family)
        at = "at each sweep point" if params else "here"
        of = "(of the cells with an interval; above or below zero: the 95 % interval excludes 0"
        if after:
            whose = "each sweep point's" if params else "the"
            lines.append(f"{of}; after {after}: {after}'s correction over {whose} "
                         f"{size} difference{'s' if family != 1 else ''} against "
                         f"{self.baseline}, one family)")
        elif family > 1:
            lines.append(f"{of}, not corrected for the {size} comparisons {at}: "
                         "--correction holm corrects them)")
        else:
            lines.append(f"{of})")
        return "\n".join(lines)

    def sections(self) -> list[tuple[str, str, list[list[str]], str]]:
        """(metric, title, table cells, footnote or "") per metric, then per paired
        comparison; the footnote explains a cell marked † (an interval clipped to the
        metric's range)."""
        r = self.results
        out = []
        for m in self.metrics:
            rows = grid(self.stats[m], r.params, self.by, rows=self.rows)
            out.append((m, f"{self.label(m)}: mean ± 95 % interval over seeds", rows,
                        _footnote(rows, metric_range(m, r.mode))))
        for m, df in self.paired.items():
            if len(df):
                rows = grid(df, r.params, self.by, flag=True, rows=self.rows)
                clip = _footnote(rows, difference_range(metric_range(m, r.mode)),
                                 "a difference's")
                out.append((m, f"{self.label(m)}: paired difference against {self.baseline} "
                            f"(same seeds, same requests; * = {self.star()})", rows,
                            "\n".join(x for x in (clip, self.significance(m)) if x)))
        return out

    def text_tables(self, fmt=plain) -> list[tuple[str, str]]:
        """(title, table text with its footnote under it) per metric, then per paired
        comparison."""
        return [(title, fmt(rows) + (f"\n{note}" if note else ""))
                for _m, title, rows, note in self.sections()]

    def label(self, metric: str, table: str = "summary") -> str:
        """``metric (unit)``, the unit from the table's declaration."""
        c = column(metric, self.results.mode, table)
        unit = c.unit if c is not None else None
        return f"{metric} ({unit})" if unit and unit not in ("—", "") else metric


def _footnote(rows: list[list[str]], bounds, of: str = "the metric's") -> str:
    return clip_note(bounds, of) if any(CLIP_MARK in c for r in rows[1:] for c in r) else ""


def metric_names(results: Results) -> list[str]:
    """The summary's numeric metrics (what ``--metric`` may name)."""
    s = results.summary
    return [c for c in s.columns if c not in NOT_METRICS and c not in results.params
            and c not in ("allocator", "experiment", "run_id")
            and pd.api.types.is_numeric_dtype(s[c]) and not pd.api.types.is_bool_dtype(s[c])]


def plugin_metrics(results: Results) -> list[str]:
    """The summary's metrics that metric plugins added (``metrics.plugins``): the numeric
    columns no built-in declaration of the mode's summary has. The report tables them
    beside the headline metrics."""
    return [m for m in metric_names(results) if column(m, results.mode) is None]


def make_report(path: str | Path, metrics: list[str] | None = None, by: str | None = None,
                baseline: str | None = None, out: str | Path | None = None,
                draw: bool = True, *, correction: str = "none",
                points: list[str] | None = None) -> Report:
    """Compute the report of the results in ``path`` and write it into ``out`` (default
    ``path/report``): ``tables.md``, ``stats.csv`` (and ``paired.csv``), ``figures/``
    and ``report.html``. ``correction``: the paired differences' multiple-comparison
    correction (``none``, ``holm``, ``bonferroni``); ``points``: ``PARAM=VALUE`` choices of
    the sweep points the per-point figures draw (default: every point, at most
    :data:`MAX_POINTS`). Bad names are a :class:`ConfigError` listing what exists."""
    if correction not in CORRECTIONS:
        raise ConfigError(f"--correction: no correction {correction!r}; the corrections "
                          f"are {', '.join(CORRECTIONS)}")
    r = load(path)
    known = metric_names(r)
    if metrics:
        bad = [m for m in metrics if m not in known]
        if bad:
            raise ConfigError(f"--metric: no metric {bad[0]!r} in {r.path}/summary.parquet; "
                              f"the metrics are {', '.join(known)}")
    else:
        metrics = [m for m in HEADLINE if m in known and (r.summary[m].fillna(0) != 0).any()]
        metrics = (metrics or known[:4]) + [m for m in plugin_metrics(r) if m not in metrics]
    if by is not None and by not in r.params:
        raise ConfigError(f"--by: {by!r} is not a swept parameter of {r.name}; "
                          + (f"the swept ones are {', '.join(r.params)}" if r.params
                             else "the experiment sweeps nothing"))
    if by is None and r.params:
        by = r.params[0]
    if baseline is not None and baseline not in r.allocators:
        raise ConfigError(f"--baseline: no allocator {baseline!r}; the allocators are "
                          f"{', '.join(r.allocators)}")
    chosen, points_note = choose_points(r, points or [])
    rep = Report(r, list(metrics), by, baseline, rows=row_params(r.summary, r.params, by),
                 notes=[*r.notes, *seed_notes(r.summary, [*r.params, "allocator"], r.mode,
                                               r.config)],
                 correction=correction, points=chosen, points_note=points_note)
    for m in metrics:
        rep.stats[m] = describe(r.summary, m, r.params, metric_range(m, r.mode))
        if baseline is not None:
            rep.paired[m] = paired(r.summary, m, baseline, r.params, metric_range(m, r.mode),
                                   correction=correction)
    if draw and figs.available():  # read (and check) what the figures draw before writing
        _ = (r.requests if r.mode in CDF_COLUMNS else None,
             r.timeseries if r.mode in TIMESERIES else None)
    out = Path(out) if out is not None else r.path / "report"
    # never write through a link: a report/ (or a file in it) linked out of the folder
    refuse_links(r.path if out == r.path / "report" else out)
    out.mkdir(parents=True, exist_ok=True)
    _write_tables(rep, out)
    if draw and figs.available():
        _draw(rep, out / "figures")
    elif draw:
        rep.note = ('figures need matplotlib: pip install "dcsim[plot]" (or, in a checkout, '
                    'pip install -e ".[plot]")')
    from dcsim.report.html import write_html

    rep.files.append(write_html(rep, out / "report.html"))
    return rep


def _write_tables(rep: Report, out: Path) -> None:
    md = [f"# {rep.results.name}: report", "", *(f"> {n}\n" for n in rep.notes)]
    for _metric, title, rows, note in rep.sections():
        md += [f"## {title}", "", markdown(rows), "",
               *([note.replace("\n", "  \n"), ""] if note else [])]
    (out / "tables.md").write_text("\n".join(md))
    pd.concat(rep.stats.values(), ignore_index=True).to_csv(out / "stats.csv", index=False)
    rep.files += [out / "tables.md", out / "stats.csv"]
    if rep.paired:
        pd.concat(rep.paired.values(), ignore_index=True).to_csv(out / "paired.csv",
                                                                 index=False)
        rep.files.append(out / "paired.csv")


def sweep_points(r: Results) -> list[dict]:
    """The sweep points of the plan, in its order: {parameter: value} each (one empty point
    without a sweep)."""
    if not r.params or not len(r.summary):
        return [{}]
    keys = r.summary[r.params].drop_duplicates()
    return [dict(zip(r.params, row, strict=True)) for row in keys.itertuples(index=False)]


def point_words(point: dict) -> str:
    """``p=v, q=w``: a sweep point as the figures title it."""
    return ", ".join(f"{p}={fmt(v)}" for p, v in point.items())


def choose_points(r: Results, chosen: list[str]) -> tuple[list[dict], str]:
    """The sweep points the per-point figures draw, and words saying which: those matching
    every ``PARAM=VALUE`` of ``chosen`` (several values of one parameter: any of them),
    else all; at most :data:`MAX_POINTS`, spread over the plan (first and last kept). A
    choice naming no parameter or point is a :class:`ConfigError` listing them."""
    points = sweep_points(r)
    if not r.params:
        if chosen:
            raise ConfigError(f"--point: {r.name} sweeps nothing, so there is no point "
                              "to choose")
        return points, ""
    want: dict[str, set[str]] = {}
    for c in chosen:
        key, eq, value = c.partition("=")
        key = key.strip()
        if not eq or key not in r.params:
            raise ConfigError(f"--point: {c!r} is not PARAM=VALUE of a swept parameter; "
                              f"the swept ones are {', '.join(r.params)}")
        want.setdefault(key, set()).add(value.strip())
    picked = [p for p in points if all(fmt(p[k]) in vs for k, vs in want.items())]
    if not picked:
        raise ConfigError(f"--point: no sweep point has {', '.join(chosen)}; the points are "
                          + "; ".join(point_words(p) for p in points))
    total = len(picked)
    if total > MAX_POINTS:
        idx = sorted({round(i * (total - 1) / (MAX_POINTS - 1)) for i in range(MAX_POINTS)})
        picked = [picked[i] for i in idx]
    listed = "; ".join(point_words(p) for p in picked)
    chosen_of = f" chosen with --point (of {len(points)})" if want else ""
    if len(picked) < total:
        note = (f"a panel for {len(picked)} of the {total} sweep points{chosen_of}, spread "
                f"over them ({listed}); at most {MAX_POINTS} are drawn: --point PARAM=VALUE "
                "(repeatable) chooses which")
    elif total == 1:
        note = f"at {listed}" + (f" (chosen with --point, of {len(points)})" if want else "")
    else:
        note = f"a panel for each of the {total} sweep points{chosen_of} ({listed})"
    return picked, note


def _at(r: Results, df: pd.DataFrame, point: dict) -> pd.DataFrame:
    """``df``'s rows at the sweep point ``point``, the allocators in the plan's order."""
    if len(df) and "allocator" in df.columns:  # the plan's order of allocators
        df = in_order(df, r.allocators)
    keep = pd.Series(True, index=df.index)
    for p, v in point.items():
        if p in df.columns:
            keep &= same(df[p], v)
    return df[keep]


def _by_point(rep: Report, df: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """(the point in words, ``df`` at it) per sweep point the figures draw."""
    return [(point_words(p), _at(rep.results, df, p)) for p in rep.points]


def _caption(title: str, rep: Report) -> str:
    """A per-point figure's caption: its title and the sweep points it shows."""
    note = rep.points_note
    return title if not note else f"{title} {note}" if note.startswith("at ") \
        else f"{title}, {note}"


def _draw(rep: Report, out: Path) -> None:
    r = rep.results
    keys = [*rep.rows, *([rep.by] if rep.by else [])]
    shown = {m: df for m, df in rep.paired.items() if len(df)}
    if shown:  # the result a reader came for, first
        fill = "filled: " + rep.star() + "; hollow: not"
        rep.figures.append((f"paired difference against {rep.baseline}: each allocator "
                            f"minus {rep.baseline}, seed by seed ({fill})",
                            figs.paired_figure(shown, {m: rep.label(m) for m in shown},
                                               rep.baseline, rep.by, keys, out,
                                               stem=figs.PAIRED_STEM,
                                               allocators=r.allocators,
                                               correction=rep.correction)))
    for m in rep.metrics:
        rep.figures.append((f"{rep.label(m)} by {rep.by or 'allocator'}",
                            figs.metric_figure(rep.stats[m], m, rep.label(m), rep.by, keys,
                                               out, allocators=r.allocators)))
    items = r.requests if r.mode in CDF_COLUMNS else pd.DataFrame()
    if len(items):
        panels = _by_point(rep, items)
        shown_items = pd.concat([df for _t, df in panels]) if panels else items
        acc = [(t, df[df["accepted"]] if "accepted" in df.columns else df)
               for t, df in panels]
        every = shown_items[shown_items["accepted"]] if "accepted" in shown_items.columns \
            else shown_items
        for col in CDF_COLUMNS.get(r.mode, ()):
            if col in every.columns and every[col].notna().any() \
                    and (every[col].fillna(0) > 0).any() and every[col].nunique() > 1:
                rep.figures.append((_caption(f"distribution of {col}", rep),
                                    figs.cdf_figure(every, col,
                                                    rep.label(col, ITEM_TABLE[r.mode]), out,
                                                    panels=acc, allocators=r.allocators)))
                break
        pair = next(((x, y) for x, y in (("N", "S"), ("N", "B"), ("cpu", "mem"))
                     if x in items.columns and y in items.columns), None)
        if pair and "accepted" in items.columns and r.mode in ("loss", "vm_online"):
            rep.figures.append((_caption(f"acceptance by {pair[0]} and {pair[1]}", rep),
                                figs.heatmap_figure(in_order(shown_items, r.allocators),
                                                    *pair, out, panels=panels)))
    col = TIMESERIES.get(r.mode)
    ts = r.timeseries if col else pd.DataFrame()
    cols = [c for c in (col, *TIMESERIES_MORE.get(r.mode, ())) if c in ts.columns]
    if cols and len(ts):
        panels = _by_point(rep, ts)
        x, xlabel = TIMESERIES_X.get(r.mode, ("time", "simulated time"))
        if x not in ts.columns:  # gpu mode with pods that come and go: over time
            x, xlabel = "time", "simulated time"
        over = "over time" if x == "time" else f"against {x}"
        for c in cols:
            rep.figures.append((_caption(f"{c} {over}", rep),
                                figs.timeseries_figure(ts, c, rep.label(c, "timeseries"), out,
                                                       bounds=metric_range(
                                                           c, r.mode, "timeseries"),
                                                       x=x, xlabel=xlabel, panels=panels,
                                                       allocators=r.allocators)))
    for _, paths in rep.figures:
        rep.files += paths
