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


@pytest.mark.parametrize(("name", "points"), [("nara_table1", 12), ("nara_optical", 18)])
def test_shipped_experiments_validate(name, points):
    """Each Nara experiment file is valid and expands to the paper's design: 5 rollouts of
    every baseline on every (request set, topology) or optical topology (the 2023 ones on
    both wirings)."""
    out = run("validate", EXPERIMENTS / f"{name}.yaml").output
    assert f"{points} sweep point(s), 5 seed(s)" in out
    assert all(b in out for b in BASELINES)


def test_table1_points_pair_topology_with_episode_length_and_holding_bound():
    """The 12 zipped points: every set on every topology, with the paper's episode lengths,
    the uniform set's H = 30 / 480 / 1920 and the authors' H for the trace-derived sets
    (topologies/*/requests/*RequestTest.txt of zawaki/nara_revision)."""
    d = yaml.safe_load((EXPERIMENTS / "nara_table1.yaml").read_text())
    (rows,) = d["matrix"].values()
    got = {(w["name"], topo): (n, h) for w, topo, n, h in rows}
    assert len(got) == 12
    for (_, topo), (n, _) in got.items():
        assert n == {"alpha": 128, "beta": 128, "gamma": 896, "delta": 2048}[topo]
    topos = ("alpha", "beta", "gamma", "delta")
    assert [got["uniform", t][1] for t in topos] == [30, 30, 480, 1920]
    assert [got["azure", t][1] for t in topos] == [24, 24, 384, 1536]
    assert [got["alibaba", t][1] for t in topos] == [36, 36, 576, 2304]


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
    for name, h in (("azure", 24), ("alibaba", 36)):  # the authors' sets: integers 0..100
        g = by[name]
        for c in ("cpu", "mem"):
            assert g[c].between(0, 100).all() and (g[c] % 1 == 0).all()
        assert g["duration"].between(1, h).all()
    assert (by["azure"][["cpu", "mem"]] >= 1).all().all()  # Azure: 0 -> 1
    assert set(by["alibaba"]["cpu"]) <= {6.0, 12.0, 25.0, 37.0, 50.0, 100.0}  # x / 800 x 50
    assert s["util_cpu_last50"].between(0, 1).all() and s["util_mem_last50"].between(0, 1).all()
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
    assert "per-request, last 50 %" in rep


def test_learned_experiment_has_table1_points_and_each_sets_policy():
    """nara_learned.yaml runs Table 1's 12 points unchanged (so its baseline rows equal
    nara_table1's) with, on each, the policy trained on that request set."""
    out = run("validate", EXPERIMENTS / "nara_learned.yaml").output
    assert "12 sweep point(s), 5 seed(s)" in out and "nara" in out
    table1 = yaml.safe_load((EXPERIMENTS / "nara_table1.yaml").read_text())
    learned = yaml.safe_load((EXPERIMENTS / "nara_learned.yaml").read_text())
    (rows1,) = table1["matrix"].values()
    (key,), (rows,) = learned["matrix"].keys(), learned["matrix"].values()
    assert key == next(iter(table1["matrix"])) + ",allocators.0.options.checkpoint"
    assert [r[:4] for r in rows] == rows1
    assert all(r[4] == f"alpha_{r[0]['name']}" for r in rows)
    assert learned["allocators"][0] == {"name": "nara", "label": "nara"}
    assert learned["allocators"][1:] == table1["allocators"]
    skip = ("name", "description", "matrix", "allocators")
    assert {k: v for k, v in learned.items() if k not in skip} == \
        {k: v for k, v in table1.items() if k not in skip}


