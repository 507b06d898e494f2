"""Honest statistics and figures (issue #33, parts 3 and 4), on cases computed by hand:
a paired difference that is the same in every seed has no interval and no star; values the
same in every seed say so; fewer than 3 seeds get one note; an interval is clipped to the
metric's range and the cell says so; seeds that replicate nothing (a replayed trace,
deterministic allocators) get one note; the figures draw nothing outside a ratio's [0, 1];
the page opens with the paired difference and names no absolute path."""

from __future__ import annotations

import html
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats

from dcsim.report import describe, make_report, paired
from dcsim.results.stats import (
    cell,
    clip_note,
    few_seeds_note,
    headline,
    interval_stats,
    metric_range,
    replicates_nothing,
    seed_notes,
)
from tests.helpers.cli import invoke, ok

ROOT = Path(__file__).resolve().parents[1]

FEW = ("Intervals from fewer than 3 seeds are not informative, and these come from 2 seeds "
       "(over 2 values the 95 % interval is ±12.7 standard errors): run 3 or more (--seeds) "
       "before reading them.")
REPLAY_TRACE = ("Seeds do not replicate anything here: the workload replays a trace as it is "
                "(no resample) and every allocator gave the same summary row in every seed, "
                "so the 3 seeds are 3 copies of one run and there is no interval to give; one "
                "seed is enough.")
REPLAY = ("Seeds do not replicate anything here: every allocator gave the same summary row "
          "in every seed, so the 3 seeds are 3 copies of one run and there is no interval to "
          "give; one seed is enough.")
CLIPPED = "† interval clipped to the metric's range [0, 1]; the cell gives it as [low, high]"


def rows(values: dict[str, list[float]], metric: str = "acceptance_ratio") -> pd.DataFrame:
    """A summary: one row per (allocator, seed), ``values[allocator][seed]``."""
    return pd.DataFrame([{"allocator": a, "seed": s, metric: v}
                         for a, vs in values.items() for s, v in enumerate(vs)])


def only(df: pd.DataFrame, allocator: str) -> pd.Series:
    return df[df["allocator"] == allocator].iloc[0]


# ------------------------------------------------------------------------------ by hand
def test_a_paired_difference_the_same_in_every_seed_has_no_interval_and_no_star():
    # best_fit is first_fit − 0.004 in every seed: zero variance, not "significant"
    f = rows({"first_fit": [0.500, 0.600, 0.700], "best_fit": [0.496, 0.596, 0.696]})
    p = only(paired(f, "acceptance_ratio", "first_fit", []), "best_fit")
    assert bool(p["identical"]) and p["half_width"] == 0.0 and p["n"] == 3
    assert p["mean"] == pytest.approx(-0.004) and not bool(p["excludes_zero"])
    assert cell(p, flag=True) == "-0.004 (identical in every seed)"
    # each allocator's own values vary: an ordinary interval, 0.6 ± t(2) 0.1 / √3
    d = only(describe(f, "acceptance_ratio", []), "first_fit")
    half = stats.t.ppf(0.975, 2) * 0.1 / np.sqrt(3)
    # the half-width to 2 significant digits, the mean to its place
    assert not bool(d["identical"]) and cell(d) == f"0.60 ± {half:.2f}" == "0.60 ± 0.25"


def test_values_the_same_in_every_seed_say_so_in_the_level_table():
    f = rows({"a": [0.3, 0.3, 0.3], "b": [0.2, 0.3, 0.4]})
    d = describe(f, "acceptance_ratio", [])
    a = only(d, "a")
    assert bool(a["identical"]) and a["half_width"] == 0.0
    assert (a["ci_low"], a["ci_high"]) == (0.3, 0.3)
    assert cell(a) == "0.300 (identical in every seed)"
    assert "±" not in cell(a) and cell(only(d, "b")) == "0.30 ± 0.25"
    # one seed is not "identical in every seed": the mean alone
    assert cell(only(describe(rows({"a": [0.3]}), "acceptance_ratio", []), "a")) == "0.300"


