"""An experiment names plugin modules of its own (``plugins:``): a Python file beside it, or
an importable module, whose hooks register plugins as an installed package's do, with no
packaging. Their code is part of every run's fingerprint, so editing the file makes
``--resume`` refuse; a missing or broken one is one clear error naming the entry."""

from __future__ import annotations

import multiprocessing
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from dcsim import plugins
from dcsim.runner import fingerprint
from tests.helpers.cli import assert_same_dataset, invoke, ok
from tests.helpers.runs import QUICKSTART

WORST_FIT = '''
import numpy as np

from dcsim.allocators import Allocator
from dcsim.hookspecs import hookimpl


class WorstFit(Allocator):
    name = "worst_fit_here"

    def allocate(self, request, view):
        fits = view.fits(request.demand)
        if not fits.any():
            return None
        return int(np.argmax(np.where(fits, view.free[:, 0], -np.inf)))


@hookimpl
def register_allocators(register):
    register(WorstFit)
'''


@pytest.fixture(autouse=True)
def _forget_local_plugins():
    """Each test registers its own files; the registry forgets them afterwards."""
    yield
    plugins.reset()
    fingerprint.reset()


def _experiment(tmp_path: Path, entry: str = "worst_fit.py", source: str = WORST_FIT) -> Path:
    if source is not None and entry.endswith(".py"):
        (tmp_path / entry).write_text(source)
    cfg = yaml.safe_load(QUICKSTART.read_text())
    cfg.update(plugins=[entry], allocators=["first_fit", "worst_fit_here"], seeds=2)
    cfg["workload"]["requests"] = 1000
    f = tmp_path / "exp.yaml"
    f.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return f


def test_a_local_plugin_file_runs_without_packaging(tmp_path):
    exp = _experiment(tmp_path)
    ok("run", exp, "--out", tmp_path / "serial")
    summary = pd.read_parquet(tmp_path / "serial" / "summary.parquet")
    assert sorted(summary["allocator"].unique()) == ["first_fit", "worst_fit_here"]
    assert len(summary) == 4
    # the worst fit spreads the load: it chooses other servers for the same requests
    req = pd.read_parquet(tmp_path / "serial" / "requests")
    req["allocator"] = req["allocator"].astype(str)
    used = req.explode("servers").groupby("allocator")["servers"].nunique()
    assert used["worst_fit_here"] > used["first_fit"]
    ok("run", exp, "--out", tmp_path / "pool", "--jobs", "2")  # workers see it too
    assert_same_dataset(tmp_path / "serial", tmp_path / "pool", runs=4)


def test_editing_the_local_plugin_makes_resume_refuse(tmp_path):
    exp = _experiment(tmp_path)
    out = tmp_path / "out"
    ok("run", exp, "--out", out)
    again = ok("run", exp, "--out", out, "--resume")  # unchanged: nothing runs again
    assert "resuming: 4 of 4 runs are finished" in again.output
    (tmp_path / "worst_fit.py").write_text(WORST_FIT + "\n# a change\n")
    fingerprint.reset()  # a new `dcsim run` process would hash the file afresh
    plugins.reset()
    r = invoke("run", exp, "--out", out, "--resume")
    assert r.exit_code != 0
    assert (f"allocator 'worst_fit_here' (the local plugin {tmp_path / 'worst_fit.py'}) "
            "changed since 2 finished runs") in r.output
    assert "first_fit" not in r.output.split("changed since")[0]  # only its runs changed


def test_a_plan_run_in_a_spawned_process_registers_the_local_plugin(tmp_path):
    """A worker that does not inherit the parent's registry (spawned, or a Dask worker)
    loads the plan's local plugins itself, from the absolute path the plan carries."""
    from dcsim.runner import load_experiment
    from dcsim.runner.run import execute_run

    exp = load_experiment(_experiment(tmp_path))
    plan = next(r for r in exp.runs if r.label == "worst_fit_here")
    assert plan.local_plugins == (str((tmp_path / "worst_fit.py").resolve()),)
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        row = pool.apply(execute_run, (plan, str(tmp_path / "spawned")))
    assert row["allocator"] == "worst_fit_here" and row["received"] > 0


