"""A power model from an installed package, like an allocator (issue #38): a tiny
distribution written here (OpenDC's cubic model), pip-installed offline into a temporary
folder that only the subprocesses put on ``PYTHONPATH``, listed by ``dcsim plugins`` and
used by ``power.server.model`` in an experiment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.helpers.pip import install_into

ROOT = Path(__file__).resolve().parents[1]

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "dcsim-cubic-power"
version = "0.1.0"
dependencies = ["dcsim"]

[project.entry-points.dcsim]
cubic_power = "dcsim_cubic_power"
"""

MODULE = '''\
"""OpenDC's cubic power model: idle + (peak - idle) * u**3."""

import numpy as np
from pydantic import NonNegativeFloat

from dcsim import hookimpl
from dcsim.power import PowerModel


class CubicPower(PowerModel):
    name = "cubic"
    description = "idle_w + (peak_w - idle_w) * u**3"

    class Options(PowerModel.Options):
        idle_w: NonNegativeFloat
        peak_w: NonNegativeFloat

    def power(self, util):
        o = self.options
        return o.idle_w + (o.peak_w - o.idle_w) * np.asarray(util, dtype=np.float64) ** 3


@hookimpl
def register_power_models(register):
    register(CubicPower)
'''


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("cubic")
    src = tmp / "src"
    (src / "dcsim_cubic_power").mkdir(parents=True)
    (src / "pyproject.toml").write_text(PYPROJECT)
    (src / "dcsim_cubic_power" / "__init__.py").write_text(MODULE)
    return install_into(src, tmp / "site")


def run(site: Path, *args: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "DCSIM_PLUGINS"}
    environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(site), str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=environ, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.slow  # a pip install and two dcsim processes: ~30 s on a busy machine
def test_an_installed_power_model_is_listed_and_used(site, tmp_path):
    done = run(site, "-m", "dcsim", "plugins")
    assert done.returncode == 0, done.stderr
    line = next(ln for ln in done.stdout.splitlines() if ln.split()[:1] == ["cubic"])
    assert "[dcsim-cubic-power]" in line
    exp = {
        "name": "cubic", "seeds": 1,
        "topology": {"kind": "flat", "servers": 4, "server": {"cpu": 10, "mem": 10}},
        "workload": {"requests": 300, "arrival": {"process": "poisson", "rate": 1.0},
                     "duration": {"dist": "exponential", "mean": 10},
                     "demand": {"cpu": {"dist": "uniform_int", "low": 1, "high": 5},
                                "mem": 1}},
        "allocators": ["first_fit"],
        "power": {"server": {"model": "linear", "idle_w": 100, "peak_w": 300}},
        "matrix": {"power.server.model": ["linear", "cubic"]},
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(exp))
    done = run(site, "-m", "dcsim", "run", str(path), "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stdout + done.stderr
    s = pd.read_parquet(tmp_path / "out" / "summary.parquet").set_index("model")
    span = s["window_end"] - s["window_start"]
    # the same requests and placements: cubic draws less than linear at every utilisation
    # strictly between 0 and 1, and both at least idle for 4 servers
    assert s.loc["cubic", "util_cpu"] == s.loc["linear", "util_cpu"]
    assert (s["energy_j"] >= 4 * 100 * span - 1e-6).all()
    assert s.loc["cubic", "energy_j"] < s.loc["linear", "energy_j"]
    # linear: exact from the utilisation the meter integrated
    lin = s.loc["linear"]
    assert lin["energy_j"] == pytest.approx(
        (lin["window_end"] - lin["window_start"]) * (400 + 200 * 4 * lin["util_cpu"]),
        rel=1e-9)