def test_an_interval_outside_a_ratios_range_is_clipped_and_marked():
    # two seeds 0.2 and 0.9: mean 0.55, half-width t(1) · 0.35 = 4.447, far outside [0, 1]
    f = rows({"a": [0.2, 0.9]})
    r = only(describe(f, "acceptance_ratio", []), "a")
    assert r["half_width"] == pytest.approx(stats.t.ppf(0.975, 1) * 0.35)
    assert bool(r["clipped"]) and (r["ci_low"], r["ci_high"]) == (0.0, 1.0)
    assert cell(r) == "0.55 [0.00, 1.00] †"
    assert clip_note((0.0, 1.0)) == CLIPPED
    # a metric with no range is not clipped
    r = only(describe(f, "acceptance_ratio", [], bounds=None), "a")
    assert not bool(r["clipped"]) and cell(r) == "0.6 ± 4.4"
    # clipped by less than the last digit shown: the interval as it prints, unmarked
    r = {"mean": 0.95, "half_width": 0.0504, "clipped": True, "ci_low": 0.8996,
         "ci_high": 1.0}
    assert cell(r) == "0.950 ± 0.050"
    # clipped by more: the bracket, with the digits of its own half-width
    r = only(describe(rows({"a": [0.9999, 1.0, 1.0]}), "acceptance_ratio", []), "a")
    assert bool(r["clipped"]) and r["ci_high"] == 1.0
    assert cell(r) == "0.999967 [0.999823, 1.000000] †"


def test_a_paired_interval_is_clipped_to_the_range_of_a_difference():
    # differences +1 and −1 of a ratio: mean 0, the interval clipped to [−1, 1]
    f = rows({"base": [0.0, 1.0], "x": [1.0, 0.0]})
    p = only(paired(f, "acceptance_ratio", "base", []), "x")
    assert bool(p["clipped"]) and (p["ci_low"], p["ci_high"]) == (-1.0, 1.0)
    assert cell(p, flag=True) == "0.0 [-1.0, 1.0] †"


def test_the_declared_ranges():
    assert metric_range("acceptance_ratio", "loss") == (0.0, 1.0)
    assert metric_range("acceptance_last20") == (0.0, 1.0)
    assert metric_range("util_cpu", "loss") == (0.0, 1.0)          # unit: fraction
    assert metric_range("util_bw_core", "loss") == (0.0, 1.0)
    assert metric_range("util_mem", "queue") == (0.0, 1.0)
    assert metric_range("mean_fragment_rate", "vm_online") == (0.0, 1.0)
    assert metric_range("fragment_rate", "vm_online", "timeseries") == (0.0, 1.0)
    assert metric_range("fr_after", "reschedule") == (0.0, 1.0)
    assert metric_range("mean_footprint", "loss") is None
    assert metric_range("mean_slowdown", "queue") is None


def test_fewer_than_3_seeds_is_one_note():
    assert few_seeds_note(2, 2) == FEW
    assert few_seeds_note(1, 1) == (
        "Intervals from fewer than 3 seeds are not informative, and these come from 1 seed "
        "(1 seed gives no interval at all): run 3 or more (--seeds) before reading them.")
    assert few_seeds_note(2, 5).startswith("Intervals from fewer than 3 seeds are not "
                                           "informative, and some of these come from 2 seeds")
    assert few_seeds_note(3, 3) is None
    f = rows({"a": [0.5, 0.6], "b": [0.55, 0.7]})
    assert seed_notes(f, ["allocator"]) == [FEW]
    assert seed_notes(rows({"a": [0.5, 0.6, 0.7]}), ["allocator"]) == []


def replay_summary(vary: bool = False) -> pd.DataFrame:
    """What a trace replay writes: the same row in every seed but for the wall clock."""
    f = pd.DataFrame([{"experiment": "t", "allocator": a, "seed": s, "received": 1482,
                       "accepted": acc, "acceptance_ratio": acc / 1482, "util_cpu": 0.9996,
                       "mean_decision_s": 1e-6 * (1 + s), "wall_time_s": 0.3 + s,
                       "run_id": f"{a}-s{s}"}
                      for a, acc in (("first_fit", 128), ("best_fit", 123)) for s in range(3)])
    if vary:
        f.loc[f.index[-1], "accepted"] = 124
    return f


