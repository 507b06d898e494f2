"""The shipped Nara experiments: valid as they are, and a reduced Table 1 run end to end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from dcsim.cli import main

EXPERIMENTS = Path(__file__).parents[1] / "experiments"
BASELINES = {"tetris", "nalb", "nulb", "random_multi", "best_fit_multi"}


def run(*args):
    r = CliRunner().invoke(main, [str(a) for a in args])
    assert r.exit_code == 0, r.output + (r.stderr or "")
    return r


@pytest.mark.parametrize(("name", "points"), [("nara_table1", 12), ("nara_optical", 9)])
def test_shipped_experiments_validate(name, points):
    """Each Nara experiment file is valid and expands to the paper's design: 5 rollouts of
    every baseline on every (request set, topology) or optical topology."""
    out = run("validate", EXPERIMENTS / f"{name}.yaml").output
    assert f"{points} sweep point(s), 5 seed(s)" in out
    assert all(b in out for b in BASELINES)


def test_table1_points_pair_topology_with_episode_length_and_holding_bound():
    """The 12 zipped points: every set on every topology, with the paper's episode lengths
    and the uniform set's H = 30 / 480 / 1920."""
    d = yaml.safe_load((EXPERIMENTS / "nara_table1.yaml").read_text())
    (rows,) = d["matrix"].values()
    got = {(w["name"], topo): (n, h) for w, topo, n, h in rows}
    assert len(got) == 12
    for (_, topo), (n, _) in got.items():
        assert n == {"alpha": 128, "beta": 128, "gamma": 896, "delta": 2048}[topo]
    assert [got["uniform", t][1] for t in ("alpha", "beta", "gamma", "delta")] == \
        [30, 30, 480, 1920]


def reduced_table1(tmp_path: Path, requests: int) -> Path:
    """nara_table1 restricted to topology alpha with ``requests`` per episode."""
    d = yaml.safe_load((EXPERIMENTS / "nara_table1.yaml").read_text())
    (key,) = d["matrix"]
    rows = [r for r in d["matrix"][key] if r[1] == "alpha"]
    for r in rows:
        r[2] = requests
        if "trace" in r[0]:
            r[0]["trace"]["path"] = str((EXPERIMENTS / r[0]["trace"]["path"]).resolve())
    d["matrix"][key] = rows
    path = tmp_path / "nara_table1_alpha.yaml"
    path.write_text(yaml.safe_dump(d, sort_keys=False))
    return path


def test_reduced_table1_end_to_end(tmp_path):
    """Table 1 on alpha, 1 rollout of 40 requests: every baseline on every request set, with
    the sets' demands as documented in docs/howto/nara-workloads.md."""
    out = tmp_path / "nara_table1"
    run("run", reduced_table1(tmp_path, 40), "--out", out, "--seeds", "1")
    s = pd.read_parquet(out / "summary.parquet")
    assert len(s) == 15 and set(s["allocator"]) == BASELINES
    assert set(s["workload"]) == {"uniform", "azure", "alibaba"}
    assert (s["requests"] == 40).all() and (s["received"] == 40).all()
    assert s["acceptance_last20"].between(0, 1).all() and (s["accepted"] > 0).all()
    r = pd.read_parquet(out / "requests")
    by = {w: g for w, g in r.groupby("workload")}
    u = by["uniform"]
    assert u["cpu"].between(1, 50).all() and (u["cpu"] % 1 == 0).all()
    assert u["duration"].between(1, 30).all() and u["bandwidth"].between(0.1, 1.0).all()
    az = by["azure"]  # Azure 2017 cores are 1, 2, 4, 8: x 50 capped at 100
    assert set(az["cpu"]) <= {50.0, 100.0} and az["mem"].max() <= 100
    assert az["duration"].between(1, 7).all()
    al = by["alibaba"]
    assert al["cpu"].max() <= 100 and al["mem"].max() <= 100 and al["duration"].max() <= 19
    # common random numbers: every allocator of a set sees the same requests
    first = r[r["allocator"] == "tetris"].set_index(["workload", "id"])["cpu"]
    other = r[r["allocator"] == "nulb"].set_index(["workload", "id"])["cpu"]
    pd.testing.assert_series_equal(first.sort_index(), other.sort_index())
    # the documented report reads these results: every baseline in Tables 1 and 2
    rep = subprocess.run([sys.executable, str(EXPERIMENTS / "nara_report.py"), "--results",
                          str(tmp_path)], capture_output=True, text=True, check=True).stdout
    t1 = rep.split("### Table 1")[1].split("###")[0]
    assert all(f"| {a} | " in t1 for a in BASELINES) and "uniform alpha" in t1
    assert "| tetris | " in rep.split("### Table 2")[1]
