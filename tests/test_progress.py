"""Progress inside a run: the run's progress file, and the terminal line that reads it."""

from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path

import pandas as pd
import yaml

from dcsim.runner import progress
from dcsim.runner.progress import ENV, describe, in_flight, remaining, watch_run

QUICKSTART = Path(__file__).resolve().parents[1] / "experiments" / "quickstart.yaml"


def test_the_watcher_writes_while_the_body_runs_and_removes_its_file(tmp_path):
    import time

    counter = {"done": 0}
    with watch_run("r1", lambda: (counter["done"], 100, 2.5), interval=0.01, folder=tmp_path):
        for _ in range(5):
            counter["done"] += 10
            time.sleep(0.03)
        seen = in_flight(tmp_path)
    assert [r["run_id"] for r in seen] == ["r1"]
    assert seen[0]["total"] == 100 and 10 <= seen[0]["done"] <= 50 and seen[0]["time"] == 2.5
    assert list(tmp_path.iterdir()) == []  # removed at the end


def test_without_a_folder_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    with watch_run("r1", lambda: (1, 2, 0.0), interval=0.001):
        pass
    assert list(tmp_path.iterdir()) == []


def test_a_failing_probe_and_a_half_written_file_are_skipped(tmp_path):
    (tmp_path / "bad.json").write_text('{"done": ')
    (tmp_path / "ok.json").write_text(json.dumps(
        {"done": 5, "total": None, "time": 1.0, "elapsed": 2.0}))

    def probe():
        raise AttributeError("engine not built yet")

    with watch_run("r2", probe, interval=0.001, folder=tmp_path):
        pass
    assert [r["run_id"] for r in in_flight(tmp_path)] == ["ok"]


def test_the_line_describes_one_run_in_detail_and_several_as_fractions():
    one = [{"run_id": "a", "done": 1500, "total": 6000, "time": 151.25, "elapsed": 3.0}]
    assert describe(one) == "this run: 1,500 of 6,000 requests (25 %), t = 151.2"
    assert remaining(one) == 9.0  # 3 s for a quarter: 9 s for the rest
    trace = [{"run_id": "a", "done": 70, "total": None, "time": 3.0, "elapsed": 1.0}]
    assert describe(trace) == "this run: 70 requests, t = 3.0" and remaining(trace) is None
    two = one + [{"run_id": "b", "done": 300, "total": 600, "time": 1.0, "elapsed": 1.0}]
    assert describe(two) == "2 running: 25 %, 50 %"
    assert remaining(two) == 9.0  # the slowest decides
    assert describe([]) == "" and remaining([]) is None


def test_a_single_run_has_a_progress_line_and_an_eta_before_it_ends(monkeypatch):
    """On a terminal the bar makes the scratch folder, names it to the runs, reads it, and
    removes it; the ETA of the last runs comes from their own pace."""
    from dcsim.runner.progress import ProgressLine

    monkeypatch.delenv(ENV, raising=False)
    now = [0.0]
    bar = ProgressLine(total=1, before=0, stream=io.StringIO(), tty=False, clock=lambda: now[0],
                    watch=True)
    with bar:
        folder = Path(os.environ[ENV])
        assert folder == bar.folder and folder.is_dir()
        assert bar.status() == "[0/1] runs done, 0.0 s elapsed, ETA --"
        (folder / "run-a.json").write_text(json.dumps(
            {"done": 250, "total": 1000, "time": 12.0, "elapsed": 5.0}))
        now[0] = 5.0
        assert bar.status() == ("[0/1] runs done, 5.0 s elapsed, ETA 15.0 s; "
                                "this run: 250 of 1,000 requests (25 %), t = 12.0")
    assert ENV not in os.environ and not folder.exists()


def _config(tmp_path: Path) -> Path:
    cfg = yaml.safe_load(QUICKSTART.read_text())
    cfg.update(seeds=1, allocators=["best_fit"])
    cfg["workload"]["requests"] = 3000
    f = tmp_path / "q.yaml"
    f.write_text(yaml.safe_dump(cfg))
    return f