def test_seeds_that_replicate_nothing_are_one_note():
    f = replay_summary()
    assert replicates_nothing(f, ["allocator"], "loss")
    trace = {"workload": {"trace": {"path": "x.csv", "resample": False}}}
    assert seed_notes(f, ["allocator"], "loss", trace) == [REPLAY_TRACE]
    assert seed_notes(f, ["allocator"], "loss", {"workload": {"requests": 5}}) == [REPLAY]
    resampled = {"workload": {"trace": {"path": "x.csv", "resample": True}}}
    assert seed_notes(f, ["allocator"], "loss", resampled) == [REPLAY]
    # vm_online's workload is under vm:
    assert seed_notes(f, ["allocator"], "vm_online",
                      {"vm": {"workload": {"trace": {"path": "x"}}}}) == [REPLAY_TRACE]
    # one allocator whose rows differ between seeds: the seeds replicate something
    assert not replicates_nothing(replay_summary(vary=True), ["allocator"], "loss")
    assert seed_notes(replay_summary(vary=True), ["allocator"], "loss", trace) == []
    # one seed replicates nothing to begin with: no note of that kind, but what more
    # seeds of a replayed trace would change
    assert not replicates_nothing(f[f["seed"] == 0], ["allocator"], "loss")
    assert seed_notes(f[f["seed"] == 0], ["allocator"], "loss", trace) == [
        "One seed, so no interval: the workload replays a trace as it is (no resample), so "
        "more seeds would differ only through a randomised allocator."]


def test_the_headline_of_dcsim_run_says_the_same():
    table, notes = headline(replay_summary(), ["allocator"], mode="loss",
                            config={"workload": {"trace": {"path": "x.csv"}}})
    assert table.splitlines()[2:] == [
        "first_fit  0.086 (identical in every seed)  1.000 (identical in every seed)      3",
        "best_fit   0.083 (identical in every seed)  1.000 (identical in every seed)      3"]
    assert notes == [REPLAY_TRACE]
    table, notes = headline(rows({"a": [0.2, 0.9]}), ["allocator"], mode="loss")
    assert table.splitlines()[2] == "a          0.55 [0.00, 1.00] †      2"
    assert notes == [CLIPPED, FEW]


def test_interval_stats_is_per_group_in_order_of_appearance():
    f = pd.DataFrame({"k": ["z", "a", "z", "a", "m"], "v": [1.0, 2.0, 3.0, np.nan, 5.0]})
    s = interval_stats(f, ["k"], "v")
    assert list(s["k"]) == ["z", "a", "m"] and list(s["n"]) == [2, 1, 1]
    assert s["half_width"].iloc[0] == pytest.approx(stats.t.ppf(0.975, 1) * 1.0)
    assert s["half_width"].iloc[1:].isna().all() and not s["identical"].any()


# ------------------------------------------------------------------------------ figures
@pytest.fixture
def drawn(monkeypatch):
    """The figures' matplotlib Figure objects instead of files."""
    pytest.importorskip("matplotlib")
    from dcsim.report import figures

    kept = []

    def keep(fig, out, stem):
        kept.append(fig)
        return []

    monkeypatch.setattr(figures, "_save", keep)
    return kept


def drawn_values(fig, axis: str) -> np.ndarray:
    """Every coordinate along ``axis`` ("x" or "y") the figure's lines, error bars and bands
    draw (axis lines at 0 aside)."""
    from matplotlib.collections import LineCollection, PolyCollection

    out = []
    for ax in fig.axes:
        for line in ax.lines:
            v = np.asarray(line.get_xdata() if axis == "x" else line.get_ydata(), float)
            if not (v.size == 2 and np.all(v == 0)):
                out.append(v)
        for c in ax.collections:
            if isinstance(c, LineCollection | PolyCollection):
                for seg in (c.get_segments() if isinstance(c, LineCollection)
                            else [p.vertices for p in c.get_paths()]):
                    out.append(np.asarray(seg)[:, 0 if axis == "x" else 1])
    v = np.concatenate(out) if out else np.zeros(0)
    return v[np.isfinite(v)]


