"""The template plugin in plugins/dcsim-power-of-d, installed and used as a third party would.

pip installs it (not editable) into a temporary folder that only the subprocesses here put on
``PYTHONPATH``, so the environment running the tests never sees it.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from tests.helpers.pip import install_copy, run_with

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = ROOT / "plugins" / "dcsim-power-of-d"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """A folder holding the installed plugin, from a copy of its source (no build/ left here)."""
    return install_copy(PLUGIN, tmp_path_factory.mktemp("plugin"))


def run(site: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """``python *args`` in the repo root with the plugin's folder first on PYTHONPATH."""
    return run_with(site, ROOT, *args, **env)


def test_installed_plugin_is_listed_with_its_package(site):
    """`dcsim plugins` lists power_of_d as provided by the dcsim-power-of-d distribution."""
    done = run(site, "-m", "dcsim", "plugins")
    assert done.returncode == 0, done.stderr
    line = next(ln for ln in done.stdout.splitlines() if ln.split()[:1] == ["power_of_d"])
    assert "[dcsim-power-of-d]" in line


def test_empty_dcsim_plugins_hides_it(site):
    """DCSIM_PLUGINS="" loads no installed plugin: only the built-ins are listed."""
    done = run(site, "-m", "dcsim", "plugins", DCSIM_PLUGINS="")
    assert done.returncode == 0, done.stderr
    assert "power_of_d" not in done.stdout
    assert "first_fit" in done.stdout


def test_its_experiment_runs_and_reports_it(site, tmp_path):
    """The plugin's experiment.yaml runs, and the summary has a power_of_d(d=2) row."""
    out = tmp_path / "out"
    done = run(site, "-m", "dcsim", "run", str(PLUGIN / "experiment.yaml"), "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    summary = pd.read_parquet(out / "summary.parquet")
    assert {"first_fit", "random", "power_of_d(d=2)"} <= set(summary["allocator"])
    ratio = summary.loc[summary["allocator"] == "power_of_d(d=2)", "acceptance_ratio"]
    assert len(ratio) > 0 and ratio.between(0, 1).all() and ratio.gt(0).all()
    # dcsim report needs nothing from the plugin: its rows are reported like the others'
    rep = run(site, "-m", "dcsim", "report", str(out), "--baseline", "first_fit",
              "--no-figures", DCSIM_PLUGINS="")
    assert rep.returncode == 0, rep.stderr
    assert re.search(r"^power_of_d\(d=2\)\s+-?\d", rep.stdout, re.M), rep.stdout


def test_its_own_tests_pass_against_the_installed_copy(site):
    """The package's tests pass when run against the installed copy."""
    done = run(site, "-m", "pytest", str(PLUGIN / "tests"), "-q", "-p", "no:cacheprovider")
    assert done.returncode == 0, done.stdout + done.stderr
    assert " passed" in done.stdout
