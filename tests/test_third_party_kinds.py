"""The topology, arrival-process and distribution templates (plugins/dcsim-dragonfly,
plugins/dcsim-hawkes) installed and used as a third party would: pip installs them (not
editable) into a temporary folder that only the subprocesses here put on ``PYTHONPATH``,
then every check goes through the ``dcsim`` command line. One install per module."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.helpers.cli import assert_same_dataset
from tests.helpers.pip import install_into, run_with

ROOT = Path(__file__).resolve().parents[1]
PLUGINS = ROOT / "plugins"
IGNORE = shutil.ignore_patterns("build", "*.egg-info", "__pycache__", ".pytest_cache")

#: an experiment selecting the three plugin kinds at once
ALL_THREE = {
    "name": "three_kinds",
    "seed": 3,
    "seeds": 2,
    "topology": {"kind": "dragonfly", "routers": 2, "hosts": 2, "global_links": 1,
                 "server": {"cpu": 8, "mem": 32}, "host_link": 10, "local_link": 20,
                 "global_link": 10},
    "workload": {
        "requests": 150,
        "arrival": {"process": "hawkes", "mu": 1, "alpha": 0.5, "beta": 1},
        "demand": {"cpu": {"dist": "loglogistic", "shape": 3, "scale": 4, "integer": True,
                           "min": 1, "max": 16},
                   "mem": {"dist": "uniform_int", "low": 1, "high": 16}},
        "bandwidth": {"dist": "uniform", "low": 1, "high": 3},
        "duration": {"dist": "loglogistic", "shape": 2.5, "offered_load": 0.7,
                     "load_resource": "cpu"},
    },
    "allocators": ["best_fit_multi", "random_multi"],
}

#: a topology kind in a file beside the experiment (no package)
RING = '''
from typing import Literal

import networkx as nx
from dcsim.hookspecs import hookimpl
from dcsim.model import Topology, TopologyBuilder
from pydantic import PositiveInt


class Ring(TopologyBuilder):
    """Switches in a ring, each with its servers."""

    kind: Literal["ring"] = "ring"
    switches: PositiveInt = 4
    hosts: PositiveInt = 2

    def build(self) -> Topology:
        g = nx.Graph()
        for s in range(self.switches):
            g.add_node(f"s{s}", kind="switch", tier=1, rack=s)
            g.add_edge(f"s{s}", f"s{(s + 1) % self.switches}", capacity=20.0)
            for h in range(self.hosts):
                n = f"h{s * self.hosts + h}"
                g.add_node(n, kind="server", tier=0, rack=s, cpu=8.0, mem=32.0)
                g.add_edge(n, f"s{s}", capacity=10.0)
        return Topology.from_graph(g, name="ring", resources=["cpu", "mem"],
                                   params=self._params(), source="ring")


@hookimpl
def register_topologies(register):
    register(Ring)
'''


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """One folder holding both template packages, installed from copies of their source."""
    tmp = tmp_path_factory.mktemp("kinds")
    for name in ("dcsim-dragonfly", "dcsim-hawkes"):
        shutil.copytree(PLUGINS / name, tmp / name, ignore=IGNORE)
        install_into(tmp / name, tmp / "site")
    return tmp / "site"


def run(site: Path, *args: str, cwd: Path = ROOT, **env: str) -> subprocess.CompletedProcess:
    """``python *args`` with the installed plugins first on PYTHONPATH."""
    return run_with(site, cwd, *args, **env)


def experiment(tmp_path: Path, cfg: dict | None = None, name: str = "exp.yaml") -> Path:
    f = tmp_path / name
    f.write_text(yaml.safe_dump(cfg if cfg is not None else ALL_THREE, sort_keys=False))
    return f


def options_of(stdout: str, name: str) -> tuple[str, list[str]]:
    """The header line of plugin ``name`` in ``dcsim plugins`` and its option names."""
    lines = stdout.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.split()[:1] == [name])
    options = []
    for ln in lines[at + 1:]:
        if not ln.startswith("      "):
            break
        options.append(ln.split(":")[0].strip())
    return lines[at], options


def test_dcsim_plugins_lists_the_three_with_their_package_and_options(site):
    done = run(site, "-m", "dcsim", "plugins")
    assert done.returncode == 0, done.stderr
    head, opts = options_of(done.stdout, "dragonfly")
    assert "[dcsim-dragonfly]" in head
    assert {"groups", "routers", "hosts", "global_links", "server", "host_link",
            "local_link", "global_link"} <= set(opts)
    head, opts = options_of(done.stdout, "hawkes")
    assert "[dcsim-hawkes]" in head and {"mu", "alpha", "beta"} <= set(opts)
    head, opts = options_of(done.stdout, "loglogistic")
    assert "[dcsim-hawkes]" in head and {"shape", "scale", "min", "max"} <= set(opts)


@pytest.mark.slow  # two more dcsim processes
def test_dcsim_plugins_selects_by_kind_and_by_package(site):
    done = run(site, "-m", "dcsim", "plugins", "--kind", "topology")
    assert done.returncode == 0 and "dragonfly" in done.stdout and "hawkes" not in done.stdout
    done = run(site, "-m", "dcsim", "plugins", "--package", "dcsim-hawkes")
    assert done.returncode == 0, done.stderr
    assert "hawkes" in done.stdout and "loglogistic" in done.stdout
    assert "dragonfly" not in done.stdout and "poisson" not in done.stdout


def test_an_experiment_selecting_all_three_runs(site, tmp_path):
    """dragonfly + hawkes + loglogistic (demand and duration): every run has a row in
    summary.parquet, and the requests reserve bandwidth on the dragonfly's router links."""
    out = tmp_path / "out"
    done = run(site, "-m", "dcsim", "run", str(experiment(tmp_path)), "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    summary = pd.read_parquet(out / "summary.parquet")
    assert sorted(summary["allocator"]) == sorted(ALL_THREE["allocators"] * 2)
    assert summary["acceptance_ratio"].between(0, 1).all()
    assert summary["received"].gt(0).all() and summary["util_bw_router"].gt(0).all()


@pytest.mark.slow  # two runs of the experiment
def test_the_same_seed_gives_the_same_rows(site, tmp_path):
    exp = experiment(tmp_path)
    for out in ("a", "b"):
        done = run(site, "-m", "dcsim", "run", str(exp), "--out", str(tmp_path / out))
        assert done.returncode == 0, done.stdout + done.stderr
    assert_same_dataset(tmp_path / "a", tmp_path / "b", runs=4)


@pytest.mark.parametrize(("setting", "field"), [
    ("topology.groups=9", "topology.groups"),         # 2 x 1 ports: at most 3 groups
    pytest.param("topology.routers=0", "topology.routers", marks=pytest.mark.slow),
    ("workload.arrival.alpha=2", "workload.arrival.alpha"),   # alpha / beta = 2
    pytest.param("workload.duration.shape=0.9", "workload.duration.shape",
                 marks=pytest.mark.slow),
])
def test_a_bad_option_is_one_line_naming_the_field(site, tmp_path, setting, field):
    exp = experiment(tmp_path)
    done = run(site, "-m", "dcsim", "validate", str(exp), "--set", setting)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    errors = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(errors) == 1 and f": {field}: " in errors[0], done.stderr


@pytest.mark.parametrize(("setting", "listed"), [
    ("topology.kind=dragonfli", "dragonfly"),
    pytest.param("workload.arrival.process=hawks", "hawkes", marks=pytest.mark.slow),
    pytest.param("workload.duration.dist=loglogistc", "loglogistic", marks=pytest.mark.slow),
])
def test_an_unknown_kind_lists_the_plugin_kinds(site, tmp_path, setting, listed):
    done = run(site, "-m", "dcsim", "validate", str(experiment(tmp_path)), "--set", setting)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert listed in done.stderr and setting.split("=")[1] in done.stderr


@pytest.fixture(scope="module")
def broken_site(tmp_path_factory) -> Path:
    """dcsim-dragonfly with an import that fails, installed in a folder of its own."""
    tmp = tmp_path_factory.mktemp("broken")
    shutil.copytree(PLUGINS / "dcsim-dragonfly", tmp / "src", ignore=IGNORE)
    init = tmp / "src" / "dcsim_dragonfly" / "__init__.py"
    init.write_text(init.read_text() + "\nimport dcsim_no_such_dependency\n")
    return install_into(tmp / "src", tmp / "site")


@pytest.mark.slow  # another pip install
def test_a_broken_package_is_one_warning_and_an_experiment_needing_it_a_clear_error(
        site, broken_site, tmp_path):
    """The broken dragonfly is left out with one warning line; the working hawkes package
    is still listed; an experiment whose topology it would provide fails naming it."""
    path = os.pathsep.join(p for p in (str(broken_site), str(site),
                                       os.environ.get("PYTHONPATH", "")) if p)
    done = run(broken_site, "-m", "dcsim", "plugins", PYTHONPATH=path)
    assert done.returncode == 0, done.stderr
    warnings = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(warnings) == 1 and warnings[0].startswith("warning: plugin 'dragonfly'")
    assert "dcsim_no_such_dependency" in warnings[0]
    assert "hawkes" in done.stdout and "[dcsim-dragonfly]" not in done.stdout
    done = run(broken_site, "-m", "dcsim", "run", str(experiment(tmp_path)), "--out",
               str(tmp_path / "out"), PYTHONPATH=path)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    error = next(ln for ln in done.stderr.splitlines() if ln.startswith("error:"))
    assert "topology.kind: unknown kind 'dragonfly'" in error
    assert "plugin 'dragonfly' failed to load" in error
    assert not (tmp_path / "out" / "summary.parquet").exists()


@pytest.mark.slow  # three runs of an experiment
def test_a_local_topology_file_runs_and_editing_it_makes_resume_refuse(site, tmp_path):
    """``plugins: [my_topology.py]`` beside the experiment: its topology kind runs, with the
    installed arrival process and distribution, without packaging; edited, the finished runs
    no longer match its code and ``--resume`` refuses, naming it."""
    (tmp_path / "my_topology.py").write_text(RING)
    cfg = {**ALL_THREE, "plugins": ["my_topology.py"],
           "topology": {"kind": "ring", "switches": 5, "hosts": 2}}
    exp = experiment(tmp_path, cfg)
    out = tmp_path / "out"
    done = run(site, "-m", "dcsim", "run", str(exp), "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(pd.read_parquet(out / "summary.parquet")) == 4
    done = run(site, "-m", "dcsim", "run", str(exp), "--out", str(out), "--resume")
    assert done.returncode == 0 and "4 of 4 runs are finished" in done.stdout + done.stderr
    (tmp_path / "my_topology.py").write_text(RING.replace("capacity=20.0", "capacity=40.0"))
    done = run(site, "-m", "dcsim", "run", str(exp), "--out", str(out), "--resume")
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert (f"topology 'ring' (the local plugin {(tmp_path / 'my_topology.py').resolve()}) "
            "changed since 4 finished runs") in done.stderr


@pytest.mark.slow  # the templates' suites in subprocesses; the default suite checks their use
def test_the_templates_own_tests_pass_against_the_installed_copies(site):
    for name in ("dcsim-dragonfly", "dcsim-hawkes"):
        done = run(site, "-m", "pytest", str(PLUGINS / name / "tests"), "-q",
                   "-p", "no:cacheprovider")
        assert done.returncode == 0, done.stdout + done.stderr
        assert " passed" in done.stdout
