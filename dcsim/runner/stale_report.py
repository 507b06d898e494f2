"""Whether the report in an output folder still shows its results.

``dcsim report RESULTS`` writes ``RESULTS/report/`` (``report.html``, ``tables.md``, the
figures) from the runs finished when it ran. A later ``dcsim run`` into the same folder
(``--resume``, ``--rerun-changed``, ``--overwrite``) commits new runs and leaves that
report as it was: :func:`stale_report_note` says so in one line.

The results' time is the newest run record's (``runs/<run_id>.json``, written when a run
is committed; ``summary.parquet``'s when there is no ``runs/``): a ``--resume`` that had
nothing left to run rewrites the summary with the same rows but commits no run, and says
nothing. The report's time is ``report.html``'s (the page written last), else the newest
file under ``report/``.
"""

from __future__ import annotations

import shlex
from pathlib import Path

#: the folder ``dcsim report`` writes by default, inside the results folder
REPORT_DIR = "report"


def _mtime(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None


def results_time(out: Path) -> int | None:
    """When the newest finished run in ``out`` was committed (ns), or None."""
    runs = out / "runs"
    times = [t for p in runs.glob("*.json") if (t := _mtime(p)) is not None] \
        if runs.is_dir() else []
    if times:
        return max(times)
    return _mtime(out / "summary.parquet")


def report_time(report: Path) -> int | None:
    """When the report in ``report`` was written (ns), or None when there is none."""
    if not report.is_dir():
        return None
    page = _mtime(report / "report.html")
    if page is not None:
        return page
    times = [t for p in report.rglob("*") if p.is_file() and (t := _mtime(p)) is not None]
    return max(times) if times else None


def stale_report_note(out: str | Path) -> str | None:
    """One line when ``out/report/`` is older than the results in ``out``; else None."""
    out = Path(out)
    report = report_time(out / REPORT_DIR)
    results = results_time(out)
    if report is None or results is None or report >= results:
        return None
    return (f"note: {out / REPORT_DIR}/ is older than the results; run "
            f"`dcsim report {shlex.quote(str(out))}` again")
