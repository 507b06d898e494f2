"""``dcsim report`` reads only what belongs to the folder's experiment (#34): a file from
another experiment is refused by name, not mixed in; planned runs that did not finish and
runs committed without a summary are said, not dropped; a column of the wrong type and
every unreadable file are one line naming it, never a traceback.

One small real results folder (and one of another experiment) is made per module; each
test tampers with its own copy, as a user's accident or a killed run would."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from dcsim.report import load
from dcsim.report.integrity import ResultsError
from tests.helpers.cli import invoke, ok

ROOT = Path(__file__).resolve().parents[1]


def experiment(tmp: Path, name: str, requests: int) -> Path:
    raw = yaml.safe_load((ROOT / "experiments" / "quickstart.yaml").read_text())
    raw["name"] = name
    raw["workload"]["requests"] = requests
    raw["warmup"] = {"requests": 30}
    raw["seeds"] = 2
    raw["allocators"] = ["first_fit", "best_fit"]
    p = tmp / f"{name}.yaml"
    p.write_text(yaml.safe_dump(raw, sort_keys=False))
    ok("run", p, "--out", tmp / name)
    return tmp / name


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("integrity")
    return {"own": experiment(tmp, "quickstart", 300), "other": experiment(tmp, "other", 200)}


@pytest.fixture
def out(made, tmp_path) -> Path:
    """A copy of the folder to tamper with."""
    return Path(shutil.copytree(made["own"], tmp_path / "res"))


def summary(folder: Path) -> pd.DataFrame:
    return pd.read_parquet(folder / "summary.parquet")


def manifest(folder: Path) -> dict:
    return json.loads((folder / "manifest.json").read_text())


def one_file(folder: Path, table: str, allocator: str = "first_fit", seed: int = 0) -> Path:
    (f,) = (folder / table / f"allocator={allocator}" / f"seed={seed}").glob("*.parquet")
    return f


def refused(res, *pieces: str) -> str:
    """Exit 1 with one line, ``error: ...`` holding every piece; no traceback."""
    assert res.exit_code == 1, res.output
    assert "Traceback" not in res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.output
    for p in pieces:
        assert p in lines[0], lines[0]
    return lines[0]


def report(folder: Path, *args) -> object:
    return invoke("report", folder, "--no-figures", "--out", folder.parent / "rep", *args)


def notes(res) -> list[str]:
    return [x[len("note: "):] for x in res.output.splitlines() if x.startswith("note: ")]


def truncate(f: Path) -> None:
    data = f.read_bytes()
    f.write_bytes(data[: len(data) // 2])


def restamp(folder: Path, f: Path) -> None:
    """Make the run's record vouch for ``f`` as it is now (as if dcsim had written it so):
    the checks on reading a file, past the checksum's (tests/test_results_verified.py)."""
    from dcsim.results.verify import FILES_KEY, file_entry

    rec_path = folder / "runs" / f"{f.stem}.json"
    rec = json.loads(rec_path.read_text())
    rec[FILES_KEY][f.relative_to(folder).as_posix()] = file_entry(f)
    rec_path.write_text(json.dumps(rec))


# ------------------------------------------------------------------------------ the normal case
def test_an_untouched_folder_reports_as_before(out):
    res = ok("report", out, "--no-figures", "--out", out.parent / "rep")
    assert res.output.startswith("quickstart: 4 runs, 2 allocators, 2 seeds\n")
    assert len(notes(res)) == 1 and notes(res)[0].startswith("Intervals from fewer than 3")
    r = load(out)
    assert r.notes == [] and len(r.requests) == len(pd.read_parquet(out / "requests"))
    pd.testing.assert_frame_equal(r.summary, summary(out))


# ------------------------------------------------------------------------------ foreign files
def test_a_stray_item_file_of_another_experiment_is_refused_by_name(made, out):
    pytest.importorskip("matplotlib")
    stray = out / "requests" / "allocator=first_fit" / "seed=0" / one_file(
        made["other"], "requests").name
    shutil.copy(one_file(made["other"], "requests"), stray)
    res = invoke("report", out, "--out", out.parent / "rep")
    line = refused(res, f"{stray}: not a file of any of this experiment's 4 finished runs "
                        "(runs/<run_id>.json, each with its files at requests/allocator="
                        "<label>/seed=<i>/<run_id>.parquet); reading it would mix its rows "
                        "into theirs: move it out of the results folder")
    assert not (out.parent / "rep" / "tables.md").exists(), line  # refused before writing
    with pytest.raises(ResultsError, match=re.escape(str(stray))):
        load(out).table("requests")
    # the tables that need no per-item rows are still made, from the good rows
    assert report(out).exit_code == 0
    stray.unlink()
    assert len(load(out).requests) == len(pd.read_parquet(load(out).path / "requests"))


