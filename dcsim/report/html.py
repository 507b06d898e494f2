"""The report as one self-contained HTML page: tables, figures (embedded as data URIs, so
the file opens from disk with no server and can be mailed as it is), the resolved
experiment and where it came from."""

from __future__ import annotations

import base64
import html
from pathlib import Path

import yaml

from dcsim.report.figures import PAIRED_STEM

CSS = """
body { font-family: system-ui, sans-serif; max-width: 1100px; margin: 2em auto;
       padding: 0 1em; color: #222; line-height: 1.45; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 1.8em; }
table { border-collapse: collapse; margin: 0.6em 0 1.2em; font-size: 0.9em; }
th, td { border: 1px solid #bbb; padding: 0.25em 0.6em; text-align: right;
         white-space: nowrap; }
.wide { overflow-x: auto; }
th:first-child, td:first-child { text-align: left; }
thead th { background: #eef2f7; }
tbody tr:nth-child(even) { background: #f7f7f7; }
figure { margin: 1em 0 2em; } figure img { max-width: 100%; height: auto; }
figcaption { font-size: 0.9em; color: #444; }
pre { background: #f5f5f5; padding: 0.8em; overflow-x: auto; font-size: 0.85em; }
.meta td { text-align: left; }
.note { background: #fff4e0; border-left: 4px solid #E69F00; padding: 0.5em 0.8em; }
.footnote { font-size: 0.85em; color: #444; margin-top: -0.8em; }
"""


def _table(rows: list[list[str]], cls: str = "", head: bool = True) -> str:
    """A table (its first row the header unless ``head`` is false), in a box that scrolls
    sideways when it is wider than the page."""
    top = ""
    if head:
        top = "<thead><tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in rows[0]) + \
            "</tr></thead>"
        rows = rows[1:]
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>"
                   for r in rows)
    return f'<div class="wide"><table class="{cls}">{top}<tbody>{body}</tbody></table></div>'


def _figure(title: str, paths: list[Path], cls: str = "") -> str:
    png = next(p for p in paths if p.suffix == ".png")
    data = base64.b64encode(png.read_bytes()).decode("ascii")
    return (f'<figure class="{cls}"><img src="data:image/png;base64,{data}" '
            f'alt="{html.escape(title)}"><figcaption>{html.escape(title)} '
            f"(also <code>figures/{png.stem}.svg</code>)</figcaption></figure>")


def _marks(rep) -> str:
    """What a ``*`` says, as the end of "* marks a difference …"."""
    star = rep.star()
    return "whose interval excludes 0" if star == "the interval excludes 0" else \
        f"{star} (its interval is the uncorrected 95 % one)"


def write_html(rep, path: Path) -> Path:
    """Write ``rep`` (a :class:`~dcsim.report.build.Report`) as one HTML page: the notes on
    the seeds, the paired-difference figure (with a baseline), the tables, the other
    figures, then the run and its experiment. The page names the results folder, never
    where it lies on this machine."""
    r = rep.results
    m = r.manifest
    meta = [["experiment", r.name], ["mode", r.mode],
            ["runs", str(len(r.summary))], ["allocators", ", ".join(r.allocators)],
            ["seeds", str(r.seeds)],
            ["swept", ", ".join(r.params) or "nothing"],
            ["dcsim version", str(m.get("dcsim_version", "unknown"))],
            ["finished", str(m.get("finished", "unknown"))],
            ["results folder", r.path.resolve().name]]
    lead = [f for f in rep.figures if f[1] and f[1][0].stem == PAIRED_STEM]
    rest = [f for f in rep.figures if f not in lead]
    parts = [f"<h1>{html.escape(r.name)}: report</h1>",
             f"<p>{len(r.summary)} runs: {len(r.allocators)} allocators, {r.seeds} seeds"
             + (f", swept: {html.escape(', '.join(r.params))}" if r.params else "")
             + (f"; differences against {html.escape(str(rep.baseline))}"
                if rep.baseline else "") + ".</p>"]
    for note in rep.notes:
        parts.append(f'<p class="note">{html.escape(note)}</p>')
    if rep.note:
        parts.append(f"<p><strong>{html.escape(rep.note)}</strong></p>")
    if rep.baseline is None and len(r.allocators) > 1:
        parts.append("<p>Give <code>--baseline LABEL</code> for the paired difference of "
                     "every allocator against one: the comparison to read.</p>")
    for title, paths in lead:
        parts.append(_figure(title, paths, "lead"))
    parts.append("<h2>Tables</h2>")
    n_levels = len(rep.metrics)
    for i, (metric, title, rows, note) in enumerate(rep.sections()):
        if i >= n_levels:
            parts.append(f"<h3>{html.escape(rep.label(metric))}: paired difference against "
                         f"{html.escape(str(rep.baseline))}</h3><p>Same seed, same requests: "
                         "the difference is taken seed by seed; * marks a difference "
                         f"{html.escape(_marks(rep))}.</p>")
        else:
            parts.append(f"<h3>{html.escape(title)}</h3>")
        parts.append(_table(rows))
        if note:
            parts.append('<p class="footnote">'
                         + "<br>".join(html.escape(x) for x in note.splitlines()) + "</p>")
    if rest:
        parts.append("<h2>Figures</h2>")
        parts += [_figure(title, paths) for title, paths in rest]
    parts.append("<h2>Run</h2>")
    parts.append(_table(meta, "meta", head=False))
    parts.append("<h2>Experiment</h2><p>The resolved configuration "
                 "(<code>experiment.yaml</code>):</p>")
    parts.append(f"<pre>{html.escape(yaml.safe_dump(r.config, sort_keys=False))}</pre>")
    page = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(r.name)}: dcsim report</title><style>{CSS}</style>"
            "</head><body>" + "\n".join(parts) + "</body></html>\n")
    path.write_text(page, encoding="utf-8")
    return path
