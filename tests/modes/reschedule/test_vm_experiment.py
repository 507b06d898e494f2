"""Static rescheduling runs (``mode: reschedule``), the ``vm:`` section of both VM modes,
the two VM experiment files run through the runner at a small size, and the report on
their summaries."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from dcsim.errors import ConfigError, PluginError
from dcsim.modes.reschedule.command import MIGRATION_COLUMNS, rescheduler_class
from dcsim.modes.reschedule.engine import run_static
from dcsim.modes.reschedule.spec import StaticSpec, check_static, parse_static
from dcsim.modes.vm_online.spec import check_online
from dcsim.reschedulers.builtin import AlphaVBPP, Greedy
from dcsim.runner import load_experiment, run_experiment
from dcsim.runner.config import sweep_points
from dcsim.validation import validate_section
from dcsim.vm.mapping_spec import build_mapping

ROOT = Path(__file__).resolve().parents[3]
EXPERIMENTS = ROOT / "experiments"
DATA = Path(__file__).resolve().parents[2] / "data" / "vmr"


def load_report():
    spec = importlib.util.spec_from_file_location("vmr_report", EXPERIMENTS / "vmr_report.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# -- run_static ------------------------------------------------------------------------------
class Sink:
    def __init__(self):
        self.data = {}

    def __call__(self, kind, columns):
        self.data[kind] = {k: list(np.asarray(v).tolist()) for k, v in columns.items()}


def test_run_static_on_a_small_synthetic_mapping():
    sink = Sink()
    spec = {"mapping": {"synthetic": "small"}, "mnl": 5}
    out = run_static(spec, Greedy(), np.random.default_rng(0), sink)
    assert set(sink.data) == {"migrations"}
    rows = sink.data["migrations"]
    assert list(rows) == list(MIGRATION_COLUMNS)
    assert len(rows["step"]) == out["migrations"] <= 5
    assert rows["step"] == list(range(1, out["migrations"] + 1))
    assert out["fr_after"] <= out["fr_before"] and out["mnl"] == 5 and out["hosts"] == 8
    assert out["fragment_after"] <= out["fragment_before"]
    assert out["status"] in ("mnl_reached", "early_stop", "no_candidate", "no_destination")
    assert out["bound"] is None and json.loads(out["info"]) == {}


def test_same_seed_same_mapping_for_every_rescheduler_and_seeds_differ():
    spec = {"mapping": {"synthetic": "small"}, "mnl": 3}

    def before(seed, resched, offset=0):
        s = {**spec, "mapping": {**spec["mapping"], "seed_offset": offset}}
        return run_static(s, resched, np.random.default_rng(seed), None)["fr_before"]

    a = [before(1, Greedy()), before(1, AlphaVBPP())]
    assert a[0] == a[1]
    frs = {before(seed, Greedy()) for seed in range(5)}
    assert len(frs) > 1
    # the mapping itself, not just its FR
    st = [build_mapping(StaticSpec.model_validate(spec).mapping, np.random.default_rng(k))
          for k in (4, 4, 5)]
    assert st[0].same_as(st[1]) and st[0].vm_ids == st[1].vm_ids
    assert not (st[0].n_vms == st[2].n_vms and st[0].same_as(st[2]))
    m = StaticSpec.model_validate({**spec, "mapping": {"synthetic": "small",
                                                       "seed_offset": 1}}).mapping
    other = build_mapping(m, np.random.default_rng(4))
    assert not (other.n_vms == st[0].n_vms and other.same_as(st[0]))


def test_run_static_with_a_mapping_file_relative_to_base_dir():
    out = run_static({"mapping": {"path": "tiny.json"}, "mnl": 2}, Greedy(),
                     np.random.default_rng(0), None, DATA)
    assert out["vms"] > 0 and out["migrations"] <= 2 and out["fr_after"] <= out["fr_before"]
    with pytest.raises(ConfigError, match=r"^vm.mapping.path: no such file"):
        run_static({"mapping": {"path": "nope.json"}, "mnl": 2}, Greedy(),
                   np.random.default_rng(0), None, DATA)


def test_run_static_overrides_and_mip_bound():
    mip = rescheduler_class("mip")
    out = run_static({"mapping": {"synthetic": "small", "hosts": 4, "target_cpu": 0.9},
                      "mnl": 4}, mip(mip.parse_options({"time_limit": 5})),
                     np.random.default_rng(2), Sink())
    assert out["hosts"] == 4 and out["bound"] is not None
    assert out["bound"] <= out["fr_after"] + 1e-9 <= out["fr_before"] + 1e-9


class _Invalid(Greedy):
    name = "invalid"

    def reschedule(self, view, mnl):
        from dcsim.vm import Migration

        return [Migration(0, int(view.vm_host[0]), 0)]


def test_run_static_invalid_list_is_a_plugin_error():
    with pytest.raises(PluginError, match="rescheduler 'invalid' returned an invalid"):
        run_static({"mapping": {"synthetic": "small"}, "mnl": 2}, _Invalid(),
                   np.random.default_rng(0), None)


@pytest.mark.parametrize(("spec", "field"), [
    ({"mapping": {"synthetic": "small"}}, "vm.mnl"),
    ({"mapping": {"synthetic": "small"}, "mnl": -1}, "vm.mnl"),
    ({"mapping": {"synthetic": "small"}, "mnl": "many"}, "vm.mnl"),
    ({"mnl": 5}, "vm.mapping"),
    ({"mapping": {"hosts": 5}, "mnl": 5}, "vm.mapping"),
    ({"mapping": {"synthetic": "large"}, "mnl": 5}, "vm.mapping.synthetic"),
    ({"mapping": {"synthetic": "small", "seed_offset": -1}, "mnl": 5},
     "vm.mapping.seed_offset"),
    ({"mapping": {"synthetic": "small", "target_cpu": 1.5}, "mnl": 5},
     "vm.mapping.target_cpu"),
    ({"mapping": {"synthetic": "small", "path": "x.json"}, "mnl": 5}, "vm.mapping.path"),
    ({"mapping": {"synthetic": "small"}, "mnl": 5, "extra": 1}, "vm.extra"),
])
def test_bad_static_fields_name_the_field(spec, field):
    for call in (lambda: check_static(spec),
                 lambda: run_static(spec, Greedy(), np.random.default_rng(0), None)):
        with pytest.raises(ConfigError) as e:
            call()
        assert str(e.value).startswith(field + ":"), str(e.value)


def test_parse_static_checks_fields_not_files():
    assert parse_static({"mapping": {"path": "nope.json"}, "mnl": 3}).mnl == 3
    with pytest.raises(ConfigError, match=r"^exp.yaml: vm.mnl:"):
        parse_static({"mapping": {"path": "nope.json"}, "mnl": -3}, where="exp.yaml: vm")
    with pytest.raises(ConfigError, match=r"^vm.mapping.path: no such file"):
        check_static({"mapping": {"path": "nope.json"}, "mnl": 3}, DATA)


def test_validate_section_rejects_a_non_mapping():
    with pytest.raises(ConfigError, match=r"^vm: expected a mapping"):
        validate_section(StaticSpec, [1, 2], "vm")
    with pytest.raises(ConfigError, match=r"^vm.mapping: Field required"):
        check_static(None)


# -- the experiment files ------------------------------------------------------------------------
def points(path):
    """Every sweep point's resolved config, as the runner expands it."""
    exp = load_experiment(path)
    return [data for _params, data in sweep_points(exp.spec, exp.raw, str(path))]


