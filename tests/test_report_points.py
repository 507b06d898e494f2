"""The report page on a small sweep (issue #48, parts 5 and 6): the paired figure's legend
says what a filled and a hollow marker mean, the per-point figures (CDF, heat map, time
series) draw a panel for every sweep point titled with it (at most a bounded number, the
others chosen with --point), every table cell has one number format, the machine-readable
files keep every digit, and --correction holm marks and counts significance after Holm."""

from __future__ import annotations

import html
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import yaml

from dcsim.report import load, make_report
from tests.helpers.cells import parts
from tests.helpers.cli import invoke, ok
from tests.helpers.configs import small_experiment

POINTS = ["offered_load=0.7", "offered_load=1.1"]
#: a fat tree under `capacity: wait`: requests wait (a CDF of wait), two offered loads
CFG = small_experiment("points", seed=5, seeds=3, requests=300, pods=1, racks=2, hosts=2,
                       warmup={"requests": 30}, metrics={"sample_every": 20}, capacity="wait",
                       allocators=["random", "first_fit", "best_fit"],
                       matrix={"workload.duration.offered_load": [0.7, 1.1]})
PER_POINT = ("cdf_wait", "heatmap_cpu_mem", "timeseries_util_cpu")


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("points")
    (tmp / "exp.yaml").write_text(yaml.safe_dump(CFG, sort_keys=False))
    ok("run", tmp / "exp.yaml", "--out", tmp / "out")
    return tmp / "out"


def report_with_figures(results: Path, out: Path, monkeypatch, **kw):
    """The report, and its matplotlib Figure objects by file stem (saved as usual)."""
    pytest.importorskip("matplotlib")
    from dcsim.report import figures

    kept: dict[str, object] = {}
    save = figures._save

    def keep(fig, folder, stem):
        kept[stem] = fig
        return save(fig, folder, stem)

    monkeypatch.setattr(figures, "_save", keep)
    return make_report(results, out=out, **kw), kept


@pytest.fixture(scope="module")
def drawn(results, tmp_path_factory):
    mp = pytest.MonkeyPatch()
    try:
        out = tmp_path_factory.mktemp("rep") / "rep"
        rep, figs = report_with_figures(results, out, mp, baseline="random")
    finally:
        mp.undo()
    return rep, figs, out


# ------------------------------------------------------------------------------ per point
def test_every_per_point_figure_has_a_panel_for_every_point(drawn):
    rep, figs, out = drawn
    assert set(PER_POINT) <= set(figs), sorted(figs)
    for stem in ("cdf_wait", "timeseries_util_cpu"):
        titles = [ax.get_title() for ax in figs[stem].axes]
        assert titles == POINTS, (stem, titles)
        assert "a panel per sweep point" in figs[stem].get_suptitle()
    # the heat map: a panel per allocator and point, titled with both
    titles = [ax.get_title() for ax in figs["heatmap_cpu_mem"].axes if ax.get_title()]
    assert titles == [f"{a}\n{p}" for p in POINTS for a in ("random", "first_fit", "best_fit")]
    # the page's captions name every point; no figure is of one point without saying so
    page = (out / "report.html").read_text()
    caps = re.findall(r"<figcaption>(.*?)</figcaption>", page)
    per_point = [c for c in caps if "sweep points" in c]
    assert len(per_point) == 3
    for c in per_point:
        assert "a panel for each of the 2 sweep points (offered_load=0.7; offered_load=1.1)" \
            in html.unescape(c)
    assert not [c for c in caps if " at offered_load=" in c]


def test_the_panels_hold_each_points_own_rows(drawn, results):
    """The panel of offered_load=0.7 draws the wait of that point's requests only."""
    _rep, figs, _out = drawn
    req = load(results).requests
    acc = req[req["accepted"]]
    for ax, load_ in zip(figs["cdf_wait"].axes, (0.7, 1.1), strict=True):
        drawn_max = max(float(np.nanmax(line.get_xdata())) for line in ax.lines)
        assert drawn_max == pytest.approx(acc.loc[acc["offered_load"] == load_, "wait"].max())