def test_reduced_learned_table_end_to_end(tmp_path):
    """The learned experiment on alpha, 1 rollout of 30 requests: nara runs with the set's
    checkpoint (recorded per run) and the report prints its row."""
    d = yaml.safe_load((EXPERIMENTS / "nara_learned.yaml").read_text())
    (key,) = d["matrix"]
    rows = [r for r in d["matrix"][key] if r[1] == "alpha"]
    for r in rows:
        r[2] = 30
        if "trace" in r[0]:
            r[0]["trace"]["path"] = str((EXPERIMENTS / r[0]["trace"]["path"]).resolve())
    d["matrix"][key] = rows
    d["allocators"] = d["allocators"][:2]  # nara and tetris
    cfg = tmp_path / "nara_learned_alpha.yaml"
    cfg.write_text(yaml.safe_dump(d, sort_keys=False))
    out = tmp_path / "nara_learned"
    run("run", cfg, "--out", out, "--seeds", "1")
    s = pd.read_parquet(out / "summary.parquet")
    assert set(s["allocator"]) == {"nara", "tetris"} and len(s) == 6
    ck = [c for c in s.columns if "checkpoint" in c]
    assert len(ck) == 1
    assert {(w, c) for w, c in zip(s["workload"], s[ck[0]], strict=True)} == \
        {(w, f"alpha_{w}") for w in ("uniform", "azure", "alibaba")}
    rep = subprocess.run([sys.executable, str(EXPERIMENTS / "nara_report.py"), "--results",
                          str(tmp_path)], capture_output=True, text=True, check=True).stdout
    t1 = rep.split("### Table 1 with the learned policy")[1].split("###")[0]
    assert "| nara | " in t1 and "| tetris | " in t1 and "alibaba alpha" in t1
    assert "| nara | " in rep.split("### Table 2 with the learned policy")[1]


def ablation_report(tmp_path, name: str, config: dict, seeds: int) -> str:
    """Run the reduced ``config`` into ``tmp_path/name`` and return ``nara_report.py
    --ablation``'s output over ``tmp_path``."""
    cfg = tmp_path / f"{name}.yaml"
    cfg.write_text(yaml.safe_dump(config, sort_keys=False))
    run("run", cfg, "--out", tmp_path / name, "--seeds", str(seeds))
    return subprocess.run([sys.executable, str(EXPERIMENTS / "nara_report.py"), "--results",
                           str(tmp_path), "--ablation"], capture_output=True, text=True,
                          check=True).stdout


AUTHORS_TETRIS = {"demand": "full", "eligible": "any_free", "ties": "name"}
AUTHORS_SEARCH = {**AUTHORS_TETRIS, "anchor": "carried", "search": "authors",
                  "path_weight": "free"}


@pytest.mark.parametrize(("name", "tetris_anchor", "pair_paths", "term"), [
    ("nara_table1", "first", "all", "authors_misaligned"),
    ("nara_learned", "first", "all", "authors_misaligned"),
    ("nara_optical", "carried", "authors_sticky", "authors_raw"),
    ("nara_optical_scaled", "carried", "authors_sticky", "authors_raw"),
    ("nara_optical_learned", "carried", "authors_sticky", "authors_raw"),
    ("nara_optical_learned_scaled", "carried", "authors_sticky", "authors_raw")])
def test_paper_experiments_run_the_baselines_as_their_authors_did(name, tetris_anchor,
                                                                   pair_paths, term):
    """Each Nara experiment selects the authors' behaviours (docs/reference/allocators.md);
    the 2021 one keeps App. D.1's Tetris anchor, which the paper states, and the code of its
    tables (Sept 2021: every pair needs a path); the 2023 ones the code's (nara_revision is
    the journal version's code, April 2022: pair_paths). The 2023 ones score with the
    authors' arithmetic (authors_raw: node terms / 100, raw free channels); on the 2021
    topologies it is the same as authors_misaligned
    (tests/allocators/multi/test_tetris_score.py)."""
    d = yaml.safe_load((EXPERIMENTS / f"{name}.yaml").read_text())
    opts = {a["label"]: a.get("options", {}) for a in d["allocators"] if isinstance(a, dict)}
    opts |= {a: {} for a in d["allocators"] if isinstance(a, str)}
    assert opts["tetris"] | AUTHORS_TETRIS == opts["tetris"]
    for a in ("tetris", "nalb", "nulb"):
        assert opts[a]["bandwidth_term"] == term
    assert opts["tetris"]["anchor"] == tetris_anchor
    for a in ("tetris", "nalb", "nulb", "random_multi"):
        assert opts[a].get("pair_paths", "all") == pair_paths
    for search in ("nalb", "nulb"):
        assert opts[search] | AUTHORS_SEARCH == opts[search]
    assert opts["random_multi"]["eligible"] == "any_free"


