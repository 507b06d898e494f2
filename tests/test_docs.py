"""The documentation keeps up with the code: every hook, setting, kind, option and column."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner
from pydantic import BaseModel

from dcsim import hookspecs, plugins
from dcsim.cli import main
from dcsim.experiment_sections import AllocatorSpec, MetricsSpec
from dcsim.model.topologies import TOPOLOGY_KINDS
from dcsim.modes import MODES
from dcsim.modes.loss.spec import WarmupSpec
from dcsim.modes.queue.spec import DeepRMJobs, QueueSpec, TraceJobs
from dcsim.runner.config import experiment_model
from dcsim.workload.arrivals import PROCESSES
from dcsim.workload.distributions import KINDS
from dcsim.workload.spec import TraceSpec, WorkloadSpec

DOCS = Path(__file__).resolve().parents[1] / "docs"

TINY = {
    "name": "docs_check",
    "seed": 3,
    "topology": {"kind": "fat_tree", "pods": 2, "racks": 2, "hosts": 2,
                 "server": {"cpu": 8, "mem": 16}, "host_link": 10},
    "workload": {
        "requests": 60,
        "arrival": {"process": "poisson", "rate": 2},
        "demand": {"cpu": {"dist": "uniform_int", "low": 1, "high": 4}, "mem": 2},
        "duration": {"dist": "exponential", "offered_load": 0.8},
    },
    "warmup": {"requests": 10},
    "metrics": {"sample_every": 10},
    "allocators": ["first_fit"],
}


def page(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def backticked(text: str) -> set[str]:
    """Every `name` written in backticks in ``text``."""
    return set(re.findall(r"`([^`\n]+)`", text))


def field_names(model: type[BaseModel]) -> list[str]:
    """A model's field names as YAML spells them (aliases such as ``mean`` included)."""
    return [info.alias or name for name, info in model.model_fields.items()]


def missing(names, text: str) -> list[str]:
    found = backticked(text)
    return sorted({n for n in names if n not in found})


def test_every_hook_is_documented():
    """Each hookspec in dcsim.hookspecs is named in the allocator how-to or in "extend
    dcsim", and every plugin kind in "extend dcsim"'s table."""
    hooks = [n for n, f in vars(hookspecs).items() if hasattr(f, "dcsim_spec")]
    assert hooks, "no hookspecs found"
    both = page("howto/write-an-allocator.md") + page("howto/extend-dcsim.md")
    assert missing(hooks, both) == []
    assert missing([plugins.HOOKS[k] for k in plugins.KINDS if k not in (
        "scheduler", "rescheduler", "placer", "gpu_allocator", "power_model")],
        page("howto/extend-dcsim.md")) == []


def test_every_experiment_field_is_documented():
    """Every top-level field of every mode, and every warmup, metrics and allocator field,
    appears in config.md."""
    names = [*(n for mode in MODES for n in field_names(experiment_model(mode))),
             *field_names(WarmupSpec), *field_names(MetricsSpec), *field_names(AllocatorSpec),
             *field_names(QueueSpec), *field_names(DeepRMJobs), *field_names(TraceJobs)]
    assert missing(names, page("reference/config.md")) == []


def test_every_workload_and_trace_field_is_documented():
    """Every WorkloadSpec and TraceSpec field appears in config.md."""
    names = [*field_names(WorkloadSpec), *field_names(TraceSpec)]
    assert missing(names, page("reference/config.md")) == []


def registered_builtins(kind: str) -> dict[str, type]:
    """The built-in classes registered for ``kind``, by name (what the reference checks)."""
    return {n: r.cls for n, r in plugins.registered(kind).items() if r.package == "dcsim"}


def test_every_topology_kind_and_field_is_documented():
    """Every registered built-in topology kind and each kind's fields appear in config.md."""
    found = registered_builtins("topology")
    assert set(found) == set(TOPOLOGY_KINDS)
    names = [*found, *(f for m in found.values() for f in field_names(m))]
    assert missing(names, page("reference/config.md")) == []


