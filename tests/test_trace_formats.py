"""Trace formats are a plugin kind: the built-in importers register as TraceFormats whose
Options are their keywords, import_trace and workload.trace.format look formats up in the
registry, and a format's options are checked when the experiment is read."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from dcsim import plugins
from dcsim.cli import main
from dcsim.errors import ConfigError
from dcsim.workload import importers
from dcsim.workload.trace_format import TraceFormat
from dcsim.workload.trace_import import import_trace, trace_formats

RAW = Path(__file__).parent / "data" / "traces"

#: each built-in format, the importer function it wraps, a sample and options to read it
BUILTIN = {
    "azure2017": (importers.import_azure2017, RAW / "azure2017", {"lifetime": "uniform",
                                                                 "spread": "even", "seed": 4}),
    "alibaba2018": (importers.import_alibaba2018, RAW / "alibaba2018_batch_task_head.csv",
                    {"statuses": None, "expand_instances": True}),
    "azure2020": (importers.import_azure2020, RAW / "azure2020_requests_head.csv",
                  {"horizon_days": 14}),
    "alibaba2018_containers": (importers.import_alibaba2018_containers,
                               RAW / "alibaba2018_container_meta_head.csv", {}),
    "azure2020_vmtypes": (importers.import_azure2020_vmtypes,
                          RAW / "azure2020_vm_types_head.csv", {"machine_id": 16}),
}


def test_the_built_in_formats_are_registered_with_their_importers_keywords():
    """Each importer is a registered format (package dcsim) whose Options are exactly the
    importer's keywords, with the same defaults."""
    found = plugins.registered("trace_format")
    assert list(found)[:5] == list(BUILTIN)
    for name, (fn, _, _) in BUILTIN.items():
        cls = found[name].cls
        assert issubclass(cls, TraceFormat) and found[name].package == "dcsim"
        params = list(inspect.signature(fn).parameters.values())[1:]
        fields = cls.Options.model_fields
        assert list(fields) == [p.name for p in params], name
        for p in params:
            assert fields[p.name].get_default() == p.default, (name, p.name)


def test_dcsim_plugins_lists_the_formats_and_their_options():
    r = CliRunner().invoke(main, ["plugins", "--kind", "trace_format"])
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0] == "trace_formats:"
    assert "      statuses: tuple[str, ...] | None = ('Terminated',)" in lines
    assert "      lifetime: 'mid' | 'lower' | 'uniform' = 'mid'" in lines
    assert sum(ln.startswith("  ") and not ln.startswith("   ") for ln in lines) == len(
        trace_formats())


@pytest.mark.parametrize("name", list(BUILTIN))
def test_a_built_in_format_reads_what_its_importer_reads(name):
    fn, src, opts = BUILTIN[name]
    got = import_trace(name, src, **opts)
    want = fn(src, **opts)
    pd.testing.assert_frame_equal(got, want)
    assert got.attrs == want.attrs and "rows_read" in got.attrs and "dropped" in got.attrs


@pytest.mark.parametrize(("name", "opts", "says"), [
    ("azure2017", {"seed": True}, "azure2017 importer: option seed: expected an integer, "
                                  "got True"),
    ("azure2017", {"lifetime": "max"}, "option lifetime: expected 'mid', 'lower' or "
                                       "'uniform', got 'max'"),
    ("alibaba2018", {"statuses": ["Terminated", 3]},
     "option statuses: expected a list of names or null, got ['Terminated', 3]"),
    ("azure2020", {"horizon_days": "14"}, "option horizon_days: expected a number, got '14'"),
    ("azure2020", {"horizon_days": float("inf")}, "option horizon_days: Input should be a "
                                                  "finite number"),
    ("azure2020_vmtypes", {"machine_id": 1.5}, "option machine_id: expected an integer or "
                                               "null, got 1.5"),
    ("alibaba2018_containers", {"x": 1}, "option x: unknown option; alibaba2018_containers "
                                         "takes no options"),
])
def test_a_bad_option_names_the_option(name, opts, says):
    with pytest.raises(ConfigError) as e:
        import_trace(name, BUILTIN[name][1], **opts)
    assert says in str(e.value)


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def experiment(tmp_path: Path, trace: dict, **extra) -> Path:
    cfg = {"name": "t", "seed": 1,
           "topology": {"kind": "flat", "servers": 4, "server": {"cpu": 64, "mem": 64}},
           "workload": {"trace": trace}, "allocators": ["first_fit"], **extra}
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def one_error(r) -> str:
    assert r.exit_code == 1, r.output
    assert "Traceback" not in r.output
    lines = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, r.output
    return lines[0]