def test_point_chooses_the_points_drawn(results, tmp_path, monkeypatch):
    rep, figs = report_with_figures(results, tmp_path / "rep", monkeypatch,
                                    points=["offered_load=0.7"])
    for stem in ("cdf_wait", "timeseries_util_cpu"):
        (ax,) = figs[stem].axes
        assert ax.get_title().endswith("at offered_load=0.7") or \
            "at offered_load=0.7 " in ax.get_title()
    caps = [t for t, _p in rep.figures if "offered_load=0.7" in t]
    assert len(caps) == 3 and all("(chosen with --point, of 2)" in c for c in caps)
    assert not any("offered_load=1.1" in t for t, _p in rep.figures)


@pytest.mark.parametrize("args, message", [
    (["--point", "load=0.7"], r"^error: --point: 'load=0.7' is not PARAM=VALUE of a swept "
                              r"parameter; the swept ones are offered_load$"),
    (["--point", "offered_load=5"], r"^error: --point: no sweep point has offered_load=5; "
                                    r"the points are offered_load=0.7; offered_load=1.1$"),
])
def test_a_bad_point_is_one_line(results, tmp_path, args, message):
    res = invoke("report", results, *args, "--out", tmp_path / "rep")
    assert res.exit_code == 1
    assert re.search(message, res.output.strip()), res.output


def test_many_points_are_bounded_and_the_caption_says_how_to_choose():
    from dcsim.report import build

    loads = [round(0.1 * i, 1) for i in range(1, 21)]
    r = SimpleNamespace(params=["load"], name="t",
                        summary=pd.DataFrame({"load": loads, "allocator": "a"}))
    picked, note = build.choose_points(r, [])
    assert len(picked) == build.MAX_POINTS == 8
    assert picked[0] == {"load": 0.1} and picked[-1] == {"load": 2.0}
    assert note.startswith("a panel for 8 of the 20 sweep points, spread over them (load=0.1;")
    assert note.endswith("at most 8 are drawn: --point PARAM=VALUE (repeatable) chooses which")
    picked, note = build.choose_points(r, ["load=0.5", "load=1.5"])
    assert picked == [{"load": 0.5}, {"load": 1.5}]
    assert note == ("a panel for each of the 2 sweep points chosen with --point (of 20) "
                    "(load=0.5; load=1.5)")


# ------------------------------------------------------------------------------ the legend
def test_the_paired_legend_says_what_filled_and_hollow_mean(drawn):
    from matplotlib.collections import PathCollection

    from dcsim.report.figures import FILL_KEY, KEY_GREY

    rep, figs, _out = drawn
    fig = figs["paired_difference"]
    (key,) = fig.legends
    assert [t.get_text() for t in key.get_texts()] == list(FILL_KEY["none"])
    filled, hollow = key.legend_handles
    assert filled.get_markerfacecolor() == hollow.get_markeredgecolor() != "white"
    assert hollow.get_markerfacecolor() == "white" and filled.get_color() == KEY_GREY
    # the allocators' entries: each its colour and marker, all half filled alike
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    assert len(legends) == 1
    labels = [t.get_text() for t in legends[0].get_texts()]
    assert labels == ["first_fit", "best_fit"]
    handles = legends[0].legend_handles
    assert {h.get_fillstyle() for h in handles} == {"left"}
    assert len({h.get_marker() for h in handles}) == 2
    # the filled markers drawn are the significant differences, panel by panel
    for ax, (m, df) in zip(fig.axes, rep.paired.items(), strict=True):
        dots = sum(len(c.get_offsets()) for c in ax.collections
                   if isinstance(c, PathCollection))
        assert dots == int(df["significant"].sum()), m


def test_with_holm_the_key_and_the_star_say_so(results, tmp_path, monkeypatch):
    from dcsim.report.figures import FILL_KEY

    rep, figs = report_with_figures(results, tmp_path / "rep", monkeypatch,
                                    baseline="random", correction="holm")
    (key,) = figs["paired_difference"].legends
    assert [t.get_text() for t in key.get_texts()] == list(FILL_KEY["holm"])
    assert "significant at 5 % after Holm's correction" in rep.figures[0][0]
    page = (tmp_path / "rep" / "report.html").read_text()
    assert html.escape("* marks a difference significant at 5 % after Holm's correction") \
        in page


# ------------------------------------------------------------------------------ numbers
def cells(md: str) -> list[str]:
    out = []
    for line in md.splitlines():
        if line.startswith("| ") and not line.startswith("| allocator"):
            out += [c.strip() for c in line.strip("|").split(" | ")[1:]]
    return out