def test_every_distribution_kind_and_field_is_documented():
    """Every registered built-in `dist` kind, its fields and the modifiers appear in
    config.md."""
    found = registered_builtins("distribution")
    assert set(found) == set(KINDS)
    names = [*found, *(f for m in found.values() for f in field_names(m))]
    assert missing(names, page("reference/config.md")) == []


def test_every_arrival_process_is_documented():
    """Every registered built-in arrival `process` and its fields appear in config.md."""
    found = registered_builtins("arrival")
    assert set(found) == set(PROCESSES)
    names = [*found, *(f for m in found.values() for f in field_names(m))]
    assert missing(names, page("reference/config.md")) == []


def test_every_cli_command_and_option_is_documented():
    """Every `dcsim` subcommand (run included) and each of its options appears in config.md."""
    text = page("reference/config.md")
    assert "--overwrite" in [o for p in main.commands["run"].params for o in p.opts]
    names = [f"dcsim {c}" for c in main.commands]
    names += [o for cmd in main.commands.values() for p in cmd.params for o in p.opts
              if o.startswith("--")]
    absent = [n for n in names if not re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", text)]
    assert absent == []


@pytest.fixture(scope="module")
def output_columns(tmp_path_factory) -> dict[str, list[str]]:
    """Columns of summary, requests and timeseries of a tiny fat-tree experiment."""
    tmp = tmp_path_factory.mktemp("docs")
    config = tmp / "tiny.yaml"
    config.write_text(yaml.safe_dump(TINY, sort_keys=False))
    out = tmp / "out"
    result = CliRunner().invoke(main, ["run", str(config), "--out", str(out)])
    assert result.exit_code == 0, result.output
    return {
        "summary": list(pd.read_parquet(out / "summary.parquet").columns),
        "requests": list(pd.read_parquet(out / "requests").columns),
        "timeseries": list(pd.read_parquet(out / "timeseries").columns),
    }


@pytest.mark.parametrize("table", ["summary", "requests", "timeseries"])
def test_every_output_column_is_documented(output_columns, table):
    """Every column the tiny experiment writes is a backticked name in outputs.md."""
    columns = output_columns[table]
    assert "util_bw_host" in output_columns["summary"]  # the tier columns are exercised
    assert missing(columns, page("reference/outputs.md")) == []


def test_readme_first_commands_are_what_ci_runs():
    """The README's first command (install + the main experiment, small) and its test command
    are the ones .ci/run executes, so a red CI means the README is wrong for a new user."""
    root = DOCS.parent
    block = (root / "README.md").read_text().split("```bash\n")[1].split("```")[0]
    install_run, test_cmd = block.strip().splitlines()
    install, run, report = (part.strip() for part in install_run.split("&&"))
    ci = (root / ".ci" / "run").read_text().replace("\\\n", " ")
    ci = re.sub(r"\s+", " ", ci)
    assert install == 'pip install -e ".[dev,plot,fast]"' and f"python -m {install}" in ci
    assert "experiments/ahab_lambda12.yaml" in run
    main_args = run.split(" --out ")[0]  # CI writes to a temporary directory instead
    assert main_args in ci
    out = run.split(" --out ")[1].split()[0]
    assert report.startswith(f"dcsim report {out} ")  # the report of the same results
    assert report.replace(out, '"$out/ahab_lambda12_small"') in ci
    assert test_cmd == "python -m pytest" and ci.rstrip().endswith(test_cmd)


def test_the_repository_stands_alone():
    """A clone holds everything it points a reader (or a script, or a test) to: nothing in the
    tracked files names the developers' reading folder next to the repository."""
    import subprocess

    root = DOCS.parent
    try:
        hits = subprocess.run(["git", "grep", "-n", "-I", "-F", "-e", "/".join(["..", "shared"]),
                               "--", "."],
                              cwd=root, capture_output=True, text=True, timeout=60)
    except (FileNotFoundError, subprocess.TimeoutExpired):
        pytest.skip("git not available")
    if hits.returncode not in (0, 1):  # not a checkout (an unpacked sdist)
        pytest.skip(hits.stderr.strip())
    assert hits.stdout == "", hits.stdout


def test_every_environment_and_its_spaces_settings_and_info_are_documented():
    """docs/reference/environments.md names every registered id, every observation key,
    every setting and every info key of each environment (issue #36)."""
    gym = pytest.importorskip("gymnasium")
    import numpy as np

    from dcsim.environments import ENVIRONMENTS
    from dcsim.learn.nara.env import NaraEnvConfig
    from dcsim.learn.vmr2l.env import VMR2LEnvConfig

    text = page("reference/environments.md")
    names = set(ENVIRONMENTS) | set(field_names(NaraEnvConfig)) | set(
        field_names(VMR2LEnvConfig))
    small = {"dcsim/Nara-v0": {"requests": 4}}
    for env_id in ENVIRONMENTS:
        env = gym.make(env_id, **small.get(env_id, {"hosts": 4, "mnl": 2})).unwrapped
        names |= set(env.observation_space.spaces)
        obs, info = env.reset(seed=0)
        mask = env.action_masks() if hasattr(env, "action_masks") else None
        action = (int(np.flatnonzero(mask)[0]) if mask is not None
                  else env.action_space.sample())
        names |= set(info) | set(env.step(action)[4])
        assert ENVIRONMENTS[env_id].replace(":", ".") in text.replace("`", "")
    assert missing(names, text) == []


#: names the docs write as patterns, not as modules (design.md: ``from dcsim.x import _y``)
PLACEHOLDERS = {"dcsim.x"}


def named_modules(text: str, source: bool) -> set[str]:
    """The ``dcsim/…py`` paths and ``dcsim.x.y`` dotted names ``text`` mentions (in Python
    source, only those in backticks: a docstring's or comment's reference, not a string)."""
    tick = "`~?" if source else ""
    paths = re.findall(rf"{tick}(?<![\w/.-])(dcsim/[\w/]*\w\.py)\b", text)
    dotted = re.findall(rf"{tick}(?<![\w/.-])(dcsim(?:\.\w+)+)", text)  # not extend-dcsim.md
    return set(paths) | {d for d in dotted if d not in PLACEHOLDERS}


def stale_module_name(name: str, root: Path) -> str | None:
    """Why ``name`` (a path or a dotted name) does not point to real code, or None: the file
    does not exist, or no module and attribute chain resolves."""
    import importlib
    import importlib.util

    if "/" in name:
        if not (root / name).is_file():
            return "no such file"
        name = name.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            found = importlib.util.find_spec(".".join(parts[:i])) is not None
        except ImportError:
            found = False
        if not found:
            continue
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError as e:
            if not (e.name or "dcsim").startswith("dcsim"):
                return None  # an optional extra (numba, torch) is missing: the file exists
            raise
        module = obj
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return f"{module.__name__} has no {attr!r}"
            obj = getattr(obj, attr)
        return None
    return "no such module"


def test_every_module_the_docs_name_exists():
    """Every ``dcsim/…py`` path and ``dcsim.x.y`` name in README.md, docs/ and the modules'
    own docstrings is real code where it is now: the file exists, and the module and
    attribute resolve. Code that moves takes its mentions along; a historical note names
    the old file as "(then `x.py`)"."""
    root = DOCS.parent
    pages = [root / "README.md", *sorted(DOCS.rglob("*.md"))]
    sources = sorted((root / "dcsim").rglob("*.py")) + sorted((root / "benchmarks").glob("*.py"))
    stale = []
    for f in pages + sources:
        for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            for name in named_modules(line, source=f.suffix == ".py"):
                why = stale_module_name(name, root)
                if why:
                    stale.append(f"{f.relative_to(root)}:{n}: {name} ({why})")
    assert not stale, "\n".join(stale)
