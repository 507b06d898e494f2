"""The mean and 95 % interval the report scripts print."""

from __future__ import annotations

import math

import pandas as pd

from dcsim.results.stats import interval_stats, mean_ci


def test_mean_ci_is_the_student_t_interval():
    # values 1, 2, 3: mean 2, sd 1, t(0.975, 2) = 4.302653; half = 4.302653 / sqrt(3)
    m, h, n = mean_ci(pd.Series([1.0, 2.0, None, 3.0]))
    assert (m, n) == (2.0, 3)
    assert math.isclose(h, 4.302652729749464 / math.sqrt(3), rel_tol=1e-12)


def test_mean_ci_with_too_few_values():
    m, h, n = mean_ci(pd.Series([0.5]))
    assert (m, n) == (0.5, 1) and math.isnan(h)
    m, h, n = mean_ci(pd.Series([], dtype=float))
    assert n == 0 and math.isnan(m) and math.isnan(h)


def test_ci_cell_formats_mean_and_half_width():
    from dcsim.results.stats import ci_cell

    assert ci_cell([]) == "—"
    assert ci_cell([0.5]) == "0.50"
    m, h, _ = mean_ci(pd.Series([1.0, 2.0, 3.0]))
    assert ci_cell([1.0, 2.0, 3.0], 3) == f"{m:.3f} ± {h:.3f}"


def test_keys_named_like_the_aggregates_keep_their_groups():
    """A group key may be called "n", "sd" or "lo" (a swept key's column): the statistics
    still come out per group, under their own names."""
    frame = pd.DataFrame({"n": [1, 1, 2, 2], "sd": ["a", "a", "b", "b"],
                          "v": [1.0, 3.0, 5.0, 5.0]})
    out = interval_stats(frame, ["n", "sd"], "v")
    assert list(out.columns[:2]) == ["n", "sd"] and list(out["sd"]) == ["a", "b"]
    assert list(out["mean"]) == [2.0, 5.0]


def test_a_swept_key_ending_in_mean_runs_and_reports(tmp_path):
    """matrix: workload.duration.mean used to crash the end-of-run table (its column was
    "mean", a statistic's name): the column is now the whole path."""
    from click.testing import CliRunner

    from dcsim.cli import main

    cfg = tmp_path / "e.yaml"
    cfg.write_text(
        "name: e\nseed: 1\nseeds: 2\ntopology: {kind: flat, servers: 4, server: {cpu: 8, "
        "mem: 8}}\nworkload:\n  requests: 60\n  arrival: {process: poisson, rate: 5}\n"
        "  demand: {cpu: {dist: constant, value: 1}, mem: {dist: constant, value: 1}}\n"
        "  duration: {dist: exponential, mean: 1.0}\n"
        "matrix:\n  workload.duration.mean: [0.5, 1.0]\nallocators: [first_fit]\n")
    r = CliRunner().invoke(main, ["run", str(cfg), "--out", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    assert "workload_duration_mean" in pd.read_parquet(tmp_path / "out" / "summary.parquet")
    r = CliRunner().invoke(main, ["report", str(tmp_path / "out"), "--no-figures"])
    assert r.exit_code == 0, r.output


def test_a_large_mean_and_its_half_width_share_one_notation():
    from dcsim.results.stats import cell

    row = {"mean": 1.71e9, "half_width": 5.19118e8, "clipped": False}
    assert cell(row) == "1.71e+09 ± 0.52e+09"      # one exponent on both (dcsim run's too)
    assert cell({"mean": 0.5, "half_width": 0.0123, "clipped": False}) == "0.500 ± 0.012"
    assert cell({"mean": 2400.0, "half_width": 12.34, "clipped": False}) == "2400 ± 12"
