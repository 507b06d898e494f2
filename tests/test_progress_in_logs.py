"""Progress in a log (#48): `dcsim run` with its output in a file (no terminal) writes a
plain progress line every ``--progress-every`` seconds, a single long run included (its
requests offered of all, simulated time and ETA, read from inside the run); the rows do
not change."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from dcsim.cli import main
from dcsim.runner import progress
from dcsim.runner.progress import ENV, ENV_INTERVAL, ProgressLine

QUICKSTART = Path(__file__).resolve().parents[1] / "experiments" / "quickstart.yaml"


def _config(tmp_path: Path, requests: int) -> Path:
    cfg = yaml.safe_load(QUICKSTART.read_text())
    cfg.update(seeds=1, allocators=["best_fit"])
    cfg["workload"]["requests"] = requests
    f = tmp_path / "q.yaml"
    f.write_text(yaml.safe_dump(cfg))
    return f


def _rows(path: Path) -> pd.DataFrame:
    df = pd.read_parquet(path / "summary.parquet")
    return df.drop(columns=[c for c in df.columns if c.endswith("_s") or c == "code_id"])


def test_a_single_run_logs_progress_lines_while_it_runs(tmp_path):
    """One run of a second or more, stdout and stderr in a log file, a line every 0.05 s: many
    lines before the run ends, each one plain, with the run's requests, simulated time
    and an ETA (a 60 s run at the default 10 s gives 5 or 6)."""
    cfg = _config(tmp_path, 40_000)
    log = tmp_path / "run.log"
    with open(log, "w") as f:
        p = subprocess.run([sys.executable, "-m", "dcsim", "run", str(cfg), "--out",
                            str(tmp_path / "logged"), "--progress-every", "0.05"],
                           stdout=f, stderr=subprocess.STDOUT, cwd=tmp_path, timeout=300,
                           env={k: v for k, v in os.environ.items() if k != ENV})
    text = log.read_text()
    assert p.returncode == 0, text
    assert "\r" not in text and "\033" not in text  # plain lines, not a redrawn bar
    before = [s for s in text.splitlines() if s.startswith("[0/1] runs done")]
    assert len(before) >= 5, text
    inside = [s for s in before if "this run: " in s]
    assert len(inside) >= 3, text
    got = [re.search(r"this run: ([\d,]+) of 40,000 requests \(\d+ %\), t = ([\d,.]+)", s)
           for s in inside]
    assert all(got), inside
    done = [int(m.group(1).replace(",", "")) for m in got]
    times = [float(m.group(2).replace(",", "")) for m in got]
    assert done == sorted(done) and done[-1] > done[0] and times == sorted(times)
    assert any(re.search(r"ETA \d", s) for s in inside), inside  # the run's own pace
    assert "[1/1] runs done" in text
    # progress is output only: the rows are those of a run nobody watched
    r = CliRunner().invoke(main, ["run", str(cfg), "--out", str(tmp_path / "quiet"),
                                  "--progress-every", "0"])
    assert r.exit_code == 0, r.output
    pd.testing.assert_frame_equal(_rows(tmp_path / "logged"), _rows(tmp_path / "quiet"))


def test_progress_every_zero_writes_a_line_per_finished_run_only(tmp_path, monkeypatch):
    cfg = _config(tmp_path, 2000)
    monkeypatch.setenv("DCSIM_PROGRESS_EVERY", "0")  # the option's environment variable
    r = CliRunner().invoke(main, ["run", str(cfg), "--out", str(tmp_path / "o"),
                                  "--seeds", "2"])
    assert r.exit_code == 0, r.output
    lines = [s for s in r.stderr.splitlines() if "runs done" in s]
    assert [s.split(",")[0] for s in lines] == ["[1/2] runs done", "[2/2] runs done"]
    r = CliRunner().invoke(main, ["run", str(cfg), "--progress-every", "-1"])
    assert r.exit_code == 2 and "--progress-every" in r.output


def test_a_heartbeat_is_skipped_right_after_a_line():
    """Between the timed lines a finished run's own line counts: no two lines closer than
    ``every`` apart come from the heartbeat."""
    now = [0.0]
    out = io.StringIO()
    bar = ProgressLine(total=3, before=0, stream=out, tty=False, clock=lambda: now[0],
                       watch=False, every=10)
    now[0] = 10.0
    bar.heartbeat()
    assert out.getvalue() == "[0/3] runs done, 10.0 s elapsed, ETA --\n"
    now[0] = 15.0
    bar.update(1)  # a run ends: its line, at 15 s
    now[0] = 20.0
    bar.heartbeat()  # 5 s after that line: nothing
    now[0] = 25.0
    bar.heartbeat()
    assert out.getvalue().splitlines()[1:] == [
        "[1/3] runs done, 15.0 s elapsed, ETA 30.0 s",
        "[1/3] runs done, 25.0 s elapsed, ETA 20.0 s"]


def test_off_a_terminal_the_runs_report_into_a_folder_at_the_lines_pace(monkeypatch):
    """Off a terminal the runs in flight are watched too (the scratch folder is named to
    them), their files rewritten twice per line when lines come faster than a second;
    both variables are restored after."""
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.delenv(ENV_INTERVAL, raising=False)
    with ProgressLine(total=1, before=0, stream=io.StringIO(), tty=False, every=0.2) as bar:
        assert Path(os.environ[ENV]) == bar.folder and bar.folder.is_dir()
        assert progress._interval() == 0.1
    assert ENV not in os.environ and ENV_INTERVAL not in os.environ
    with ProgressLine(total=1, before=0, stream=io.StringIO(), tty=False, every=30):
        assert ENV in os.environ and progress._interval() == progress.INTERVAL
    with ProgressLine(total=1, before=0, stream=io.StringIO(), tty=False, every=0) as bar:
        assert bar.folder is None and ENV not in os.environ


@pytest.mark.parametrize("name, plugins, sets, clock", [
    ("fgd_default", {"gpu_allocators": ["fgd"]},
     ["gpu.nodes.limit=200", "gpu.pods.limit=1500"], False),     # the one pass: no clock
    ("vm_online_azure", {"placers": ["best_fit"]}, ["vm.workload.trace.limit=3000"], True),
    ("deeprm_load_sweep", {"schedulers": ["sjf"]}, ["workload.jobsets=150"], True),
])
def test_gpu_vm_online_and_queue_runs_log_what_they_offered(tmp_path, name, plugins, sets,
                                                            clock):
    """mode: gpu, vm_online and queue report from inside a run too: pods, VMs or jobs
    offered of all (a queue run's after each job set), and the simulated time where the
    run has a clock; the rows do not change."""
    from tests import golden

    exp = golden.reduced_file(name, tmp_path)
    cfg = yaml.safe_load(exp.read_text())
    cfg.update(seeds=1, **plugins)
    cfg.pop("matrix", None)       # one run: its lines' counts only rise
    exp.write_text(yaml.safe_dump(cfg))
    over = [a for s in sets for a in ("--set", s)]
    log = tmp_path / "run.log"
    with open(log, "w") as f:
        p = subprocess.run([sys.executable, "-m", "dcsim", "run", str(exp), "--out",
                            str(tmp_path / "logged"), "--progress-every", "0.05", *over],
                           stdout=f, stderr=subprocess.STDOUT, cwd=tmp_path, timeout=300,
                           env={k: v for k, v in os.environ.items() if k != ENV})
    text = log.read_text()
    assert p.returncode == 0, text
    inside = [s for s in text.splitlines() if "this run: " in s]
    assert inside, text
    tail = r", t = [\d,.]+$" if clock else r"$"
    got = [re.search(r"this run: ([\d,]+) of ([\d,]+) requests \(\d+ %\)" + tail, s)
           for s in inside]
    assert all(got), inside
    done = [int(m.group(1).replace(",", "")) for m in got]
    assert done == sorted(done) and done[-1] > 0
    r = CliRunner().invoke(main, ["run", str(exp), "--out", str(tmp_path / "quiet"),
                                  "--progress-every", "0", *over])
    assert r.exit_code == 0, r.output
    pd.testing.assert_frame_equal(_rows(tmp_path / "logged"), _rows(tmp_path / "quiet"))
