"""The report as one self-contained HTML page: tables, figures (embedded as data URIs, so
the file opens from disk with no server and can be mailed as it is), the resolved
experiment and where it came from."""

from __future__ import annotations

import base64
import html
from pathlib import Path

import yaml

from dcsim.report.tables import grid

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



def write_html(rep, path: Path) -> Path:
    """Write ``rep`` (a :class:`~dcsim.report.build.Report`) as one HTML page."""
    r = rep.results
    m = r.manifest
    meta = [["experiment", r.name], ["mode", r.mode],
            ["runs", str(len(r.summary))], ["allocators", ", ".join(r.allocators)],
            ["seeds", str(r.seeds)],
            ["swept", ", ".join(r.params) or "nothing"],
            ["dcsim version", str(m.get("dcsim_version", "unknown"))],
            ["finished", str(m.get("finished", "unknown"))],
            ["results", str(r.path.resolve())]]
    parts = [f"<h1>{html.escape(r.name)}: report</h1>",
             _table(meta, "meta", head=False)]
    if rep.note:
        parts.append(f"<p><strong>{html.escape(rep.note)}</strong></p>")
    parts.append("<h2>Tables</h2>")
    for metric in rep.metrics:
        parts.append(f"<h3>{html.escape(rep.label(metric))}: mean ± 95 % interval over "
                     "seeds</h3>")
        parts.append(_table(grid(rep.stats[metric], r.params, rep.by, rows=rep.rows)))
    for metric, df in rep.paired.items():
        if len(df):
            parts.append(f"<h3>{html.escape(rep.label(metric))}: paired difference against "
                         f"{html.escape(str(rep.baseline))}</h3><p>Same seed, same requests: "
                         "the difference is taken seed by seed; * marks an interval that "
                         "excludes 0.</p>")
            parts.append(_table(grid(df, r.params, rep.by, flag=True, rows=rep.rows)))
    if rep.figures:
        parts.append("<h2>Figures</h2>")
        for title, paths in rep.figures:
            png = next(p for p in paths if p.suffix == ".png")
            data = base64.b64encode(png.read_bytes()).decode("ascii")
            parts.append(f'<figure><img src="data:image/png;base64,{data}" '
                         f'alt="{html.escape(title)}"><figcaption>{html.escape(title)} '
                         f"(also <code>figures/{png.stem}.svg</code>)</figcaption></figure>")
    parts.append("<h2>Experiment</h2><p>The resolved configuration "
                 "(<code>experiment.yaml</code>):</p>")
    parts.append(f"<pre>{html.escape(yaml.safe_dump(r.config, sort_keys=False))}</pre>")
    page = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(r.name)}: dcsim report</title><style>{CSS}</style>"
            "</head><body>" + "\n".join(parts) + "</body></html>\n")
    path.write_text(page, encoding="utf-8")
    return path
