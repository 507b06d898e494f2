"""`dcsim run` says one line when the folder's ``report/`` is older than its results (#48):
after ``--resume`` or ``--rerun-changed`` committed new runs, ``report.html`` shows the old
ones until ``dcsim report`` runs again."""

from __future__ import annotations

import os
from pathlib import Path

import yaml
from click.testing import CliRunner

from dcsim.cli import main
from dcsim.runner.stale_report import stale_report_note

QUICKSTART = Path(__file__).resolve().parents[1] / "experiments" / "quickstart.yaml"


def _config(tmp_path: Path) -> Path:
    cfg = yaml.safe_load(QUICKSTART.read_text())
    cfg.update(seeds=1, allocators=["best_fit"])
    cfg["workload"]["requests"] = 1000
    cfg["warmup"]["requests"] = 100
    f = tmp_path / "q.yaml"
    f.write_text(yaml.safe_dump(cfg))
    return f


def _report(out: Path, age_s: float = 0.0) -> Path:
    """A report of ``out`` as `dcsim report` leaves it, written ``age_s`` seconds ago."""
    page = out / "report" / "report.html"
    page.parent.mkdir(exist_ok=True)
    page.write_text("<html></html>")
    (out / "report" / "tables.md").write_text("|")
    t = page.stat().st_mtime - age_s
    for p in page.parent.iterdir():
        os.utime(p, (t, t))
    return page


def _notes(output: str) -> list[str]:
    return [s for s in output.splitlines() if "report/ is older" in s]


def test_the_note_says_which_report_and_the_command_that_redoes_it(tmp_path):
    out = tmp_path / "my results"
    runs = out / "runs"
    runs.mkdir(parents=True)
    assert stale_report_note(out) is None  # no report: nothing to say
    (runs / "a.json").write_text("{}")
    _report(out, age_s=60)
    assert stale_report_note(out) == (f"note: {out / 'report'}/ is older than the results; "
                                      f"run `dcsim report '{out}'` again")
    _report(out)  # written after the last run: fresh
    assert stale_report_note(out) is None
    os.utime(runs / "a.json")  # a run committed after the page
    t = (runs / "a.json").stat().st_mtime + 5
    os.utime(runs / "a.json", (t, t))
    assert stale_report_note(out) is not None
    (out / "report" / "report.html").unlink()  # a report without its page: the newest file
    assert stale_report_note(out) is not None
    os.utime(out / "report" / "tables.md", (t + 1, t + 1))
    assert stale_report_note(out) is None


def test_dcsim_run_says_so_after_resume_and_overwrite_and_not_when_nothing_ran(tmp_path):
    cfg = _config(tmp_path)
    out = tmp_path / "results"
    r = CliRunner().invoke(main, ["run", str(cfg), "--out", str(out), "--seeds", "2"])
    assert r.exit_code == 0, r.output
    assert _notes(r.output + r.stderr) == []  # no report yet
    _report(out)
    r = CliRunner().invoke(main, ["run", str(cfg), "--out", str(out), "--seeds", "2",
                                  "--resume"])  # nothing left to run: the report holds
    assert r.exit_code == 0, r.output
    assert _notes(r.output + r.stderr) == []
    _report(out, age_s=5)
    r = CliRunner().invoke(main, ["run", str(cfg), "--out", str(out), "--seeds", "3",
                                  "--resume"])  # a third seed: one more run in the results
    assert r.exit_code == 0, r.output
    assert _notes(r.output) == [f"note: {out / 'report'}/ is older than the results; run "
                                f"`dcsim report {out}` again"]
    r = CliRunner().invoke(main, ["run", str(cfg), "--out", str(out), "--seeds", "3",
                                  "--rerun-changed"])  # no code changed: nothing ran
    assert r.exit_code == 0, r.output
    assert len(_notes(r.output)) == 1  # the results are still newer than the report
    _report(out)
    r = CliRunner().invoke(main, ["run", str(cfg), "--out", str(out), "--seeds", "3",
                                  "--overwrite"])  # report/ is kept, the runs are new
    assert r.exit_code == 0, r.output
    assert len(_notes(r.output)) == 1
