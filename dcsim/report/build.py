"""``dcsim report``: tables, paired comparisons, figures and one HTML page from a results
directory (:func:`make_report`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from dcsim.errors import ConfigError
from dcsim.report import figures as figs
from dcsim.report.data import ITEM_TABLE, Results, load
from dcsim.report.tables import (
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
                out.append((m, f"{self.label(m)}: paired difference against {self.baseline} "
                            "(same seeds, same requests; * = the interval excludes 0)", rows,
                            _footnote(rows, difference_range(metric_range(m, r.mode)),
                                      "a difference's")))
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


def make_report(path: str | Path, metrics: list[str] | None = None, by: str | None = None,
                baseline: str | None = None, out: str | Path | None = None,
                draw: bool = True) -> Report:
    """Compute the report of the results in ``path`` and write it into ``out`` (default
    ``path/report``): ``tables.md``, ``stats.csv`` (and ``paired.csv``), ``figures/``
    and ``report.html``. Bad names are a :class:`ConfigError` listing what exists."""
    r = load(path)
    known = metric_names(r)
    if metrics:
        bad = [m for m in metrics if m not in known]
        if bad:
            raise ConfigError(f"--metric: no metric {bad[0]!r} in {r.path}/summary.parquet; "
                              f"the metrics are {', '.join(known)}")
    else:
        metrics = [m for m in HEADLINE if m in known and (r.summary[m].fillna(0) != 0).any()]
        metrics = metrics or known[:4]
    if by is not None and by not in r.params:
        raise ConfigError(f"--by: {by!r} is not a swept parameter of {r.name}; "
                          + (f"the swept ones are {', '.join(r.params)}" if r.params
                             else "the experiment sweeps nothing"))
    if by is None and r.params:
        by = r.params[0]
    if baseline is not None and baseline not in r.allocators:
        raise ConfigError(f"--baseline: no allocator {baseline!r}; the allocators are "
                          f"{', '.join(r.allocators)}")
    rep = Report(r, list(metrics), by, baseline, rows=row_params(r.summary, r.params, by),
                 notes=[*r.notes, *seed_notes(r.summary, [*r.params, "allocator"], r.mode,
                                               r.config)])
    for m in metrics:
        rep.stats[m] = describe(r.summary, m, r.params, metric_range(m, r.mode))
        if baseline is not None:
            rep.paired[m] = paired(r.summary, m, baseline, r.params, metric_range(m, r.mode))
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
        md += [f"## {title}", "", markdown(rows), "", *([note, ""] if note else [])]
    (out / "tables.md").write_text("\n".join(md))
    pd.concat(rep.stats.values(), ignore_index=True).to_csv(out / "stats.csv", index=False)
    rep.files += [out / "tables.md", out / "stats.csv"]
    if rep.paired:
        pd.concat(rep.paired.values(), ignore_index=True).to_csv(out / "paired.csv",
                                                                 index=False)
        rep.files.append(out / "paired.csv")


def _last_point(r: Results, df: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """``df`` at the last sweep point of the plan, and words saying which."""
    if len(df) and "allocator" in df.columns:  # the plan's order of allocators
        df = in_order(df, r.allocators)
    if not r.params or not len(df):
        return df, ""
    last = r.summary.iloc[-1]
    keep = pd.Series(True, index=df.index)
    words = []
    for p in r.params:
        v = last[p]
        if p in df.columns:
            keep &= same(df[p], v)
        words.append(f"{p}={fmt(v)}")
    return df[keep], "at " + ", ".join(words)


def _draw(rep: Report, out: Path) -> None:
    r = rep.results
    keys = [*rep.rows, *([rep.by] if rep.by else [])]
    shown = {m: df for m, df in rep.paired.items() if len(df)}
    if shown:  # the result a reader came for, first
        rep.figures.append((f"paired difference against {rep.baseline}: each allocator "
                            f"minus {rep.baseline}, seed by seed",
                            figs.paired_figure(shown, {m: rep.label(m) for m in shown},
                                               rep.baseline, rep.by, keys, out,
                                               stem=figs.PAIRED_STEM,
                                               allocators=r.allocators)))
    for m in rep.metrics:
        rep.figures.append((f"{rep.label(m)} by {rep.by or 'allocator'}",
                            figs.metric_figure(rep.stats[m], m, rep.label(m), rep.by, keys,
                                               out, allocators=r.allocators)))
    items = r.requests if r.mode in CDF_COLUMNS else pd.DataFrame()
    if len(items):
        items, where = _last_point(r, items)
        acc = items[items["accepted"]] if "accepted" in items.columns else items
        for col in CDF_COLUMNS.get(r.mode, ()):
            if col in acc.columns and acc[col].notna().any() and (acc[col].fillna(0) > 0).any() \
                    and acc[col].nunique() > 1:
                rep.figures.append((f"distribution of {col} {where}",
                                    figs.cdf_figure(acc, col, rep.label(col, ITEM_TABLE[r.mode]),
                                                    out, where)))
                break
        pair = next(((x, y) for x, y in (("N", "S"), ("N", "B"), ("cpu", "mem"))
                     if x in items.columns and y in items.columns), None)
        if pair and "accepted" in items.columns and r.mode in ("loss", "vm_online"):
            rep.figures.append((f"acceptance by {pair[0]} and {pair[1]} {where}",
                                figs.heatmap_figure(items, *pair, out, where)))
    col = TIMESERIES.get(r.mode)
    ts = r.timeseries if col else pd.DataFrame()
    cols = [c for c in (col, *TIMESERIES_MORE.get(r.mode, ())) if c in ts.columns]
    if cols and len(ts):
        ts, where = _last_point(r, ts)
        x, xlabel = TIMESERIES_X.get(r.mode, ("time", "simulated time"))
        if x not in ts.columns:  # gpu mode with pods that come and go: over time
            x, xlabel = "time", "simulated time"
        over = "over time" if x == "time" else f"against {x}"
        for c in cols:
            rep.figures.append((f"{c} {over} {where}",
                                figs.timeseries_figure(ts, c, rep.label(c, "timeseries"), out,
                                                       where, bounds=metric_range(
                                                           c, r.mode, "timeseries"),
                                                       x=x, xlabel=xlabel)))
    for _, paths in rep.figures:
        rep.files += paths