def test_every_cell_has_one_number_format(results, tmp_path):
    ok("report", results, "--baseline", "random", "--no-figures", "--out", tmp_path / "rep",
       "--metric", "acceptance_ratio", "--metric", "util_cpu", "--metric", "mean_decision_s")
    found = cells((tmp_path / "rep" / "tables.md").read_text())
    assert len(found) == 2 * 3 * 3 + 2 * 2 * 3
    for c in found:
        if "identical" in c or "±" not in c and "[" not in c:
            continue
        got = parts(c)
        assert len({(d, e) for _v, d, e in got}) == 1, c   # decimals and exponent shared


def test_the_csv_files_keep_every_digit(drawn):
    rep, _figs, out = drawn
    stats_csv = pd.read_csv(out / "stats.csv", float_precision="round_trip")
    expect = pd.concat(rep.stats.values(), ignore_index=True)
    pd.testing.assert_frame_equal(stats_csv, expect, check_exact=True, check_dtype=False)
    paired_csv = pd.read_csv(out / "paired.csv", float_precision="round_trip")
    expect = pd.concat(rep.paired.values(), ignore_index=True)
    pd.testing.assert_frame_equal(paired_csv, expect, check_exact=True, check_dtype=False)
    assert {"p_value", "p_adjusted", "significant"} <= set(paired_csv.columns)


# ------------------------------------------------------------------------------ Holm
COUNT = re.compile(r"^(\w+) − random: (\d+) of (\d+) above zero \((\d+) after Holm\), "
                   r"(\d+) below \((\d+) after Holm\)$")


def test_correction_holm_counts_before_and_after(results, tmp_path):
    res = ok("report", results, "--baseline", "random", "--no-figures", "--correction",
             "holm", "--out", tmp_path / "rep", "--metric", "util_cpu")
    assert ("util_cpu (fraction): paired difference against random (same seeds, same "
            "requests; * = significant at 5 % after Holm's correction over the allocators "
            "at each sweep point)") in res.output
    lines = [m.groups() for m in map(COUNT.match, res.output.splitlines()) if m]
    assert [g[0] for g in lines] == ["first_fit", "best_fit"]
    p = pd.read_csv(tmp_path / "rep" / "paired.csv")
    for alloc, up, n, up_holm, down, down_holm in lines:
        g = p[p["allocator"] == alloc]
        assert int(n) == g["p_value"].notna().sum() == 2
        assert int(up) == (g["excludes_zero"] & (g["mean"] > 0)).sum()
        assert int(down) == (g["excludes_zero"] & (g["mean"] < 0)).sum()
        assert int(up_holm) == (g["significant"] & (g["mean"] > 0)).sum() <= int(up)
        assert int(down_holm) == (g["significant"] & (g["mean"] < 0)).sum() <= int(down)
    assert ("(of the cells with an interval; above or below zero: the 95 % interval excludes "
            "0; after Holm: Holm's correction over each sweep point's 2 differences against "
            "random, one family)") in res.output
    # each point's family is adjusted on its own
    for _load, g in p.groupby("offered_load"):
        from dcsim.report.numbers import holm

        assert list(g["p_adjusted"]) == pytest.approx(list(holm(g["p_value"])))
    # the star is the adjusted one: a cell marked * is significant after Holm
    table = res.output.split("paired difference against random")[1]
    stars = sum(line.count(" *") for line in table.splitlines()
                if line.startswith(("first_fit ", "best_fit ")))
    assert stars == int(p["significant"].sum())


def test_without_a_correction_the_count_says_it_is_uncorrected(results, tmp_path):
    res = ok("report", results, "--baseline", "random", "--no-figures", "--out",
             tmp_path / "rep", "--metric", "util_cpu")
    assert "not corrected for the 2 comparisons at each sweep point: --correction holm " \
           "corrects them)" in res.output
    assert re.search(r"^first_fit − random: \d+ of 2 above zero, \d+ below$", res.output,
                     re.M)
    bad = invoke("report", results, "--correction", "sidak")
    assert bad.exit_code == 2 and "'sidak' is not one of 'none', 'holm', 'bonferroni'" \
        in bad.output
