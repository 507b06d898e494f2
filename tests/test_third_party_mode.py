"""A simulation family from an installed package (issue #50): a tiny distribution written
here registers ``mode: static_pack`` (place N items once, no departures, with the loss
mode's allocators) through ``register_modes``; pip-installed offline into a temporary
folder that only the subprocesses put on ``PYTHONPATH``, listed by ``dcsim plugins``, run
from YAML and reported, its own summary columns declared by the mode."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.helpers.pip import install_into, run_with

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "dcsim-static-pack"
version = "0.1.0"
dependencies = ["dcsim"]

[project.entry-points.dcsim]
static_pack = "dcsim_static_pack"
"""

MODULE = '''\
"""mode: static_pack: every allocator places the same items, one by one, none leaving."""

import numpy as np
from pydantic import BaseModel, ConfigDict, PositiveInt

from dcsim import hookimpl
from dcsim.model import ClusterState, Placement, StateView
from dcsim.model.request import new_request
from dcsim.model.topologies import build_topology
from dcsim.modes import Built, Mode, Section
from dcsim.modes.base import plugin_instance
from dcsim.results.schema import Col, Table
from dcsim.workload.distributions import Dist


class Items(BaseModel):
    model_config = ConfigDict(extra="forbid")
    count: PositiveInt
    cpu: Dist
    servers: PositiveInt = 4
    capacity: float = 16.0


SUMMARY = Table("summary", (
    Col("placed", "int64", "items", "items placed"),
    Col("acceptance", "float64", "-", "placed / count", bounds=(0, 1)),
), "one per run")


class StaticPack(Mode):
    name = "static_pack"
    description = "offline packing: N items, no departures"
    plugin_key, plugin_kind = "allocators", "allocator"
    own_sections = {"items": Section(Items, ...)}
    tables = {"summary": SUMMARY}

    def check(self, point, base_dir):
        if point.items.cpu.mean() > point.items.capacity:
            raise ValueError("items.cpu: the mean item is larger than a server")

    def resolved(self, spec):
        return {"items": spec.items.model_dump(mode="json")}

    def build(self, spec, plan, workload_rng, plugin_rng, watch):
        items = spec.items
        allocator = plugin_instance(plan, "allocator", plugin_rng)

        def simulate(sink):
            topo = build_topology({"kind": "flat", "servers": items.servers,
                                   "server": {"cpu": items.capacity}})
            state = ClusterState(topo)
            view = StateView(state)
            allocator.setup(view)
            placed = 0
            for i, size in enumerate(items.cpu.sample(workload_rng, items.count)):
                demand = np.array([size])
                req = new_request(i, float(i), float("inf"), demand, 0.0, {})
                choice = allocator.allocate(req, view)
                if choice is not None:
                    state.reserve(choice if isinstance(choice, Placement)
                                  else Placement.single(choice, demand))
                    placed += 1
            return {"placed": placed, "acceptance": placed / items.count}

        return Built(simulate)


@hookimpl
def register_modes(register):
    register(StaticPack())
'''


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("static_pack")
    src = tmp / "src"
    (src / "dcsim_static_pack").mkdir(parents=True)
    (src / "pyproject.toml").write_text(PYPROJECT)
    (src / "dcsim_static_pack" / "__init__.py").write_text(MODULE)
    return install_into(src, tmp / "site")


def run(site: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return run_with(site, cwd, "-m", "dcsim", *args)


def experiment(tmp_path: Path, **items) -> Path:
    cfg = {"name": "pack", "mode": "static_pack", "seeds": 2,
           "items": {"count": 40, "cpu": {"dist": "uniform_int", "low": 1, "high": 8},
                     **items},
           "allocators": ["first_fit", "random"]}
    path = tmp_path / "pack.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_an_installed_mode_is_listed_run_and_reported(site, tmp_path):
    listed = run(site, tmp_path, "plugins", "--kind", "mode")
    assert listed.returncode == 0, listed.stderr
    line = next(x for x in listed.stdout.splitlines() if x.strip().startswith("static_pack"))
    assert "[dcsim-static-pack]" in line and "offline packing" in line
    assert "items: section (required)" in listed.stdout

    exp = experiment(tmp_path)
    done = run(site, tmp_path, "run", str(exp), "--out", "out")
    assert done.returncode == 0, done.stderr
    df = pd.read_parquet(tmp_path / "out" / "summary.parquet")
    assert sorted(df["allocator"].unique()) == ["first_fit", "random"] and len(df) == 4
    # 4 servers × 16 cpu hold at most 64 of the 40 items' ~180 cpu: neither places all,
    # and every placed item fitted
    assert (df["placed"] < 40).all() and (df["placed"] > 0).all()
    assert (df["acceptance"] == df["placed"] / 40).all()
    assert df["code_id"].notna().all()
    report = run(site, tmp_path, "report", "out")
    assert report.returncode == 0, report.stderr
    assert "acceptance" in report.stdout

    # resumed, nothing is run again: the rows are the mode's own, fingerprinted
    again = run(site, tmp_path, "run", str(exp), "--out", "out", "--resume")
    assert again.returncode == 0 and "4 of 4 runs are finished" in again.stderr, again.stderr


@pytest.mark.slow  # two more dcsim processes (validation of a mode's sections: tests/modes)
def test_a_mode_sections_are_validated_and_other_sections_refused(site, tmp_path):
    bad = experiment(tmp_path, count=0)
    res = run(site, tmp_path, "validate", str(bad))
    assert res.returncode != 0 and "Traceback" not in res.stderr
    assert "items.count" in res.stderr
    cfg = yaml.safe_load(experiment(tmp_path).read_text())
    cfg["topology"] = {"kind": "flat"}
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(cfg))
    res = run(site, tmp_path, "validate", "t.yaml")
    assert res.returncode != 0 and "topology: not used in mode 'static_pack'" in res.stderr


def test_without_the_package_the_mode_is_unknown(tmp_path):
    exp = experiment(tmp_path)
    res = subprocess.run([sys.executable, "-m", "dcsim", "validate", str(exp)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode != 0 and "static_pack" in res.stderr and "loss" in res.stderr