def test_a_watched_run_reports_as_it_goes_and_gives_the_same_rows(tmp_path, monkeypatch):
    """The loss engine's run reports requests offered and simulated time while it runs;
    watching changes no row."""
    from dcsim.runner import load_experiment, run_experiment

    seen: list[dict] = []
    real_replace = os.replace
    watched = tmp_path / "progress"

    def spy(src, dst):  # every write of a progress file, as it lands
        if Path(dst).parent == watched:
            seen.append(json.loads(Path(src).read_text()))
        real_replace(src, dst)

    # the run pauses for 1 ms every 100 requests (outside the GIL, so the watcher thread
    # gets to write however busy the machine is; a 30 ms run otherwise could hand it the
    # GIL only once); sleeping changes no choice
    from dcsim.allocators.single import BestFitAllocator

    real_allocate = BestFitAllocator.allocate
    calls = [0]

    def pausing(self, request, view):
        calls[0] += 1
        if calls[0] % 100 == 0:
            time.sleep(0.001)
        return real_allocate(self, request, view)

    monkeypatch.setattr(BestFitAllocator, "allocate", pausing)
    exp = load_experiment(_config(tmp_path))
    monkeypatch.delenv(ENV, raising=False)
    run_experiment(exp, out=tmp_path / "plain")
    watched.mkdir()
    monkeypatch.setenv(ENV, str(watched))
    monkeypatch.setattr(progress, "INTERVAL", 0.0005)
    monkeypatch.setattr(progress.os, "replace", spy)
    run_experiment(exp, out=tmp_path / "watched")
    assert calls[0] >= 2 * 3000  # both runs ran here, paused
    assert len(seen) >= 2
    done = [r["done"] for r in seen]
    assert done == sorted(done) and 0 <= done[0] and done[-1] <= 3000
    assert all(r["total"] == 3000 for r in seen)
    times = [r["time"] for r in seen]
    assert times == sorted(times)
    assert list(watched.iterdir()) == []
    cols = lambda df: df.drop(columns=[c for c in df.columns  # noqa: E731
                                       if c.endswith("_s") or c == "code_id"])
    a = cols(pd.read_parquet(tmp_path / "plain" / "summary.parquet"))
    b = cols(pd.read_parquet(tmp_path / "watched" / "summary.parquet"))
    pd.testing.assert_frame_equal(a, b)


def test_the_eta_counts_down_between_runs_and_ignores_resumed_ones():
    """The ETA comes from this invocation's runs and keeps moving between them (it stood
    still for 20 s on a terminal when run costs differed)."""
    from dcsim.runner.progress import ProgressLine

    now = [0.0]
    out = io.StringIO()
    bar = ProgressLine(total=10, before=2, stream=out, tty=False, clock=lambda: now[0])
    bar.update(1)
    bar.update(1)  # two runs kept by --resume: reported at once, no estimate
    assert out.getvalue() == "" and bar.status().endswith("ETA --")
    now[0] = 10.0
    bar.update(1)  # 1 run in 10 s, 7 left: the end is projected at 80 s
    assert out.getvalue() == "[3/10] runs done, 10.0 s elapsed, ETA 1 min 10 s\n"
    now[0] = 40.0
    assert bar.status() == "[3/10] runs done, 40.0 s elapsed, ETA 40.0 s"
    now[0] = 100.0
    assert bar.status().endswith("ETA 0.0 s")  # late: never negative
    now[0] = 110.0
    for _ in range(7):
        bar.update(1)
    assert out.getvalue().splitlines()[-1] == "[10/10] runs done, 1 min 50 s elapsed"


def test_on_a_terminal_the_line_is_redrawn_in_place():
    from dcsim.runner.progress import ProgressLine

    out = io.StringIO()
    with ProgressLine(total=2, before=0, stream=out, tty=True) as bar:
        bar.update(1)
        bar.update(1)
    text = out.getvalue()
    assert text.startswith("\r[0/2] runs done,") and text.endswith("\n")
    assert "\r[2/2] runs done," in text and "\n" not in text[:-1]
