"""A trace format and a command from an installed package (issue #50): a tiny distribution
written here (a pipe-separated trace dialect and ``dcsim trace-stats``), pip-installed
offline into a temporary folder that only the subprocesses put on ``PYTHONPATH``: listed by
``dcsim plugins`` with its package, used by ``dcsim import-trace`` and by
``workload.trace.format`` in an experiment, its options checked before a run, its command
offered by ``dcsim``; and a broken package beside it is one warning line."""

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
name = "dcsim-pipe-trace"
version = "0.1.0"
dependencies = ["dcsim", "click"]

[project.entry-points.dcsim]
pipe_trace = "dcsim_pipe_trace"
"""

MODULE = '''\
"""A pipe-separated trace (``start|end|cores|gb``, a header line) and ``dcsim trace-stats``."""

import click
import pandas as pd
from pydantic import Field

from dcsim import hookimpl
from dcsim.workload import TraceFormat


class PipeTrace(TraceFormat):
    name = "pipe_csv"
    description = "start|end|cores|gb lines, times in time_unit seconds"

    class Options(TraceFormat.Options):
        time_unit: float = Field(1.0, gt=0, description="seconds per time unit")
        min_cores: float = Field(0.0, ge=0, description="drop requests below this")

    def read(self, src):
        df = pd.read_csv(src, sep="|")
        o = self.options
        keep = df["cores"] >= o.min_cores
        kept = df[keep]
        out = pd.DataFrame({
            "id": range(len(kept)),
            "arrival": kept["start"].to_numpy(float) * o.time_unit,
            "duration": (kept["end"] - kept["start"]).to_numpy(float) * o.time_unit,
            "cpu": kept["cores"].to_numpy(float), "mem": kept["gb"].to_numpy(float)})
        out = out.sort_values("arrival", kind="stable").reset_index(drop=True)
        out.attrs = {"rows_read": len(df), "dropped": {"min_cores": int((~keep).sum())}}
        return out


@click.command("trace-stats")
@click.argument("fmt", metavar="FORMAT")
@click.argument("src", type=click.Path(exists=True))
@click.option("--option", "options", multiple=True, metavar="KEY=VALUE",
              help="An option of the trace format.")
def trace_stats(fmt, src, options):
    """Count the requests of a trace and their mean demand."""
    from dcsim.config_files import parse_set
    from dcsim.workload import import_trace

    df = import_trace(fmt, src, **dict(parse_set(o) for o in options))
    click.echo(f"{len(df)} requests, mean cpu {df['cpu'].mean():g}, "
               f"mean duration {df['duration'].mean():g} s")


@hookimpl
def register_trace_formats(register):
    register(PipeTrace)


@hookimpl
def register_commands(register):
    register(trace_stats)
'''

TRACE = "start|end|cores|gb\n0|2|1|2\n1|3|4|8\n1|5|0.5|1\n2|3|2|4\n"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("pipe")
    src = tmp / "src"
    (src / "dcsim_pipe_trace").mkdir(parents=True)
    (src / "pyproject.toml").write_text(PYPROJECT)
    (src / "dcsim_pipe_trace" / "__init__.py").write_text(MODULE)
    return install_into(src, tmp / "site")


def run(site: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "DCSIM_PLUGINS"}
    environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(site), str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return subprocess.run([sys.executable, "-m", "dcsim", *args], cwd=cwd, env=environ,
                          capture_output=True, text=True, timeout=120)


def error_line(done: subprocess.CompletedProcess) -> str:
    """The one ``error:`` line of a refused command (exit 1, no traceback)."""
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    (line,) = [ln for ln in done.stderr.splitlines() if ln.startswith("error:")]
    return line


def experiment(tmp_path: Path, options: dict) -> Path:
    (tmp_path / "t.psv").write_text(TRACE)
    exp = {"name": "pipe", "seed": 1,
           "topology": {"kind": "flat", "servers": 2, "server": {"cpu": 8, "mem": 16}},
           "workload": {"trace": {"path": "t.psv", "format": "pipe_csv", "options": options}},
           "allocators": ["first_fit"]}
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(exp))
    return path


@pytest.mark.slow  # a pip install and a dozen dcsim processes: ~30 s on a busy machine
def test_an_installed_trace_format_and_command(site, tmp_path):
    done = run(site, tmp_path, "plugins", "--kind", "trace_format", "--kind", "command")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "  pipe_csv  [dcsim-pipe-trace]  start|end|cores|gb lines, times in time_unit " \
           "seconds" in lines
    assert "      time_unit: float = 1.0" in lines
    assert "  trace-stats  [dcsim-pipe-trace]  Count the requests of a trace and their mean " \
           "demand." in lines
    assert any(ln.startswith("  azure2020  [dcsim]  ") for ln in lines)  # beside the built-ins

    # dcsim import-trace with the package's format and an option
    (tmp_path / "t.psv").write_text(TRACE)
    done = run(site, tmp_path, "import-trace", "pipe_csv", "t.psv", "out.csv", "--option",
               "time_unit=60", "--option", "min_cores=1")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "3 requests -> out.csv\n"
    table = pd.read_csv(tmp_path / "out.csv")
    assert table["arrival"].tolist() == [0.0, 60.0, 120.0]
    assert table["duration"].tolist() == [120.0, 120.0, 60.0]
    assert "pipe_csv importer: option time_unit: Input should be greater than 0" in \
        error_line(run(site, tmp_path, "import-trace", "pipe_csv", "t.psv", "o.csv",
                       "--option", "time_unit=0"))

    # an experiment reads the trace through the format: its rows are the run's requests
    exp = experiment(tmp_path, {"time_unit": 10})
    done = run(site, tmp_path, "run", str(exp), "--out", "res")
    assert done.returncode == 0, done.stdout + done.stderr
    s = pd.read_parquet(tmp_path / "res" / "summary.parquet")
    assert s["received"].tolist() == [4] and s["accepted"].tolist() == [4]
    req = pd.read_parquet(tmp_path / "res" / "requests").sort_values(["arrival", "duration"])
    assert req["arrival"].tolist() == [0.0, 10.0, 10.0, 20.0]
    assert req["duration"].tolist() == [20.0, 20.0, 40.0, 10.0]

    # a bad option is one line naming it, from validate and from run, before any run
    bad = experiment(tmp_path, {"time_unit": "fast"})
    for args in (("validate", str(bad)), ("run", str(bad), "--out", "bad")):
        assert "exp.yaml: workload.trace.options.time_unit: expected a number, got 'fast'" \
            in error_line(run(site, tmp_path, *args))
    assert not (tmp_path / "bad").exists()

    # the package's command: offered by dcsim, listed in --help
    done = run(site, tmp_path, "trace-stats", "pipe_csv", "t.psv", "--option", "time_unit=2")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "4 requests, mean cpu 1.875, mean duration 4.5 s\n"
    done = run(site, tmp_path, "--help")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert any(ln.split()[:1] == ["trace-stats"] for ln in done.stdout.splitlines())
    assert "error: alibaba2018 importer: option x: unknown option" in error_line(
        run(site, tmp_path, "trace-stats", "alibaba2018", "t.psv", "--option", "x=1"))


BROKEN_DIST = {
    "dcsim_broken_fmt.py": "import no_such_module_zzz  # the package's own bug\n",
    "dcsim_broken_fmt-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: "
                                               "dcsim-broken-fmt\nVersion: 0.1\n",
    "dcsim_broken_fmt-0.1.dist-info/entry_points.txt": "[dcsim]\nbroken_fmt = "
                                                       "dcsim_broken_fmt\n",
}


@pytest.mark.slow  # shares the installed package; a few dcsim processes
def test_a_broken_package_beside_it_is_one_warning(site, tmp_path):
    """A second installed package that fails to import: every command warns once and
    works; the first package's format and command are still offered."""
    broken = tmp_path / "broken_site"
    for name, text in BROKEN_DIST.items():
        (broken / name).parent.mkdir(parents=True, exist_ok=True)
        (broken / name).write_text(text)
    both = Path(f"{broken}{os.pathsep}{site}")
    warning = ("warning: plugin 'broken_fmt' failed to load (ModuleNotFoundError: No module "
               "named 'no_such_module_zzz'); left out")
    exp = experiment(tmp_path, {"time_unit": 10})
    for args in (("--help",), ("run", str(exp), "--out", "res"),
                 ("trace-stats", "pipe_csv", "t.psv")):
        done = run(both, tmp_path, *args)
        assert done.returncode == 0, done.stdout + done.stderr
        warned = [ln for ln in done.stderr.splitlines() if not ln.startswith("[")]  # progress
        assert warned == [warning], done.stderr
    assert pd.read_parquet(tmp_path / "res" / "summary.parquet")["received"].tolist() == [4]
    assert "trace-stats" in run(both, tmp_path, "--help").stdout
