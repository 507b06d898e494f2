"""The simulation families as one protocol (#17): every mode is registered once with its
plugin list and declared tables, and an experiment's spec is validated once per sweep
point, not again per run."""

from __future__ import annotations

from pathlib import Path

import yaml

from dcsim.results.schema import TABLES
from dcsim.runner.modes import MODES, Built, Mode
from dcsim.runner.modes.base import PLUGIN_LISTS

EXPERIMENTS = Path(__file__).resolve().parent.parent / "experiments"


def test_every_mode_is_one_module_with_its_plugin_list_and_tables():
    assert set(MODES) == set(PLUGIN_LISTS) == set(TABLES)
    for name, mode in MODES.items():
        assert isinstance(mode, Mode) and mode.name == name
        assert (mode.plugin_key, mode.plugin_kind) == PLUGIN_LISTS[name]
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
