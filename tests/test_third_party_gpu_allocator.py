"""The GPU allocator template in plugins/dcsim-gpu-first-fit, installed and used as a third
party would (``mode: gpu``): like ``tests/test_third_party_plugin.py`` for the allocator
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
PLUGIN = ROOT / "plugins" / "dcsim-gpu-first-fit"
#: the labels of the plugin experiment's gpu_allocators
LABELS = {"fgd", "best_fit", "gpu_first_fit", "gpu_first_fit(prefer_used=False)"}


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """A folder holding the installed plugin, from a copy of its source (no build/ left here)."""
    return install_copy(PLUGIN, tmp_path_factory.mktemp("gpu_plugin"))


def run(site: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """``python *args`` in the repo root with the plugin's folder first on PYTHONPATH."""
    return run_with(site, ROOT, *args, **env)


def gpu_allocators(listing: str) -> list[str]:
    """The lines of the ``gpu_allocators:`` section of ``dcsim plugins``' output."""
    lines = listing.splitlines()
    start = lines.index("gpu_allocators:") + 1
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith(" ")),
               len(lines))
    return lines[start:end]


def test_installed_gpu_allocator_is_listed_with_its_package(site):
    """`dcsim plugins` lists gpu_first_fit among the GPU allocators, as provided by the
    dcsim-gpu-first-fit distribution, with its option; DCSIM_PLUGINS="" hides it."""
    done = run(site, "-m", "dcsim", "plugins")
    assert done.returncode == 0, done.stderr
    section = gpu_allocators(done.stdout)
    i = next(i for i, ln in enumerate(section) if ln.split()[:1] == ["gpu_first_fit"])
    assert "[dcsim-gpu-first-fit]" in section[i]
    assert section[i + 1].split() == ["prefer_used:", "bool", "=", "True"]
    hidden = run(site, "-m", "dcsim", "plugins", DCSIM_PLUGINS="")
    assert hidden.returncode == 0, hidden.stderr
    names = {ln.split()[0] for ln in gpu_allocators(hidden.stdout) if not ln.startswith("    ")}
    assert "gpu_first_fit" not in names and {"fgd", "best_fit"} <= names


def test_its_experiment_runs_and_reports_every_allocator(site, tmp_path):
    """The plugin's experiment.yaml runs through the CLI; the summary has one row per
    allocator and seed, every allocator of a seed saw the same pods, and the plugin's rows
    placed GPU."""
    out = tmp_path / "out"
    done = run(site, "-m", "dcsim", "run", str(PLUGIN / "experiment.yaml"), "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    summary = pd.read_parquet(out / "summary.parquet")
    summary["allocator"] = summary["allocator"].astype(str)
    assert set(summary["allocator"]) == LABELS
    assert summary.groupby("allocator").size().eq(2).all()       # seeds: 2
    assert summary.groupby("seed", observed=True)["received"].nunique().eq(1).all()
    mine = summary[summary["allocator"].str.startswith("gpu_first_fit")]
    assert mine["acceptance_ratio"].between(0, 1).all()
    assert mine["alloc_gpu_share"].gt(0).all() and mine["alloc_gpu_share"].le(1).all()
    pods = pd.read_parquet(out / "pods", columns=["allocator", "accepted", "node"])
    assert pods.loc[pods["accepted"], "node"].ge(0).all()


@pytest.mark.slow  # the plugin's own suite in a subprocess; the default suite checks its use
def test_its_own_tests_pass_against_the_installed_copy(site):
    """The package's tests pass when run against the installed copy."""
    done = run(site, "-m", "pytest", str(PLUGIN / "tests"), "-q", "-p", "no:cacheprovider")
    assert done.returncode == 0, done.stdout + done.stderr
    assert " passed" in done.stdout
