"""The simulation families as one protocol: every mode is registered once with its
plugin list and declared tables, and an experiment's spec is validated once per sweep
point, not again per run."""

from __future__ import annotations

from pathlib import Path

import yaml

from dcsim.modes import MODES, Built, Mode
from dcsim.results.schema import TABLES

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


def test_every_mode_is_one_module_with_its_plugin_list_and_tables():
    assert set(MODES) == set(TABLES)
    assert len({m.plugin_key for m in MODES.values()}) == len(MODES)  # one list each
    for name, mode in MODES.items():
        assert isinstance(mode, Mode) and mode.name == name
        assert "summary" in TABLES[name]


def test_the_spec_is_validated_once_per_sweep_point(tmp_path, monkeypatch):
    import dcsim.runner.config as config
    import dcsim.runner.plan as plan
    import dcsim.runner.run as run
    from dcsim.runner import run_experiment

    raw = yaml.safe_load((EXPERIMENTS / "quickstart.yaml").read_text())
    raw.update(seeds=2, warmup={"requests": 10})
    raw["workload"]["requests"] = 60
    raw["matrix"] = {"workload.arrival.rate": [5, 10]}
    f = tmp_path / "q.yaml"
    f.write_text(yaml.safe_dump(raw))
    calls = []
    real = config.validate_spec

    def counting(data, source):
        calls.append(source)
        return real(data, source)

    for mod in (config, plan, run):
        monkeypatch.setattr(mod, "validate_spec", counting, raising=False)
    exp = plan.load_experiment(f)
    planned = len(calls)
    assert planned == 1 + 2            # the file, then each of the 2 sweep points
    assert len(exp.runs) == 2 * 3 * 2  # points x allocators x seeds
    assert all(r.spec is not None for r in exp.runs)
    run_experiment(exp, out=tmp_path / "o")
    assert len(calls) == planned        # no run validated it again


def test_built_carries_what_binds_the_tables():
    b = Built(lambda sink: {}, {"resource": ["cpu"]}, ["links"])
    bound = TABLES["loss"]["timeseries"].bind(flags=b.flags, **b.families, tier=["host"])
    assert [n for n, _ in bound.columns] == ["time", "received", "accepted", "active",
                                             "util_cpu", "util_bw_host"]


def test_validating_an_experiment_imports_no_engine_simpy_or_networkx():
    """``dcsim validate`` of a reschedule experiment reads the modes' sections only: no
    SimPy, no networkx, no engine of any mode (``python -X importtime`` lists every module a
    process imports)."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "dcsim", "validate",
                        str(EXPERIMENTS / "vmr2l_static.yaml")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "ok" in r.stdout
    imported = {line.rsplit("|", 1)[1].strip() for line in r.stderr.splitlines()
                if line.startswith("import time:") and line.count("|") == 2}
    assert "dcsim.runner.config" in imported  # the probe sees the modules it should
    heavy = sorted(m for m in imported
                   if m.split(".")[0] in ("simpy", "networkx") or m.startswith("dcsim.sim")
                   or m.endswith(".engine") and m.startswith("dcsim.modes"))
    assert heavy == []


def test_each_mode_model_has_its_own_sections_and_nothing_else():
    from dcsim.runner.config import COMMON, experiment_model

    for name, mode in MODES.items():
        fields = set(experiment_model(name).model_fields)
        assert fields == {*COMMON, mode.plugin_key, *mode.own_sections}, name


def test_a_section_of_another_mode_is_refused_naming_the_modes_that_read_it():
    import pytest

    from dcsim.errors import ConfigError
    from dcsim.runner.config import validate_spec

    base = {"name": "x", "mode": "reschedule", "reschedulers": ["greedy"],
            "vm": {"mapping": {"synthetic": "small"}, "mnl": 5}}
    with pytest.raises(ConfigError, match=r"f: failures: not used in mode 'reschedule' "
                                          r"\(only modes loss, vm_online and gpu read it\)"):
        validate_spec({**base, "failures": {"servers": {"ttf": 5, "ttr": 1}}}, "f")
    with pytest.raises(ConfigError, match="f: allocators: not used in mode 'reschedule'; "
                                          "list reschedulers instead"):
        validate_spec({**base, "allocators": ["random"]}, "f")
    with pytest.raises(ConfigError, match="f: capacity: not used in mode 'reschedule' "
                                          r"\(only mode loss reads it\)"):
        validate_spec({**base, "capacity": "wait"}, "f")
    with pytest.raises(ConfigError, match="f: vm: Field required"):
        validate_spec({**base, "vm": None}, "f")
    with pytest.raises(ConfigError, match="f: mode: unknown mode 'fluid'; expected 'loss', "
                                          "'queue', 'reschedule', 'vm_online' or 'gpu'"):
        validate_spec({**base, "mode": "fluid"}, "f")
    with pytest.raises(ConfigError, match="f: mode: Input should be 'loss', 'queue', "
                                          "'reschedule', 'vm_online' or 'gpu'"):
        validate_spec({**base, "mode": 3}, "f")
    with pytest.raises(ConfigError, match="f: gpu_allocators: not used"):
        validate_spec({**base, "gpu_allocators": ["fgd"]}, "f")
    assert validate_spec({**base, "failures": None, "allocators": []}, "f").mode == "reschedule"


def test_a_new_mode_is_one_mode_object_and_no_runner_code():
    """The experiment model asks the mode for its sections: a mode that reads a section no
    other mode has, registered through ``register_modes`` like the built-ins, validates files
    of it with no change to the runner."""
    from typing import Any

    from dcsim.errors import ConfigError
    from dcsim.experiment_sections import MetricsSpec
    from dcsim.modes.base import Section
    from dcsim.runner import config

    class Fluid(Mode):
        name, plugin_key, plugin_kind = "fluid_test", "placers", "placer"
        own_sections = {"flow": Section(MetricsSpec, factory=MetricsSpec),
                        "vm": Section(dict[str, Any], ...)}
        tables: dict = {}  # noqa: RUF012 - it never runs

        def check(self, point, base_dir):
            pass

        def resolved(self, spec):
            return {}

        def build(self, spec, plan, workload_rng, plugin_rng, watch):
            raise AssertionError

    import types

    from dcsim import hookimpl, plugins

    module = types.ModuleType("fluid_test_plugin")
    module.register_modes = hookimpl(lambda register: register(Fluid()))
    plugins.get_plugin_manager().register(module, name="fluid_test_plugin")
    try:
        _check_fluid(config, ConfigError)
    finally:
        plugins.get_plugin_manager().unregister(name="fluid_test_plugin")
    assert "fluid_test" not in MODES


def _check_fluid(config, ConfigError):
    assert "fluid_test" in MODES
    spec = config.validate_spec({"name": "x", "mode": "fluid_test", "placers": ["first_fit"],
                                 "vm": {}, "flow": {"sample_every": 3}}, "f")
    assert spec.flow.sample_every == 3 and spec.plugin_kind == "placer"
    import pytest

    with pytest.raises(ConfigError, match="flow.sample_every: Input should be greater than 0"):
        config.validate_spec({"name": "x", "mode": "fluid_test", "placers": ["p"], "vm": {},
                              "flow": {"sample_every": 0}}, "f")
    with pytest.raises(ConfigError, match="f: flow: not used in mode 'loss' "
                                          r"\(only mode fluid_test reads it\)"):
        config.validate_spec({"name": "x", "topology": {}, "workload": {},
                              "allocators": ["random"], "flow": {}}, "f")