def test_the_experiment_files_are_valid():
    static = list(points(EXPERIMENTS / "vmr_static.yaml"))
    assert [p["vm"]["mnl"] for p in static] == [10, 20, 30, 40, 50]
    for p in static:
        assert p["mode"] == "reschedule" and p["seeds"] == 3
        check_static(p["vm"], EXPERIMENTS)
    raw = yaml.safe_load((EXPERIMENTS / "vmr_static.yaml").read_text())
    names = [r if isinstance(r, str) else r["name"] for r in raw["reschedulers"]]
    assert names == ["greedy", "alpha_vbpp", "mip"]
    online = list(points(EXPERIMENTS / "vm_online_azure.yaml"))
    assert online[0]["vm"]["reschedule"] is None and len(online) >= 2
    for p in online:
        assert p["mode"] == "vm_online" and p["placers"] == ["best_fit", "first_fit"]
        check_online(p["vm"], EXPERIMENTS)


def test_run_both_experiments_small_and_report(tmp_path):
    """`dcsim run` on both VM experiment files at a small size, then the report."""
    exp = load_experiment(EXPERIMENTS / "vmr_static.yaml", seeds=2,
                          sets=["vm.mapping.synthetic=small",
                                "reschedulers.2.options.time_limit=1"])
    run_experiment(exp, out=tmp_path / "vmr_static")
    static = pd.read_parquet(tmp_path / "vmr_static" / "summary.parquet")
    assert len(static) == 5 * 3 * 2
    assert set(static["allocator"]) == {"greedy", "alpha_vbpp", "mip(time_limit=1.0)"}
    assert (static["fr_after"] <= static["fr_before"] + 1e-12).all()
    assert (static["migrations"] <= static["mnl"]).all()
    # every rescheduler of a seed saw the same mapping
    assert (static.groupby("seed")["fr_before"].nunique() == 1).all()
    moves = pd.read_parquet(tmp_path / "vmr_static" / "migrations")
    assert set(MIGRATION_COLUMNS) <= set(moves.columns)
    exp = load_experiment(EXPERIMENTS / "vm_online_azure.yaml",
                          sets=["vm.workload.trace.limit=600", "vm.mapping.hosts=6"])
    run_experiment(exp, out=tmp_path / "vm_online_azure")
    online = pd.read_parquet(tmp_path / "vm_online_azure" / "summary.parquet")
    assert len(online) == 2 * len(points(EXPERIMENTS / "vm_online_azure.yaml"))
    assert (online["received"] == 600).all()
    assert online.loc[online["reschedule"].isna(), "migrations"].eq(0).all()
    series = pd.read_parquet(tmp_path / "vm_online_azure" / "timeseries")
    assert {"fragment_rate", "util_cpu", "vms"} <= set(series.columns)
    report = load_report()
    text = report.static_table(pd.read_parquet(tmp_path / "vmr_static" / "summary.parquet"))
    assert "0.2859" in text and "greedy" in text and "MNL" in text
    text = report.online_table(pd.read_parquet(tmp_path / "vm_online_azure" /
                                               "summary.parquet"))
    assert "best_fit" in text and "none" in text and "greedy every" in text
    assert report.main(["--results", str(tmp_path)]) == 0


