"""``dcsim report`` and :mod:`dcsim.report`: the statistics by hand, the report on the output
of every mode (a third-party allocator's: tests/test_third_party_plugin.py), clear errors,
and the HTML page in a real browser (headless Chromium)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats

from dcsim.report import describe, load, make_report, paired
from tests.helpers.cli import invoke, ok

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------ by hand
def frame() -> pd.DataFrame:
    # two sweep points, three seeds, allocators a (the baseline) and b
    rows = []
    a = {1: [0.50, 0.60, 0.70], 2: [0.40, 0.45, 0.65]}
    b = {1: [0.55, 0.68, 0.74], 2: [0.41, 0.50, 0.66]}
    for load_ in (1, 2):
        for s in range(3):
            rows.append({"allocator": "a", "seed": s, "load": load_, "m": a[load_][s]})
            rows.append({"allocator": "b", "seed": s, "load": load_, "m": b[load_][s]})
    return pd.DataFrame(rows)


def test_describe_is_the_mean_and_student_t_interval():
    d = describe(frame(), "m", ["load"])
    row = d[(d["allocator"] == "a") & (d["load"] == 1)].iloc[0]
    v = np.array([0.50, 0.60, 0.70])
    half = stats.t.ppf(0.975, 2) * v.std(ddof=1) / np.sqrt(3)
    assert row["mean"] == pytest.approx(0.6) and row["half_width"] == pytest.approx(half)
    assert row["n"] == 3 and row["ci_low"] == pytest.approx(0.6 - half)


def test_the_paired_interval_is_the_interval_of_the_seed_by_seed_differences():
    p = paired(frame(), "m", "a", ["load"])
    assert list(p["allocator"]) == ["b", "b"] and list(p["load"]) == [1, 2]
    # load 1: differences 0.05, 0.08, 0.04 -> mean 0.05667, sd 0.02082
    d = np.array([0.05, 0.08, 0.04])
    half = stats.t.ppf(0.975, 2) * d.std(ddof=1) / np.sqrt(3)
    r = p.iloc[0]
    assert r["mean"] == pytest.approx(d.mean()) and r["half_width"] == pytest.approx(half)
    assert bool(r["excludes_zero"]) is True   # 0.0567 ± 0.0517
    # far narrower than the unpaired intervals, which overlap
    sep = describe(frame(), "m", ["load"])
    assert half < sep[sep["load"] == 1]["half_width"].min() / 4
    # load 2: differences 0.01, 0.05, 0.01: the interval includes 0
    assert bool(p.iloc[1]["excludes_zero"]) is False


def test_only_seeds_both_ran_are_paired():
    f = frame()
    f = f[~((f["allocator"] == "b") & (f["seed"] == 2))]
    p = paired(f, "m", "a", ["load"])
    assert list(p["n"]) == [2, 2]
    assert p.iloc[0]["mean"] == pytest.approx((0.05 + 0.08) / 2)


def test_keys_a_matrix_entry_sets_together_key_the_rows_once():
    """Nara's matrix sets the topology and its episode length together: the table's rows
    are keyed by the topology alone, the request set on the columns."""
    from dcsim.report.tables import grid, row_params

    rows = [{"allocator": a, "seed": s, "set": w, "preset": p, "requests": n, "m": 0.1 * s}
            for a in ("x", "y") for s in range(2) for w in ("u", "z")
            for p, n in (("alpha", 128), ("gamma", 896))]
    f = pd.DataFrame(rows)
    params = ["set", "preset", "requests"]
    assert row_params(f, params, "set") == ["preset"]
    assert row_params(f, params, "requests") == ["set"]   # preset follows requests
    g = grid(describe(f, "m", params), params, "set", rows=row_params(f, params, "set"))
    assert g[0] == ["preset", "allocator", "set=u", "set=z"] and len(g) == 5
    assert "—" not in {c for r in g for c in r}


# ------------------------------------------------------------------------------ every mode
def reduced(tmp_path: Path, name: str, sets: dict, keep: int = 2) -> Path:
    raw = yaml.safe_load((ROOT / "experiments" / f"{name}.yaml").read_text())
    if isinstance(raw.get("matrix"), dict):
        raw["matrix"] = {k: v[:keep] for k, v in raw["matrix"].items()}
    folder = tmp_path / "experiments"
    folder.mkdir(exist_ok=True)
    if not (tmp_path / "traces").exists():
        os.symlink(ROOT / "traces", tmp_path / "traces")
    p = folder / f"{name}.yaml"
    p.write_text(yaml.safe_dump(raw, sort_keys=False))
    out = tmp_path / name
    ok("run", p, "--out", out, "--seeds", 2, *[a for k, v in sets.items()
                                               for a in ("--set", f"{k}={v}")])
    return out


@pytest.fixture(scope="module")
def outputs(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("report")
    return {
        "loss": reduced(tmp, "quickstart", {"workload.requests": 1000}),
        "queue": reduced(tmp, "deeprm_load_sweep", {"workload.jobsets": 1}),
        "vm_online": reduced(tmp, "vm_online_azure", {"vm.workload.trace.limit": 200,
                                                       "vm.mapping.hosts": 6}),
        "reschedule": reduced(tmp, "vmr_static", {}, keep=1),
    }


@pytest.mark.parametrize("mode", ["loss", "queue", "vm_online", "reschedule"])
def test_the_report_runs_on_every_mode(outputs, tmp_path, mode):
    r = load(outputs[mode])
    assert r.mode == mode and len(r.summary) and r.seeds == 2
    base = r.allocators[0]
    res = invoke("report", outputs[mode], "--baseline", base, "--out", tmp_path / "rep",
                 "--no-figures")
    assert res.exit_code == 0, res.output
    assert "mean ± 95 % interval over seeds" in res.output
    assert f"paired difference against {base}" in res.output
    for f in ("tables.md", "stats.csv", "paired.csv", "report.html"):
        assert (tmp_path / "rep" / f).is_file()
    s = pd.read_csv(tmp_path / "rep" / "stats.csv")
    assert set(s["allocator"]) == set(r.allocators) and (s["n"] == 2).all()
    for p in r.params:  # the sweep parameters are columns of every table
        assert p in s.columns and p in r.summary.columns
        if r.has("timeseries"):
            assert p in r.timeseries.columns


@pytest.mark.slow
@pytest.mark.parametrize("mode, expect", [
    ("queue", {"metric_mean_slowdown", "cdf_slowdown", "timeseries_util_cpu"}),
    ("vm_online", {"metric_mean_fragment_rate", "timeseries_fragment_rate",
                   "heatmap_cpu_mem"}),
    ("reschedule", {"metric_fr_after", "metric_migrations"}),
])
def test_every_mode_gets_its_figures(outputs, tmp_path, mode, expect):
    pytest.importorskip("matplotlib")
    rep = make_report(outputs[mode], out=tmp_path / "rep")
    stems = {p.stem for _t, paths in rep.figures for p in paths}
    assert expect <= stems, stems
    assert all(p.stat().st_size > 1000 for _t, paths in rep.figures for p in paths)


def test_load_returns_the_tables_with_the_sweep_parameters(outputs):
    r = load(outputs["queue"])
    assert r.params and r.params[0] in r.requests.columns   # jobs/, with the swept load
    assert list(r.requests["seed"].unique()) == [0, 1]
    assert not isinstance(r.requests["allocator"].dtype, pd.CategoricalDtype)


def test_figures_and_the_html_page(outputs, tmp_path):
    pytest.importorskip("matplotlib")
    rep = make_report(outputs["loss"], out=tmp_path / "rep", baseline="random")
    names = {p.name for _t, paths in rep.figures for p in paths}
    assert {"metric_acceptance_ratio.png", "metric_acceptance_ratio.svg"} <= names
    assert any(n.startswith("timeseries_") for n in names)
    assert any(n.startswith("heatmap_cpu_mem") for n in names)
    page = (tmp_path / "rep" / "report.html").read_text()
    assert page.count("<img src=\"data:image/png;base64,") == len(rep.figures)
    assert page.count("<table") == 1 + 2 * len(rep.metrics)


def test_without_matplotlib_the_tables_come_and_the_extra_is_named(outputs, tmp_path,
                                                                   monkeypatch):
    from dcsim.report import figures

    monkeypatch.setattr(figures, "available", lambda: False)
    res = invoke("report", outputs["loss"], "--out", tmp_path / "rep")
    assert res.exit_code == 0
    assert 'figures need matplotlib: pip install "dcsim[plot]"' in res.output
    assert not (tmp_path / "rep" / "figures").exists()


@pytest.mark.parametrize("args, message", [
    (["--metric", "speed"], r"--metric: no metric 'speed' in .*; the metrics are "
                            r"received, accepted, acceptance_ratio"),
    (["--baseline", "worst_fit"], r"--baseline: no allocator 'worst_fit'; the allocators "
                                  r"are random, first_fit, best_fit"),
    (["--by", "rate"], r"--by: 'rate' is not a swept parameter of quickstart; the "
                       r"experiment sweeps nothing"),
])
def test_bad_names_are_one_line_listing_what_exists(outputs, args, message):
    res = invoke("report", outputs["loss"], *args, "--no-figures")
    assert res.exit_code == 1
    assert re.search(message, res.output), res.output
    assert "Traceback" not in res.output and len(res.output.strip().splitlines()) == 1


def test_a_folder_that_is_not_results_is_one_line(tmp_path):
    res = invoke("report", tmp_path)
    assert res.exit_code == 1
    assert "not the output of dcsim run (no summary.parquet in it)" in res.output


# ------------------------------------------------------------------------------ a browser
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (installed by .ci/run)")
def test_the_html_page_in_headless_chromium(outputs, tmp_path):
    """Every image of the page decodes in a real browser and every table is there; the
    paired-difference figure is the first thing shown, above every table; the page names
    no absolute path. The screenshot is kept for checking by eye
    (report-screenshot.png)."""
    pytest.importorskip("matplotlib")
    rep = make_report(outputs["queue"], out=tmp_path / "rep", baseline="sjf")
    page = (tmp_path / "rep" / "report.html").read_text()
    assert str(outputs["queue"].resolve()) not in page and str(tmp_path) not in page
    probe = tmp_path / "rep" / "probe.html"
    probe.write_text(page.replace("</body>", (
        "<script>window.addEventListener('load', () => { const im = "
        "Array.from(document.images); document.body.setAttribute('data-images', "
        "im.filter(i => i.complete && i.naturalWidth > 0).length + '/' + im.length); "
        "document.body.setAttribute('data-tables', document.querySelectorAll('table')"
        ".length); const top = e => e.getBoundingClientRect().top; "
        "document.body.setAttribute('data-first', im[0].alt.split(':')[0]); "
        "document.body.setAttribute('data-first-above', String(top(im[0]) < "
        "Math.min(...Array.from(document.querySelectorAll('table')).map(top)))); "
        "});</script></body>")))
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--virtual-time-budget=10000"]
    dom = subprocess.run([CHROMIUM, *flags, "--dump-dom", probe.as_uri()],
                         capture_output=True, text=True, timeout=120).stdout
    n = len(rep.figures)
    assert n >= 3
    assert f'data-images="{n}/{n}"' in dom
    assert f'data-tables="{1 + 2 * len(rep.metrics)}"' in dom
    assert 'data-first="paired difference against sjf"' in dom
    assert 'data-first-above="true"' in dom
    shot = tmp_path / "rep" / "report-screenshot.png"
    subprocess.run([CHROMIUM, *flags, "--window-size=1200,2400", f"--screenshot={shot}",
                    probe.as_uri()], capture_output=True, timeout=120)
    assert shot.stat().st_size > 10_000
