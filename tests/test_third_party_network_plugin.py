"""The multi-server, network-aware plugin in plugins/dcsim-widest-path, installed and used as
a third party would: like ``tests/test_third_party_plugin.py`` for the single-server
template, pip installs it (not editable) into a temporary folder that only the subprocesses
here put on ``PYTHONPATH``, so the environment running the tests never sees it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pandas as pd
import pytest

from tests.helpers.pip import install_copy, run_with

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = ROOT / "plugins" / "dcsim-widest-path"
#: the labels of the plugin experiment's allocators
LABELS = {"random_multi", "best_fit_multi", "tetris", "widest_path",
          "widest_path(locality=False)"}


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """A folder holding the installed plugin, from a copy of its source (no build/ left here)."""
    return install_copy(PLUGIN, tmp_path_factory.mktemp("network_plugin"))


def run(site: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """``python *args`` in the repo root with the plugin's folder first on PYTHONPATH."""
    return run_with(site, ROOT, *args, **env)


def test_installed_plugin_is_listed_with_its_package_and_options(site):
    """`dcsim plugins` lists widest_path as provided by dcsim-widest-path, with its own
    option and the multi-server options it inherits."""
    done = run(site, "-m", "dcsim", "plugins")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.split()[:1] == ["widest_path"])
    assert "[dcsim-widest-path]" in lines[at]
    options = [ln.split(":")[0].strip() for ln in lines[at + 1:at + 6]]
    assert options == ["reservation", "k_paths", "eligible", "pair_paths", "locality"]


def test_empty_dcsim_plugins_hides_it(site):
    done = run(site, "-m", "dcsim", "plugins", DCSIM_PLUGINS="")
    assert done.returncode == 0, done.stderr
    assert "widest_path" not in done.stdout and "tetris" in done.stdout


def test_its_experiment_runs_and_reserves_bandwidth(site, tmp_path):
    """The plugin's experiment.yaml runs; every allocator has rows, the plugin's requests
    span servers and reserve bandwidth on the rack uplinks."""
    out = tmp_path / "out"
    done = run(site, "-m", "dcsim", "run", str(PLUGIN / "experiment.yaml"), "--out", str(out),
               "--seeds", "1", "--set", "workload.requests=200")   # the how-to runs it whole
    assert done.returncode == 0, done.stdout + done.stderr
    summary = pd.read_parquet(out / "summary.parquet")
    assert set(summary["allocator"]) == LABELS
    mine = summary[summary["allocator"].str.startswith("widest_path")]
    assert mine["acceptance_ratio"].between(0, 1).all() and mine["acceptance_ratio"].gt(0).all()
    assert mine["util_bw_rack"].gt(0).all() and mine["mean_footprint"].gt(0).all()


def test_its_own_tests_pass_against_the_installed_copy(site):
    done = run(site, "-m", "pytest", str(PLUGIN / "tests"), "-q", "-p", "no:cacheprovider")
    assert done.returncode == 0, done.stdout + done.stderr
    assert " passed" in done.stdout
