"""A results folder is verified before it is trusted (issue #47, items 1, 2 and 3): each
run's record lists its files with their sizes and checksums; deleting, truncating or
replacing any of them is found by ``--resume`` (which runs exactly those runs again, to the
rows of an untouched folder) and by ``dcsim report`` (a non-zero exit naming the runs and
the command that repairs them); a symbolic link anywhere in the folder is refused, by name,
before ``--overwrite`` deletes or ``report`` writes anything; an unreadable run record is a
run that is not finished."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from dcsim.results.verify import FILES_KEY, file_entry, verify
from tests.helpers.cli import assert_same_dataset, invoke, ok
from tests.helpers.configs import small_experiment

CFG = small_experiment("verified", seed=5, seeds=2, requests=300,
                       metrics={"sample_every": 20}, allocators=["random", "first_fit"])


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> tuple[Path, Path]:
    """An experiment file and a finished, untouched results folder of it."""
    tmp = tmp_path_factory.mktemp("verified")
    exp = tmp / "exp.yaml"
    exp.write_text(yaml.safe_dump(CFG, sort_keys=False))
    ok("run", exp, "--out", tmp / "ref")
    return exp, tmp / "ref"


def copy(finished, tmp_path: Path) -> Path:
    out = tmp_path / "out"
    shutil.copytree(finished[1], out)
    return out


def records(out: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in sorted((out / "runs").glob("*.json"))}


def test_each_record_lists_its_files_with_size_and_checksum(finished):
    _, out = finished
    recs = records(out)
    assert len(recs) == 4
    for run_id, rec in recs.items():
        files = rec[FILES_KEY]
        assert sorted(Path(f).parts[0] for f in files) == ["requests", "timeseries"]
        for rel, entry in files.items():
            assert Path(rel).stem == run_id
            assert entry == file_entry(out / rel)
    assert verify(out, recs).broken == {}
    s = pd.read_parquet(out / "summary.parquet")
    assert FILES_KEY not in s.columns   # not a summary column


def damage(out: Path, how: str) -> str:
    """Damage one run's requests file; the run's id."""
    f = sorted((out / "requests").rglob("*.parquet"))[1]
    if how == "delete":
        f.unlink()
    elif how == "truncate":
        f.write_bytes(f.read_bytes()[:-100])
    elif how == "replace":   # same size, other bytes
        data = bytearray(f.read_bytes())
        data[len(data) // 2] ^= 0xFF
        f.write_bytes(bytes(data))
    elif how == "delete_folder":
        shutil.rmtree(out / "requests")
        return "*"
    return f.stem


@pytest.mark.parametrize("how", ["delete", "truncate", "replace", "delete_folder"])
def test_resume_reruns_exactly_the_damaged_runs(finished, tmp_path, how):
    exp, ref = finished
    out = copy(finished, tmp_path)
    damaged = damage(out, how)
    stamps = {p.stem: p.stat().st_mtime_ns for p in (out / "runs").glob("*.json")}
    r = ok("run", exp, "--out", out, "--resume")
    expect = 4 if damaged == "*" else 1
    assert f"rerunning {expect} finished run(s) lost or changed data" in r.output, r.output
    after = records(out)
    rerun = {k for k in after if (out / "runs" / f"{k}.json").stat().st_mtime_ns != stamps[k]}
    assert rerun == (set(stamps) if damaged == "*" else {damaged})
    assert_same_dataset(ref, out)
    assert verify(out, after).broken == {}


@pytest.mark.parametrize("how", ["delete", "truncate", "replace", "delete_folder"])
def test_report_refuses_a_folder_with_damaged_runs_naming_them(finished, tmp_path, how):
    exp, _ = finished
    out = copy(finished, tmp_path)
    damaged = damage(out, how)
    r = invoke("report", out)
    assert r.exit_code != 0 and "Traceback" not in r.output
    assert "lost or changed data" in r.output and "--resume" in r.output, r.output
    if damaged != "*":
        assert damaged in r.output
    assert not (out / "report").exists()
    ok("run", exp, "--out", out, "--resume")     # the command it names repairs it
    ok("report", out)


def test_an_unreadable_record_is_an_unfinished_run(finished, tmp_path):
    exp, ref = finished
    out = copy(finished, tmp_path)
    rec = sorted((out / "runs").glob("*.json"))[0]
    rec.write_text("{bad")
    r = invoke("report", out)
    assert r.exit_code != 0 and f"{rec.name}: unreadable" in r.output, r.output
    assert "--resume` runs that run again" in r.output
    r = ok("run", exp, "--out", out, "--resume")
    assert "is not a run record dcsim wrote" in r.output
    assert_same_dataset(ref, out)


@pytest.mark.parametrize("link", ["runs", "requests", "report", "file"])
def test_links_in_a_results_folder_are_refused_before_anything_changes(finished, tmp_path,
                                                                        link):
    exp, _ = finished
    out = copy(finished, tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    if link == "file":
        victim = sorted((out / "timeseries").rglob("*.parquet"))[0]
        shutil.move(victim, outside / victim.name)
        victim.symlink_to(outside / victim.name)
        named = victim.relative_to(out)
    else:
        if (out / link).exists():
            shutil.move(out / link, outside / link)
        else:
            (outside / link).mkdir()
        (out / link).symlink_to(outside / link, target_is_directory=True)
        named = Path(link)
    listing = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    for args in (["run", exp, "--out", out, "--overwrite"], ["run", exp, "--out", out,
                                                              "--resume"], ["report", out]):
        r = invoke(*args)
        assert r.exit_code != 0 and "Traceback" not in r.output, r.output
        assert f"{named} is a symbolic link" in r.output, r.output
        assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == listing
    assert (outside / "keep.txt").read_text() == "mine"


def test_a_code_id_that_does_not_hash_its_own_section_is_not_trusted(finished, tmp_path):
    """#47 item 5: a record whose ``code_id`` was edited to today's, over the parts of other
    code, is a changed run: --resume refuses it, naming what differs."""
    exp, _ = finished
    out = copy(finished, tmp_path)
    rec_path = sorted((out / "runs").glob("*.json"))[0]
    rec = json.loads(rec_path.read_text())
    rec["code"]["dcsim"]["source_hash"] = "0" * 64    # other code ...
    rec_path.write_text(json.dumps(rec))               # ... under today's code_id
    r = invoke("run", exp, "--out", out, "--resume")
    assert r.exit_code != 0 and "dcsim's code changed since 1 finished run" in r.output, \
        r.output
    r = ok("run", exp, "--out", out, "--rerun-changed")
    assert "rerunning 1 finished run(s) whose code changed" in r.output
