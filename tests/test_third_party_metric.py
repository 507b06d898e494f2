"""The template metric plugin in plugins/dcsim-rack-imbalance, installed and used as a third
party would: pip installs it (not editable) into a temporary folder that only the
subprocesses here put on ``PYTHONPATH``; ``dcsim plugins`` lists it with its columns, an
experiment selecting it writes them with the right values, a clash with a built-in column
is refused, a broken copy is left out with one warning, and ``dcsim report`` tables it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.helpers.pip import install_copy, run_with

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = ROOT / "plugins" / "dcsim-rack-imbalance"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    return install_copy(PLUGIN, tmp_path_factory.mktemp("metric"))


def run(site: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return run_with(site, ROOT, *args, **env)


def hand_case(tmp_path: Path, **extra) -> Path:
    """Two racks of one 4-cpu server, first fit, three requests: 2 cpu at 0 (rack 0), 4 cpu
    at 4 (rack 1), 1 cpu at 8 (rack 0). Rack shares (0.5, 0) on [0, 4): CV 1; (0.5, 1) on
    [4, 8): CV 1/3; time average to the last arrival 2/3, largest 1."""
    (tmp_path / "trace.csv").write_text("arrival,duration,cpu\n0,100,2\n4,100,4\n8,1,1\n")
    cfg = {"name": "hand", "seed": 0,
           "topology": {"kind": "fat_tree", "pods": 1, "racks": 2, "hosts": 1,
                        "server": {"cpu": 4}, "host_link": 10},
           "workload": {"trace": {"path": "trace.csv"}},
           "allocators": ["first_fit"],
           "metrics": {"sample_every": 1, "plugins": ["rack_imbalance"]}}
    cfg.update(extra)
    f = tmp_path / "hand.yaml"
    f.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return f


def test_dcsim_plugins_lists_it_with_its_package_and_columns(site):
    done = run(site, "-m", "dcsim", "plugins", "--kind", "metric")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.split()[:1] == ["rack_imbalance"])
    assert "[dcsim-rack-imbalance]" in lines[head]
    body = "\n".join(lines[head + 1:head + 5])
    assert "resource: str = 'cpu'" in body
    assert "column rack_imbalance_mean (summary, float64): time-averaged" in body
    assert "column rack_imbalance (timeseries, float64):" in body
    md = run(site, "-m", "dcsim", "plugins", "--kind", "metric", "--markdown")
    assert "| `rack_imbalance_mean` | summary | `float64` |" in md.stdout


def test_a_hand_worked_run_has_the_right_values_and_the_report_shows_them(site, tmp_path):
    out = tmp_path / "out"
    done = run(site, "-m", "dcsim", "run", str(hand_case(tmp_path)), "--out", str(out))
    assert done.returncode == 0, done.stderr
    s = pd.read_parquet(out / "summary.parquet")
    assert s["rack_imbalance_mean"].iloc[0] == pytest.approx(2 / 3)
    assert s["rack_imbalance_max"].iloc[0] == pytest.approx(1.0)
    ts = pd.read_parquet(out / "timeseries").sort_values("time")
    # sampled before each arrival: nothing held, then rack 0 half full, then both racks
    assert ts["rack_imbalance"].tolist() == pytest.approx([0.0, 1.0, 1 / 3])
    done = run(site, "-m", "dcsim", "report", str(out), "--no-figures")
    assert done.returncode == 0, done.stderr
    tables = (out / "report" / "tables.md").read_text()
    assert "## rack_imbalance_mean: mean ± 95 % interval over seeds" in tables
    assert "| first_fit | 0.667 |" in tables


@pytest.mark.slow  # another run (the hand-worked one stays in the default suite)
def test_a_flat_topology_is_balanced(site, tmp_path):
    f = hand_case(tmp_path, topology={"kind": "flat", "servers": 2, "server": {"cpu": 4}})
    out = tmp_path / "out"
    done = run(site, "-m", "dcsim", "run", str(f), "--out", str(out))
    assert done.returncode == 0, done.stderr
    s = pd.read_parquet(out / "summary.parquet")
    assert s["rack_imbalance_mean"].iloc[0] == 0.0
    assert (pd.read_parquet(out / "timeseries")["rack_imbalance"] == 0.0).all()


@pytest.mark.slow  # the template's experiment, a longer run
def test_its_experiment_runs(site, tmp_path):
    out = tmp_path / "out"
    done = run(site, "-m", "dcsim", "run", str(PLUGIN / "experiment.yaml"), "--out", str(out),
               "--seeds", "1")
    assert done.returncode == 0, done.stderr
    s = pd.read_parquet(out / "summary.parquet").set_index("allocator")
    # first fit fills the low racks first; random spreads: it is the more balanced
    assert s.loc["random", "rack_imbalance_mean"] < s.loc["first_fit", "rack_imbalance_mean"]


def test_a_bad_option_is_refused_at_plan_time(site, tmp_path):
    f = hand_case(tmp_path, metrics={"plugins": [{"name": "rack_imbalance",
                                                  "options": {"resource": "gpu"}}]})
    done = run(site, "-m", "dcsim", "validate", str(f))
    assert done.returncode != 0
    assert ("hand.yaml: metrics.plugins.0: options.resource: the servers have no 'gpu' "
            "(they have cpu) (metric 'rack_imbalance')") in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow  # more dcsim processes (tests/test_metric_plan.py checks clashes in-process)
def test_a_clash_with_a_built_in_column_is_refused(site, tmp_path):
    """A copy of the template whose summary column is named like a built-in one."""
    src = tmp_path / "clash"
    import shutil

    shutil.copytree(PLUGIN, src, ignore=shutil.ignore_patterns("build", "*.egg-info",
                                                              "__pycache__"))
    module = src / "dcsim_rack_imbalance" / "__init__.py"
    module.write_text(module.read_text().replace('"rack_imbalance_max"', '"mean_concurrent"'))
    clash = install_copy(src, tmp_path / "clash_site")
    done = run(clash, "-m", "dcsim", "run", str(hand_case(tmp_path)), "--out",
               str(tmp_path / "out"))
    assert done.returncode != 0
    assert ("metrics.plugins.0: metric 'rack_imbalance' declares summary column "
            "'mean_concurrent', which is a built-in column of summary (loss mode); a "
            "metric's columns must be new names") in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "out" / "summary.parquet").exists()


def test_a_broken_copy_is_left_out_with_one_warning(tmp_path):
    """An installed metric package whose module fails to import: one warning line, the
    other commands work, and an experiment naming it says which package failed."""
    site = tmp_path / "site"
    dist = site / "dcsim_rack_imbalance-0.1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: dcsim-rack-imbalance\n"
                                   "Version: 0.1.0\n")
    (dist / "entry_points.txt").write_text("[dcsim]\nrack_imbalance = dcsim_rack_imbalance\n")
    (site / "dcsim_rack_imbalance").mkdir()
    (site / "dcsim_rack_imbalance" / "__init__.py").write_text(
        (PLUGIN / "dcsim_rack_imbalance" / "__init__.py").read_text()
        .replace("import numpy as np", "import numpy as np\nimport dcsim_no_such_module"))
    done = run(site, "-m", "dcsim", "plugins", "--kind", "metric")
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("warning: plugin 'rack_imbalance' failed to load "
                             "(ModuleNotFoundError: No module named "
                             "'dcsim_no_such_module'); left out") == 1
    done = run(site, "-m", "dcsim", "validate", str(hand_case(tmp_path)))
    assert done.returncode != 0
    assert "metrics.plugins.0.name: unknown metric 'rack_imbalance'" in done.stderr
    assert "plugin 'rack_imbalance' failed to load" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow  # the template's own tests, in a subprocess against the installed copy
def test_its_own_tests_pass_against_the_installed_copy(site):
    done = run(site, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0",
               str(PLUGIN / "tests"))
    assert done.returncode == 0, done.stdout + done.stderr