def test_ablation_sets_back_one_behaviour_at_a_time(tmp_path):
    """nara_authors_ablation: every '+authors-<option>_<value>' variant differs from its
    '+authors' row in exactly that option; a reduced run feeds the report's ablation table."""
    d = yaml.safe_load((EXPERIMENTS / "nara_authors_ablation.yaml").read_text())
    from dcsim.plugins import get_allocator_class

    rows = {a["label"]: (a["name"], a["options"]) for a in d["allocators"]}
    variants = [label for label in rows if "-" in label]
    assert len(variants) == 18  # 6 each for tetris, nalb and nulb
    for label in variants:
        base, option = label.split("-", 1)
        name, opts = rows[label]
        ref = rows[base][1]
        changed = {k for k in ref if ref[k] != opts.get(k)}
        both = {"demand", "bandwidth_term"}
        assert changed == both if option == "first_server_score_dcsim" else len(changed) == 1
        fields = get_allocator_class(name).Options.model_fields
        for k in changed:  # set back to dcsim's behaviour (or, for Tetris, the code's anchor)
            assert opts[k] in (fields[k].default, "none", "remaining", "carried", "index")
            assert option == "first_server_score_dcsim" or option.startswith(k.split("_")[0])
    d["matrix"] = {k: [r for r in v if r[1] == "alpha"][:1] for k, v in d["matrix"].items()}
    d["allocators"] = [a for a in d["allocators"]
                       if a["label"] in ("nulb", "nulb+authors", "nulb+authors-search_bfs")]
    (key,) = d["matrix"]
    d["matrix"][key][0][2] = 30
    rep = ablation_report(tmp_path, "nara_authors_ablation", d, seeds=1)
    assert "| nulb+authors | " in rep and "| nulb+authors-search_bfs | " in rep
    assert "(+" in rep or "(-" in rep


@pytest.mark.parametrize("name", [
    "nara_table1", "nara_learned", "nara_authors_ablation", "nara_authors_ablation_gamma",
    "nara_optical", "nara_optical_scaled", "nara_optical_learned",
    "nara_optical_learned_scaled"])
def test_paper_experiments_run_on_the_authors_clock(name):
    """Every Nara experiment that reproduces a paper runs the authors' environment's clock
    (their code is the same environment for the 2021 and the 2023 tables)."""
    d = yaml.safe_load((EXPERIMENTS / f"{name}.yaml").read_text())
    assert d["departures"] == "after_first_step" and d["capacity"] == "wait"


def test_clock_ablation_pairs_both_orders_on_table1_points(tmp_path):
    """nara_clock_ablation: Table 1's alpha/beta points and baselines under both departure
    orders; a reduced run feeds the report's clock table (before -> after, paired)."""
    d = yaml.safe_load((EXPERIMENTS / "nara_clock_ablation.yaml").read_text())
    t1 = yaml.safe_load((EXPERIMENTS / "nara_table1.yaml").read_text())
    key = next(iter(t1["matrix"]))
    assert d["matrix"]["departures"] == ["before_arrivals", "after_first_step"]
    assert d["matrix"][key] == [r for r in t1["matrix"][key] if r[1] in ("alpha", "beta")]
    assert d["allocators"] == t1["allocators"][:4] and d["seeds"] == 20
    d["matrix"][key] = d["matrix"][key][:1]
    d["matrix"][key][0][2] = 30
    d["allocators"] = d["allocators"][:1]
    rep = ablation_report(tmp_path, "nara_clock_ablation", d, seeds=2)
    row = rep.split("### The authors' clock")[1].split("| tetris | ")[1]
    assert "→" in row and "±" in row