def test_the_figures_draw_no_interval_outside_a_ratios_range(drawn, tmp_path):
    from dcsim.report import figures

    f = rows({"a": [0.2, 0.9], "b": [0.95, 1.0]})
    d = describe(f, "acceptance_ratio", [])
    figures.metric_figure(d, "acceptance_ratio", "acceptance_ratio", None, [], tmp_path)
    x = drawn_values(drawn[-1], "x")         # one row per allocator: intervals along x
    assert x.size and x.min() >= 0.0 and x.max() <= 1.0
    # against a numeric sweep: bands
    g = pd.concat([f.assign(load=1.0), f.assign(load=2.0)])
    d = describe(g, "acceptance_ratio", ["load"])
    figures.metric_figure(d, "acceptance_ratio", "acceptance_ratio", "load", ["load"],
                          tmp_path)
    y = drawn_values(drawn[-1], "y")
    assert y.size and y.min() >= 0.0 and y.max() <= 1.0
    # the time series' band, a fraction
    ts = pd.DataFrame([{"allocator": "a", "seed": s, "time": t, "util_cpu": v}
                       for s, v in enumerate([0.05, 0.95]) for t in range(10)])
    figures.timeseries_figure(ts, "util_cpu", "util_cpu", tmp_path, "", bounds=(0.0, 1.0))
    y = drawn_values(drawn[-1], "y")
    assert y.min() >= 0.0 and y.max() <= 1.0


def test_the_paired_figure_has_a_zero_line_and_fills_what_excludes_zero(drawn, tmp_path):
    from dcsim.report import figures

    f = rows({"base": [0.50, 0.60, 0.70], "up": [0.55, 0.68, 0.74],
              "same": [0.50, 0.60, 0.70]})
    p = paired(f, "acceptance_ratio", "base", [])
    figures.paired_figure({"acceptance_ratio": p}, {"acceptance_ratio": "acceptance_ratio"},
                          "base", None, [], tmp_path, allocators=["base", "up", "same"])
    (ax,) = drawn[-1].axes
    assert any(np.all(np.asarray(ln.get_xdata(), float) == 0) for ln in ax.lines)  # x = 0
    assert [t.get_text() for t in ax.get_yticklabels()] == ["up", "same"]  # top down
    faces = [ln.get_markerfacecolor() for ln in ax.lines if ln.get_marker() in figures.MARKERS]
    assert faces[0] != "white" and faces[1] == "white"   # up excludes 0, same does not
    # a sweep that is not numeric: points side by side, still a zero line
    g = pd.concat([f.assign(kind="u"), f.assign(kind="z")])
    p = paired(g, "acceptance_ratio", "base", ["kind"])
    figures.paired_figure({"acceptance_ratio": p}, {"acceptance_ratio": "acceptance_ratio"},
                          "base", "kind", ["kind"], tmp_path)
    (ax,) = drawn[-1].axes
    assert [t.get_text() for t in ax.get_xticklabels()] == ["u", "z"]
    assert any(np.all(np.asarray(ln.get_ydata(), float) == 0) for ln in ax.lines)


# ------------------------------------------------------------------------------ the report
def fake_results(tmp_path: Path, summary: pd.DataFrame, config: dict) -> Path:
    """A results folder as `dcsim run` leaves it, without running anything."""
    out = tmp_path / "results_folder"
    out.mkdir()
    summary.to_parquet(out / "summary.parquet")
    (out / "experiment.yaml").write_text(yaml.safe_dump({"name": "t", "mode": "loss",
                                                         **config}))
    (out / "manifest.json").write_text(json.dumps({"experiment": "t", "runs": []}))
    return out


def test_the_report_of_a_deterministic_replay(tmp_path):
    out = fake_results(tmp_path, replay_summary(),
                       {"workload": {"trace": {"path": "../traces/x.csv"}}})
    res = invoke("report", out, "--baseline", "first_fit", "--metric", "acceptance_ratio",
                 "--no-figures", "--out", tmp_path / "rep")
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[1] == f"note: {REPLAY_TRACE}"
    assert "best_fit   -0.003 (identical in every seed)" in lines
    assert not [x for x in lines if x.endswith(" *")] and "± 0.000" not in res.output
    page = (tmp_path / "rep" / "report.html").read_text()
    assert REPLAY_TRACE in page and "identical in every seed" in page
    paired_csv = pd.read_csv(tmp_path / "rep" / "paired.csv")
    assert paired_csv["identical"].all() and not paired_csv["excludes_zero"].any()