def test_a_file_of_a_finished_run_in_another_partition_is_refused(out):
    f = one_file(out, "timeseries", "best_fit", 1)
    moved = out / "timeseries" / "allocator=first_fit" / "seed=0" / f.name
    shutil.copy(f, moved)
    with pytest.raises(ResultsError, match=re.escape(f"{moved}: not a file of any of")):
        load(out).table("timeseries")


def test_a_foreign_summary_is_refused_not_reported_under_this_name(made, out):
    shutil.copy(made["other"] / "summary.parquet", out / "summary.parquet")
    other = summary(made["other"])["run_id"].iloc[0]
    refused(report(out), f"{out / 'summary.parquet'}: 4 of its 4 rows are not finished runs "
                         f"of experiment 'quickstart' in {out / 'runs'} (e.g. run "
                         f"'{other}' of experiment 'other')",
            "move it away and the report reads the finished runs from runs/")


def test_a_summary_concatenated_from_two_experiments_is_refused(made, out):
    both = pd.concat([summary(out), summary(made["other"])], ignore_index=True)
    both.to_parquet(out / "summary.parquet")
    refused(report(out), f"{out / 'summary.parquet'}: 4 of its 8 rows are not finished runs "
                         "of experiment 'quickstart'")


def test_a_summary_with_a_run_twice_is_refused(out):
    s = summary(out)
    pd.concat([s, s.iloc[:1]], ignore_index=True).to_parquet(out / "summary.parquet")
    refused(report(out), f"{out / 'summary.parquet'}: run '{s['run_id'].iloc[0]}' has more "
                         "than one row")


def test_a_run_record_of_another_experiment_is_refused(made, out):
    rec = sorted((made["other"] / "runs").glob("*.json"))[0]
    shutil.copy(rec, out / "runs" / rec.name)
    refused(report(out), f"{out / 'runs' / rec.name}: a run of experiment 'other', not of "
                         "this folder's 'quickstart'")


def test_a_manifest_of_another_experiment_is_refused(made, out):
    shutil.copy(made["other"] / "manifest.json", out / "manifest.json")
    refused(report(out), "manifest.json is of experiment 'other', experiment.yaml of "
                         "'quickstart'")


# ------------------------------------------------------------------------------ wrong types
def test_a_metric_stored_as_text_is_an_error_naming_column_and_file(out):
    s = summary(out)
    s["acceptance_ratio"] = s["acceptance_ratio"].astype(str)
    s.to_parquet(out / "summary.parquet")
    refused(report(out), f"{out / 'summary.parquet'}: column 'acceptance_ratio' holds text "
                         "(e.g. '1.0'), not the float64 values dcsim/results/schema.py "
                         "declares for it")


def test_an_item_column_of_the_wrong_type_names_column_and_file(out):
    f = one_file(out, "requests", "best_fit", 1)
    df = pd.read_parquet(f)
    df["wait"] = df["wait"].astype(str)
    df.to_parquet(f)
    restamp(out, f)
    with pytest.raises(ResultsError, match=re.escape(
            f"{f}: column 'wait' holds text, not the float64 values "
            "dcsim/results/schema.py declares for it")):
        load(out).table("requests")


# ------------------------------------------------------------------------------ missing runs
def interrupt(folder: Path, keep: int) -> list[str]:
    """What Ctrl-C after ``keep`` runs leaves: the rest have no json, no files, no row, and
    are ``finished: false`` in the manifest. Returns the missing run ids."""
    m = manifest(folder)
    gone = [r["run_id"] for r in m["runs"][keep:]]
    for r in m["runs"][keep:]:
        r["finished"] = False
        (folder / "runs" / f"{r['run_id']}.json").unlink()
        for f in folder.glob(f"*/*/*/{r['run_id']}.parquet"):
            f.unlink()
    m["runs_finished"] = keep
    (folder / "manifest.json").write_text(json.dumps(m))
    s = summary(folder)
    s[~s["run_id"].isin(gone)].to_parquet(folder / "summary.parquet", index=False)
    return gone


def test_planned_runs_that_did_not_finish_are_named_with_the_command(made, out):
    good = summary(out)
    gone = interrupt(out, 1)
    res = ok("report", out, "--no-figures", "--out", out.parent / "rep")
    config = manifest(made["own"])["config_file"]
    assert notes(res)[0] == (f"3 of 4 planned runs are missing (e.g. {', '.join(gone)}); "
                             f"`dcsim run {config} --out {out} --resume` runs them")
    r = load(out)
    pd.testing.assert_frame_equal(r.summary, good.iloc[:1].reset_index(drop=True))
    assert "3 of 4 planned runs are missing" in (out.parent / "rep" / "tables.md").read_text()