def test_an_importable_module_may_be_named_instead_of_a_file(tmp_path, monkeypatch):
    (tmp_path / "lab_plugins.py").write_text(WORST_FIT)
    monkeypatch.syspath_prepend(str(tmp_path))
    exp = _experiment(tmp_path, entry="lab_plugins", source=None)
    ok("run", exp, "--out", tmp_path / "out")
    assert "worst_fit_here" in set(pd.read_parquet(tmp_path / "out" / "summary.parquet")
                                   ["allocator"])
    sys.modules.pop("lab_plugins", None)


@pytest.mark.parametrize("source, expect", [
    (None, "plugins.0: no such file: "),
    ("import not_a_package_anywhere\n", "plugins.0: worst_fit.py failed to import "
                                        "(ModuleNotFoundError: No module named "
                                        "'not_a_package_anywhere')"),
    ("from dcsim.hookspecs import hookimpl\n\n@hookimpl\ndef register_alocators(register):\n"
     "    pass\n", "worst_fit.py: unknown hook 'register_alocators'"),
])
def test_a_missing_or_broken_local_plugin_is_one_clear_error(tmp_path, source, expect):
    exp = _experiment(tmp_path, source=source)
    r = invoke("validate", exp)
    assert r.exit_code != 0
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and expect in lines[0], r.output
    assert "Traceback" not in r.output


def test_the_registry_asks_the_hooks_once_until_another_plugin_registers(tmp_path):
    """``registered(kind)`` runs every plugin's hook once per kind and keeps the answer
    while the registered modules stay the same; registering another one asks again."""
    counted = tmp_path / "counted.py"
    counted.write_text(WORST_FIT.replace(
        "def register_allocators(register):\n",
        "def register_allocators(register):\n    CALLS.append(1)\n") + "\nCALLS = []\n")
    plugins.load_local(str(counted))
    module = next(m for m in sys.modules.values()
                  if getattr(m, "__file__", None) == str(counted.resolve()))
    first = plugins.registered("allocator")
    assert "worst_fit_here" in first and module.CALLS == [1]
    plugins.registered("allocator")
    plugins.get_plugin_class("worst_fit_here")
    assert module.CALLS == [1]
    other = tmp_path / "other.py"
    other.write_text(WORST_FIT.replace('"worst_fit_here"', '"worst_fit_other"'))
    plugins.load_local(str(other))
    assert "worst_fit_other" in plugins.registered("allocator") and module.CALLS == [1, 1]
    first.clear()  # a caller's copy: clearing it changes nothing registered
    assert "worst_fit_here" in plugins.registered("allocator")


NEEDS_RACKS = WORST_FIT.replace('''    def allocate(self, request, view):''', '''    @classmethod
    def validate(cls, options, spec):
        if spec.topology.kind == "flat":
            raise ValueError("needs racks: give a tree or fabric topology, not flat")

    def allocate(self, request, view):''')


def test_a_plugin_refuses_an_experiment_it_cannot_run_before_anything_runs(tmp_path):
    """``validate(options, spec)``, once per sweep point at plan time: ``dcsim validate``
    names the plugin's entry and its reason; a topology it accepts validates."""
    exp = _experiment(tmp_path, source=NEEDS_RACKS)
    ok("validate", exp)  # the quickstart's tree has racks
    cfg = yaml.safe_load(exp.read_text())
    cfg["topology"] = {"kind": "flat", "servers": 8, "server": {"cpu": 16, "mem": 64}}
    flat = tmp_path / "flat.yaml"
    flat.write_text(yaml.safe_dump(cfg, sort_keys=False))
    for command in ("validate", "run"):
        r = invoke(command, flat, *(("--out", tmp_path / "o") if command == "run" else ()))
        assert r.exit_code != 0
        assert r.output.strip() == (f"error: {flat}: allocators.1: needs racks: give a tree or "
                                    "fabric topology, not flat (allocator 'worst_fit_here')")
    assert not (tmp_path / "o").exists()  # refused before anything was written
