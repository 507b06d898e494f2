"""``metrics.plugins`` at plan time: names, options, a plugin's own ``validate``, columns
that clash with the results' own, modes that run no metrics; what the resolved config and
the run fingerprint record. The metrics are local plugin files (``plugins:``)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from dcsim import plugins
from dcsim.errors import ConfigError
from dcsim.runner import fingerprint
from dcsim.runner.plan import load_experiment, resolved_config
from tests.helpers.cli import invoke, ok
from tests.helpers.runs import QUICKSTART

METRIC = '''
from pydantic import Field

from dcsim.errors import ConfigError
from dcsim.hookspecs import hookimpl
from dcsim.metrics import Column, Metric


class Busy(Metric):
    """Decisions that placed a request, and the largest count of requests held at once."""

    name = "busy_here"
    summary_columns = {"busy_placed": Column("int64", "requests placed"),
                       "busy_peak": Column("int64", "most requests held at once")}
    timeseries_columns = {"busy_held": Column("int64", "requests held now")}

    class Options(Metric.Options):
        scale: int = Field(default=1, ge=1)

    @classmethod
    def validate(cls, options, spec):
        if options.scale == 13:
            raise ConfigError("options.scale: 13 is unlucky")

    def on_start(self, run):
        self.placed = self.held = self.peak = 0

    def on_decision(self, now, request, placement):
        if placement is not None:
            self.placed += 1
            self.held += 1
            self.peak = max(self.peak, self.held)

    def on_departure(self, now, request, placement):
        self.held -= 1

    def sample(self, now):
        return {"busy_held": self.held * self.options.scale}

    def summary(self):
        return {"busy_placed": self.placed * self.options.scale,
                "busy_peak": self.peak * self.options.scale}


class Clash(Metric):
    name = "clash_here"
    summary_columns = {"acceptance_ratio": Column("float64", "taken")}


class FamilyClash(Metric):
    name = "family_clash_here"
    timeseries_columns = {"util_gpu": Column("float64", "a util_<resource> name")}


class Same(Metric):
    name = "same_here"
    summary_columns = {"busy_peak": Column("int64", "busy_here's too")}


class Rate(Metric):
    name = "rate_here"
    summary_columns = {"rate": Column("float64", "what a sweep of workload.arrival.rate "
                                                 "names its column")}


class Untyped(Metric):
    name = "untyped_here"
    summary_columns = {"untyped_x": "float64"}


@hookimpl
def register_metrics(register):
    for cls in (Busy, Clash, FamilyClash, Same, Rate, Untyped):
        register(cls)
'''


@pytest.fixture(autouse=True)
def _forget_local_plugins():
    yield
    plugins.reset()
    fingerprint.reset()


def experiment(tmp_path: Path, metrics, **extra) -> Path:
    (tmp_path / "busy.py").write_text(METRIC)
    cfg = yaml.safe_load(QUICKSTART.read_text())
    cfg.update(plugins=["busy.py"], allocators=["first_fit"], seeds=1)
    cfg["workload"]["requests"] = 600
    cfg["warmup"]["requests"] = 100
    cfg["metrics"] = {"sample_every": 50, "plugins": metrics}
    cfg.update(extra)
    f = tmp_path / "exp.yaml"
    f.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return f


def refused(tmp_path, metrics, **extra) -> str:
    with pytest.raises(ConfigError) as e:
        load_experiment(experiment(tmp_path, metrics, **extra))
    return str(e.value)


def test_an_unknown_metric_lists_the_available_ones(tmp_path):
    msg = refused(tmp_path, ["busy_here", "nope"])
    assert "exp.yaml: metrics.plugins.1.name: unknown metric 'nope'; available: " in msg
    assert "busy_here" in msg


def test_options_are_validated_naming_the_field(tmp_path):
    msg = refused(tmp_path, [{"name": "busy_here", "options": {"scale": 0}}])
    assert "exp.yaml: metrics.plugins.0.options.scale: " in msg and "metric 'busy_here'" in msg
    msg = refused(tmp_path, [{"name": "busy_here", "options": {"scael": 2}}])
    assert "metrics.plugins.0.options.scael" in msg
    msg = refused(tmp_path, [{"name": "busy_here", "option": {}}])
    assert "metrics.plugins.0.option" in msg


def test_the_metrics_own_validate_is_honoured(tmp_path):
    msg = refused(tmp_path, [{"name": "busy_here", "options": {"scale": 13}}])
    assert msg.endswith("metrics.plugins.0: options.scale: 13 is unlucky (metric 'busy_here')")


@pytest.mark.parametrize("metrics, words", [
    (["clash_here"], "declares summary column 'acceptance_ratio', which is a built-in "
                     "column of summary (loss mode)"),
    (["family_clash_here"], "declares timeseries column 'util_gpu', which is a built-in "
                            "column of timeseries (loss mode)"),
    (["busy_here", "same_here"], "metrics.plugins.1: metric 'same_here' declares summary "
                                 "column 'busy_peak', which is declared by metrics.plugins.0 "
                                 "('busy_here') too"),
    (["busy_here", "busy_here"], "declared by metrics.plugins.0 ('busy_here') too"),
    (["untyped_here"], "summary column 'untyped_x': declare it as "
                       "dcsim.metrics.Column(type, meaning)"),
])
def test_columns_that_are_taken_or_malformed_are_refused(tmp_path, metrics, words):
    assert words in refused(tmp_path, metrics)


def test_a_swept_key_named_like_a_metric_column_is_refused(tmp_path):
    msg = refused(tmp_path, ["rate_here"], matrix={"workload.arrival.rate": [5, 10]})
    assert "declares summary column 'rate', which is the column of a swept key" in msg


def test_a_mode_without_metrics_refuses_them_naming_the_mode(tmp_path):
    (tmp_path / "busy.py").write_text(METRIC)
    f = tmp_path / "q.yaml"
    f.write_text(yaml.safe_dump({
        "name": "q", "mode": "queue", "plugins": ["busy.py"],
        "workload": {"kind": "deeprm", "jobsets": 1, "steps": 5}, "schedulers": ["sjf"],
        "metrics": {"plugins": ["busy_here"]}}))
    r = invoke("validate", f)
    assert r.exit_code != 0
    assert ("metrics.plugins: mode 'queue' does not run metric plugins (modes loss, "
            "vm_online, gpu do); leave metrics.plugins out") in r.output
    assert "Traceback" not in r.output


def test_resolved_config_and_fingerprint(tmp_path):
    exp = load_experiment(experiment(tmp_path, ["busy_here"]))
    assert exp.runs[0].metrics == ({"name": "busy_here", "options": {"scale": 1}},)
    assert resolved_config(exp)["metrics"]["plugins"] == [{"name": "busy_here",
                                                           "options": {"scale": 1}}]
    code = fingerprint.run_code(exp.runs[0])
    assert [(p["kind"], p["name"]) for p in code["plugins"]] == [("metric", "busy_here")]
    assert code["plugins"][0]["distribution"].startswith("local:")
    plain = load_experiment(experiment(tmp_path, []))
    assert "plugins" not in resolved_config(plain)["metrics"]  # as before metrics existed
    assert fingerprint.run_code(plain.runs[0])["plugins"] == []
    assert plain.runs[0].run_id != exp.runs[0].run_id


def test_a_run_writes_the_columns_and_the_report_tables_them(tmp_path):
    f = experiment(tmp_path, [{"name": "busy_here", "options": {"scale": 2}}])
    out = tmp_path / "out"
    ok("run", f, "--out", out)
    s = pd.read_parquet(out / "summary.parquet")
    req = pd.read_parquet(out / "requests")
    ts = pd.read_parquet(out / "timeseries")
    # every placed request, warm-up included (a metric sees the whole run), times the scale
    assert s["busy_placed"].tolist() == [2 * int(req["accepted"].sum())]
    assert s["busy_peak"].iloc[0] >= 2 * ts["active"].max()
    assert (ts["busy_held"] == 2 * ts["active"]).all()  # both count the requests held
    assert s["busy_placed"].dtype == "int64" and ts["busy_held"].dtype == "int64"
    ok("report", out, "--no-figures")
    tables = (out / "report" / "tables.md").read_text()
    assert "busy_placed" in tables and "busy_peak" in tables