@pytest.mark.parametrize(("trace", "says"), [
    ({"format": "alibaba2018", "options": {"expand_instances": "maybe"}},
     "workload.trace.options.expand_instances: expected true or false, got 'maybe'"),
    ({"format": "alibaba2018", "options": {"expand": True}},
     "workload.trace.options.expand: unknown option; alibaba2018 takes statuses, "
     "expand_instances"),
    ({"format": "google"}, "workload.trace.format: unknown trace format 'google'; expected "
                           "one of table, azure2017, alibaba2018"),
    ({"format": "azure2020", "split": "dev"}, "workload.trace.split: only for format "
                                              "azure2017"),
    ({"options": {"horizon_days": 3}}, "workload.trace.options: only for a trace format, "
                                       "not format: table"),
])
def test_validate_checks_the_format_and_its_options_before_reading(tmp_path, trace, says):
    """The options are checked when the experiment is read, before any file is: the path
    here does not even exist."""
    exp = experiment(tmp_path, {"path": "missing.csv", **trace})
    assert says in one_error(cli("validate", exp))


SEMICOLON = '''\
"""A tiny trace dialect: ``start;end;cores`` lines, times in minutes."""

import pandas as pd
from pydantic import Field

from dcsim.hookspecs import hookimpl
from dcsim.workload import TraceFormat


class Semicolon(TraceFormat):
    name = "semicolon_test"
    description = "start;end;cores, minutes"

    class Options(TraceFormat.Options):
        minute: float = Field(60.0, gt=0)
        mem_per_core: float = 2.0

    def read(self, src):
        rows = [line.split(";") for line in src.read_text().split() if line]
        o = self.options
        start = [float(r[0]) * o.minute for r in rows]
        df = pd.DataFrame({
            "id": range(len(rows)), "arrival": start,
            "duration": [float(r[1]) * o.minute - s for r, s in zip(rows, start)],
            "cpu": [float(r[2]) for r in rows],
            "mem": [float(r[2]) * o.mem_per_core for r in rows]})
        df.attrs = {"rows_read": len(rows), "dropped": {}}
        return df


@hookimpl
def register_trace_formats(register):
    register(Semicolon)
'''


@pytest.fixture
def forget_local_plugins():
    yield
    plugins.reset()


def test_a_local_trace_format_runs_an_experiment(tmp_path, forget_local_plugins):
    """A format from the experiment's own plugin file: import-trace is not needed, its
    options are validated (naming the option) and its rows are what the run replays."""
    (tmp_path / "semicolon.py").write_text(SEMICOLON)
    (tmp_path / "t.txt").write_text("0;2;1\n1;3;2\n1;4;4\n")
    trace = {"path": "t.txt", "format": "semicolon_test", "options": {"minute": 1}}
    exp = experiment(tmp_path, trace, plugins=["semicolon.py"])
    r = cli("run", exp, "--out", tmp_path / "out")
    assert r.exit_code == 0, r.output
    req = pd.read_parquet(tmp_path / "out" / "requests").sort_values("arrival")
    assert req["arrival"].tolist() == [0.0, 1.0, 1.0]
    assert req["duration"].tolist() == [2.0, 2.0, 3.0]
    s = pd.read_parquet(tmp_path / "out" / "summary.parquet")
    assert s["received"].tolist() == [3] and s["accepted"].tolist() == [3]
    assert "semicolon_test" in trace_formats()
    # the format's code is part of the run's fingerprint, like an allocator plugin's
    (record,) = (tmp_path / "out" / "runs").glob("*.json")
    used = json.loads(record.read_text())["code"]["plugins"]
    assert [(p["kind"], p["name"]) for p in used] == [("trace_format", "semicolon_test")]
    assert used[0]["distribution"].startswith("local:")
    bad = experiment(tmp_path, {**trace, "options": {"minute": 0}}, plugins=["semicolon.py"])
    assert "workload.trace.options.minute: Input should be greater than 0" in one_error(
        cli("validate", bad))