def test_the_page_opens_with_the_paired_difference_and_names_no_absolute_path(tmp_path):
    pytest.importorskip("matplotlib")
    f = rows({"a": [0.2, 0.9], "b": [0.25, 0.95]})
    f["util_cpu"] = [0.5, 0.6, 0.55, 0.65]
    out = fake_results(tmp_path, f, {"workload": {"requests": 10}})
    rep = make_report(out, baseline="a", out=tmp_path / "rep")
    assert rep.figures[0][1][0].stem == "paired_difference"
    page = (tmp_path / "rep" / "report.html").read_text()
    body = page[page.index("<body>"):]
    assert body.index("<img") < body.index("<table")    # the figure before any table
    assert 'alt="paired difference against a' in body[:body.index("<table")]
    assert str(tmp_path) not in page and os.sep + "results_folder" not in page
    assert "<td>results folder</td><td>results_folder</td>" in page
    assert html.escape(FEW) in page and html.escape(CLIPPED) in page
    stats_csv = pd.read_csv(tmp_path / "rep" / "stats.csv")
    assert stats_csv["ci_low"].min() >= 0 and stats_csv["ci_high"].max() <= 1


# ------------------------------------------------------------------------------ as found
def test_trace_replay_end_to_end(tmp_path):
    """The user's case: a trace replayed with 3 seeds and two deterministic allocators."""
    (tmp_path / "experiments").mkdir()
    os.symlink(ROOT / "traces", tmp_path / "traces")
    exp = tmp_path / "experiments" / "trace.yaml"
    exp.write_text(yaml.safe_dump({
        "name": "trace_replay", "seed": 1,
        "topology": {"kind": "flat", "servers": 8, "server": {"cpu": 32, "mem": 128}},
        "workload": {"trace": {"path": "../traces/azure2017_dev_slice.csv", "limit": 1000}},
        "warmup": {"time": 600}, "allocators": ["first_fit", "best_fit"]}))
    out = tmp_path / "out"
    run = ok("run", exp, "--seeds", 3, "--out", out)
    assert "(identical in every seed)" in run.output and "± 0.000" not in run.output
    assert f"note: {REPLAY_TRACE}" in run.output.splitlines()
    rep = ok("report", out, "--baseline", "first_fit", "--no-figures", "--out",
             tmp_path / "rep")
    table = rep.output.split("paired difference against first_fit")[1]
    assert "(identical in every seed)" in table
    assert not [x for x in table.splitlines() if x.endswith(" *")]
    assert f"note: {REPLAY_TRACE}" in rep.output.splitlines()


@pytest.mark.slow
def test_the_readme_demo_report(tmp_path):
    """README's first command at its size (AHAB λ = 12, 2 seeds × 300 VCs) then its
    report: the page opens with the paired difference against OKTOPUS, no interval of a
    ratio leaves [0, 1], the 2 seeds get their note, the page names no absolute path."""
    pytest.importorskip("matplotlib")
    out = tmp_path / "ahab_lambda12_small"
    ok("run", ROOT / "experiments" / "ahab_lambda12.yaml", "--seeds", 2, "--set",
       "workload.requests=300", "--out", out)
    rep = make_report(out, baseline="oktopus")
    assert rep.figures[0][1][0].stem == "paired_difference"
    assert rep.notes == [FEW]
    for m in ("acceptance_ratio", "util_cpu"):
        assert rep.stats[m]["ci_low"].min() >= 0 and rep.stats[m]["ci_high"].max() <= 1
    page = (out / "report" / "report.html").read_text()
    body = page[page.index("<body>"):]
    assert body.index('alt="paired difference against oktopus') < body.index("<table")
    assert str(tmp_path) not in page