@pytest.mark.parametrize("change, message", [
    ({"vm": None}, "vm: Field required"),
    ({"allocators": ["first_fit"]}, "allocators: not used in mode 'reschedule'"),
    ({"reschedulers": ["nope"]}, "reschedulers.0.name: unknown rescheduler 'nope'"),
    ({"vm": {"mapping": {"synthetic": "huge"}, "mnl": 5}}, "vm.mapping.synthetic"),
    ({"vm": {"mapping": {"path": "missing.json"}, "mnl": 5}}, "vm.mapping.path"),
    ({"mode": "vm_online", "reschedulers": [], "placers": ["best_fit"],
      "vm": {"mapping": {"hosts": 2},
             "workload": {"synthetic": {"count": 5, "rate": 1, "load": 0.5}},
             "reschedule": {"every": 10, "mnl": 1, "algorithm": "nope"}}},
     "vm.reschedule.algorithm"),
])
def test_bad_vm_experiments_name_the_field(tmp_path, change, message):
    data = {"name": "v", "mode": "reschedule", "vm": {"mapping": {"synthetic": "small"},
                                                       "mnl": 5},
            "reschedulers": ["greedy"], **change}
    path = tmp_path / "v.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as e:
        load_experiment(path)
    assert message in str(e.value) and str(path) in str(e.value)