def test_the_left_overs_of_a_run_killed_before_its_json_are_not_read(made, out):
    good = load(out).requests
    gone = interrupt(out, 3)
    # killed between renaming its files into place and writing its json
    src = one_file(made["own"], "requests", "best_fit", 1)
    assert src.stem == gone[0]
    shutil.copy(src, out / "requests" / "allocator=best_fit" / "seed=1" / src.name)
    r = load(out)
    assert r.notes[0].startswith("1 of 4 planned runs are missing")
    keep = ~((good["allocator"] == "best_fit") & (good["seed"] == 1))
    pd.testing.assert_frame_equal(r.requests, good[keep].reset_index(drop=True))


def test_committed_runs_without_a_summary_are_reported_from_their_records(out):
    """kill -9 of the first `dcsim run`: runs/*.json committed, no summary, no manifest."""
    good = summary(out)
    (out / "summary.parquet").unlink()
    (out / "manifest.json").unlink()
    res = ok("report", out, "--no-figures", "--out", out.parent / "rep")
    assert res.output.startswith("quickstart: 4 runs, 2 allocators, 2 seeds\n")
    assert notes(res)[:2] == [
        "no summary.parquet: the `dcsim run` that wrote these 4 finished run(s) was stopped "
        "before its end (killed?), so they are read from runs/<run_id>.json; `dcsim run "
        f"<its config> --out {out} --resume` writes it",
        "no manifest.json: the `dcsim run` that wrote this folder was stopped before its "
        "end, so which runs it planned is not known; `dcsim run <its config> --out "
        f"{out} --resume` finishes it"]
    r = load(out)
    rows = r.summary.set_index("run_id").loc[good["run_id"]].reset_index()
    pd.testing.assert_frame_equal(rows[good.columns], good, check_dtype=False)
    assert len(r.requests) == len(pd.read_parquet(out / "requests"))


def test_runs_a_killed_resume_finished_are_added_to_an_older_summary(out):
    good = summary(out)
    good.iloc[:2].to_parquet(out / "summary.parquet", index=False)
    r = load(out)
    later = list(good["run_id"].iloc[2:])
    assert r.notes == [
        f"summary.parquet lacks 2 finished run(s) (e.g. {', '.join(later)}): the "
        "`dcsim run` that finished them was stopped before its end; they are read from "
        f"runs/<run_id>.json, and `dcsim run {manifest(out)['config_file']} --out {out} "
        "--resume` rewrites summary.parquet"]
    pd.testing.assert_frame_equal(r.summary, good)   # plan order, the same values


def test_a_folder_where_no_run_finished_says_so(out):
    interrupt(out, 0)
    (out / "summary.parquet").unlink()
    refused(report(out), f"{out}: no run has finished yet (0 of 4 planned);",
            f"--out {out} --resume` runs them")


# ------------------------------------------------------------------------------ unreadable
@pytest.mark.parametrize("what", ["summary.parquet", "manifest.json", "experiment.yaml",
                                  "runs/*.json"])
def test_an_unreadable_file_is_one_line_naming_it(out, what):
    if what == "runs/*.json":  # read only when the summary lacks the run
        f = sorted((out / "runs").glob("*.json"))[0]
        (out / "summary.parquet").unlink()
    elif what == "experiment.yaml":
        f = out / what
        f.write_text("name: quickstart\ntopology: {kind: [fat_tree\n")
    else:
        f = out / what
    if what != "experiment.yaml":
        truncate(f)
    line = refused(report(out), f"error: {f}: unreadable")
    assert line.count(str(f)) == 1


@pytest.mark.parametrize("table", ["requests", "timeseries"])
def test_a_truncated_item_file_is_one_line_naming_it(out, table):
    pytest.importorskip("matplotlib")
    f = one_file(out, table, "best_fit", 0)
    truncate(f)
    refused(invoke("report", out, "--out", out.parent / "rep"),
            f"{f.relative_to(out)} has {f.stat().st_size} bytes")
    restamp(out, f)   # a record that vouches for it: the reader still names the file
    refused(invoke("report", out, "--out", out.parent / "rep"),
            f"error: {f}: unreadable Parquet file (")


def test_a_manifest_that_is_not_one_is_named(out):
    (out / "manifest.json").write_text(json.dumps({"experiment": "quickstart", "runs": [1]}))
    refused(report(out), f"{out / 'manifest.json'}: not a dcsim manifest ('runs' is not a "
                         "list of runs, each with its run_id)")