def _report_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("nara_report", EXPERIMENTS / "nara_report.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_spread_says_how_often_five_seeds_lie_as_far_as_the_paper():
    """--spread: a paper value at dcsim's mean is always within reach of a 5-seed mean
    (P = 1); one beyond every 5-seed mean never is (P = 0); one in between gets the share of
    5-seed means at least that far, on both sides."""
    spread = _report_module().spread
    vals = [0.2, 0.3, 0.4, 0.5, 0.6] * 4  # mean 0.4, 20 seeds
    df = pd.DataFrame({"workload": "alibaba", "preset": "beta", "allocator": "nalb",
                       "acceptance_last20": vals, "seed": range(20)})

    def p_of(value):
        paper = pd.DataFrame({"set": ["alibaba"], "topology": ["beta"],
                              "allocator": ["nalb"], "paper": [value]})
        row = spread(df, paper, draws=4000).splitlines()[-1]
        return row, row.split("|")[-2].strip()

    row, p = p_of(0.4)
    assert "| alibaba beta, nalb | 20 | 0.400 |" in row and p == "1.0000"
    assert p_of(0.61)[1] == "< 0.0001"  # a mean of 5 of these is at most 0.6
    mid_hi, mid_lo = float(p_of(0.48)[1]), float(p_of(0.32)[1])
    assert 0.01 < mid_hi < 0.9 and abs(mid_hi - mid_lo) < 0.05  # two-sided, symmetric data
    # cells of the paper without dcsim rows are left out
    paper = pd.DataFrame({"set": ["azure"], "topology": ["beta"], "allocator": ["nalb"],
                          "paper": [0.5]})
    assert len(spread(df, paper).splitlines()) == 2


def test_seed_spread_experiment_runs_table1_as_shipped(tmp_path):
    """nara_seed_spread.yaml: nara_table1's four paper baselines, settings and alpha/beta
    points, with 100 seeds; the paper's values file names every one of them. A reduced run
    (alpha, 6 seeds of 20 requests) feeds the report's --spread table."""
    t1 = yaml.safe_load((EXPERIMENTS / "nara_table1.yaml").read_text())
    sp = yaml.safe_load((EXPERIMENTS / "nara_seed_spread.yaml").read_text())
    assert sp["seeds"] == 100
    for k in ("capacity", "departures", "seed"):
        assert sp[k] == t1[k]
    assert sp["allocators"] == [a for a in t1["allocators"] if a != "best_fit_multi"]
    (key,), (rows,) = sp["matrix"].keys(), sp["matrix"].values()
    (rows1,) = t1["matrix"].values()
    assert key == next(iter(t1["matrix"]))
    assert rows == [r for r in rows1 if r[1] in ("alpha", "beta")]
    paper = pd.read_csv(EXPERIMENTS / "paper" / "nara2021_table1.csv", comment="#")
    for w, topo, *_ in rows:
        for a in ("tetris", "nalb", "nulb", "random_multi"):
            assert len(paper[(paper.set == w["name"]) & (paper.topology == topo)
                             & (paper.allocator == a)]) == 1
    sp["matrix"][key] = [r for r in rows if r[1] == "alpha"]
    for r in sp["matrix"][key]:
        r[2] = 20
        if "trace" in r[0]:
            r[0]["trace"]["path"] = str((EXPERIMENTS / r[0]["trace"]["path"]).resolve())
    cfg = tmp_path / "spread.yaml"
    cfg.write_text(yaml.safe_dump(sp, sort_keys=False))
    run("run", cfg, "--out", tmp_path / "nara_seed_spread", "--seeds", "6")
    rep = subprocess.run([sys.executable, str(EXPERIMENTS / "nara_report.py"), "--results",
                          str(tmp_path), "--spread"], capture_output=True, text=True,
                         check=True).stdout
    table = [ln for ln in rep.splitlines() if ln.startswith("| ") and "alpha" in ln]
    assert len(table) == 12 and all("| 6 |" in ln for ln in table)
    assert not any("beta" in ln for ln in rep.splitlines()[3:])
