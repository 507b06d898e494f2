"""Expand an experiment into independent runs: sweep points × allocators × seeds.

Each :class:`RunPlan` is self-contained (plain data, picklable) so any executor can run it,
and its ``run_id`` hashes everything that determines its rows, so a finished run is never
confused with a run of a changed config.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from dcsim.config_files import parse_set, read_yaml, set_dotted
from dcsim.errors import ConfigError, PluginError
from dcsim.labels import absolute_paths, without_paths
from dcsim.modes import MODES
from dcsim.plugins import get_plugin_class
from dcsim.results.schema import param_types
from dcsim.results.writer import label_problem
from dcsim.runner.config import ExperimentSpec, sweep_points, validate_spec


@dataclass(frozen=True)
class RunPlan:
    """One simulation to run: a resolved config with exactly one allocator and one seed."""

    experiment: str
    run_id: str
    seed: int
    label: str
    allocator: dict[str, Any]  # {"name", "options"}
    params: dict[str, Any]
    config: dict[str, Any]  # resolved experiment config of this sweep point
    base_dir: str
    where: str = field(default="allocators")  # field path of this allocator, for errors
    #: the sweep columns' types over the whole sweep (:func:`dcsim.results.schema.param_types`)
    param_types: dict[str, str] = field(default_factory=dict)
    #: ``config`` validated once, when the plan was made (None: validate it when run)
    spec: ExperimentSpec | None = field(default=None, compare=False, repr=False)
    #: the experiment's local plugin modules (``plugins:``), files as absolute paths: the
    #: process that runs the plan registers them first (:func:`dcsim.plugins.load_local`)
    local_plugins: tuple[str, ...] = ()
    #: the run's metric plugins (``metrics.plugins``), each ``{"name", "options"}`` with
    #: its options validated, in the order their hooks run
    metrics: tuple[dict[str, Any], ...] = ()


@dataclass
class Experiment:
    """A loaded, validated experiment and its runs."""

    name: str
    source: str
    raw: dict[str, Any]
    spec: ExperimentSpec
    runs: list[RunPlan]


def load_experiment(
    path: str | Path, seeds: int | None = None, sets: tuple[str, ...] | list[str] = ()
) -> Experiment:
    """Read, override, validate and expand ``path``; raise :class:`ConfigError` on any problem."""
    path = Path(path)
    source = str(path)
    raw = read_yaml(path)
    for item in sets:
        key, value = parse_set(item)
        set_dotted(raw, key, value, where=f"--set {item}")
    if seeds is not None:
        if seeds < 1:
            raise ConfigError("--seeds: must be at least 1")
        raw["seeds"] = seeds
    spec = validate_spec(raw, source)
    base_dir = str(path.resolve().parent)
    local = local_plugins(spec.plugins, base_dir, source)
    runs: list[RunPlan] = []
    # what a run id does not hash: the seed count and every mode's plugin list (the run's
    # own plugin is hashed as its entry)
    not_hashed = ("seeds", *(m.plugin_key for m in MODES.values()))
    for params, data in sweep_points(spec, raw, source):
        point = _check_point(validate_spec(data, source), data, source, base_dir)
        metrics = metric_plugins(point, params, source)
        labels: dict[str, int] = {}
        key_name, kind = point.plugin_key, point.plugin_kind
        for i, a in enumerate(point.allocator_specs()):
            where = f"{key_name}.{i}"
            try:
                cls = get_plugin_class(a.name, kind)
            except PluginError as e:
                raise ConfigError(f"{source}: {where}.name: {e}") from None
            options = cls.parse_options(a.options, where=f"{source}: {where}.options")
            try:  # the plugin's own refusal of this experiment (Configurable.validate)
                cls.validate(options, point)
            except (ConfigError, ValueError) as e:
                raise ConfigError(f"{source}: {where}: {e} ({kind} {a.name!r})") from None
            label = a.label or without_paths(cls.label_for(options))
            problem = label_problem(label) or _path_problem(label)
            if problem:
                raise ConfigError(f"{source}: {where}.label: {label[:40]!r}"
                                  f"{'...' if len(label) > 40 else ''} {problem}")
            if label in labels:
                raise ConfigError(
                    f"{source}: {where}: label {label!r} is used by {key_name}.{labels[label]} "
                    "too; give one of them a distinct `label:`"
                )
            labels[label] = i
            alloc = {"name": a.name, "options": options.model_dump(mode="json")}
            for s in range(point.seeds):
                key = json.dumps(
                    {"config": {k: v for k, v in data.items() if k not in not_hashed},
                     "allocator": alloc, "label": label, "seed": s, "params": params},
                    sort_keys=True, default=str,
                )
                digest = hashlib.sha1(key.encode()).hexdigest()[:10]
                run_id = f"{_slug(label)}-s{s}-{digest}"
                runs.append(
                    RunPlan(spec.name, run_id, s, label, alloc, params, data, base_dir, where,
                            spec=point, local_plugins=local, metrics=metrics)
                )
    types = param_types(r.params for r in runs)
    runs = [replace(r, param_types=types) for r in runs]
    return Experiment(spec.name, source, raw, spec, runs)


def metric_plugins(point: ExperimentSpec, params: dict[str, Any], source: str
                   ) -> tuple[dict[str, Any], ...]:
    """The sweep point's ``metrics.plugins``, each ``{"name", "options"}`` with its options
    validated and its own ``validate`` passed; a :class:`ConfigError` names the entry when
    the mode runs no metrics, the name is unknown, an option is wrong, or a column it
    declares is malformed or already a column of the results (a built-in one, a sweep
    parameter's or another metric's)."""
    entries = point.metrics.plugin_specs()
    if not entries:  # nothing imported: validating an experiment stays light
        return ()
    from dcsim.metrics import column_problem
    from dcsim.results.names import RESERVED_COLUMNS
    from dcsim.results.stats import column

    mode = MODES[point.mode]
    if not mode.runs_metrics:
        readers = [m.name for m in MODES.values() if m.runs_metrics]
        raise ConfigError(f"{source}: metrics.plugins: mode {point.mode!r} does not run "
                          f"metric plugins (mode{'s' if len(readers) > 1 else ''} "
                          f"{', '.join(readers)} do{'es' if len(readers) == 1 else ''}); "
                          "leave metrics.plugins out")
    out: list[dict[str, Any]] = []
    taken: dict[tuple[str, str], str] = {}  # (table, column) -> the metric entry declaring it
    for i, entry in enumerate(entries):
        where = f"metrics.plugins.{i}"
        try:
            cls = get_plugin_class(entry.name, "metric")
        except PluginError as e:
            raise ConfigError(f"{source}: {where}.name: {e}") from None
        options = cls.parse_options(entry.options, where=f"{source}: {where}.options")
        try:
            cls.validate(options, point)
        except (ConfigError, ValueError) as e:
            raise ConfigError(f"{source}: {where}: {e} (metric {entry.name!r})") from None
        for table in ("summary", "timeseries"):
            problem = column_problem(cls, table)
            if problem:
                raise ConfigError(f"{source}: {where}: metric {entry.name!r}: {problem}")
            for name in getattr(cls, f"{table}_columns"):
                clash = None
                if name in RESERVED_COLUMNS or column(name, point.mode, table) is not None:
                    clash = f"a built-in column of {table} ({point.mode} mode)"
                elif name in params:
                    clash = "the column of a swept key"
                elif (table, name) in taken:
                    clash = f"declared by {taken[table, name]} too"
                if clash:
                    raise ConfigError(
                        f"{source}: {where}: metric {entry.name!r} declares {table} column "
                        f"{name!r}, which is {clash}; a metric's columns must be new names")
                taken[table, name] = f"{where} ({entry.name!r})"
        out.append({"name": entry.name, "options": options.model_dump(mode="json")})
    return tuple(out)


def local_plugins(entries: list[str], base_dir: str, source: str) -> tuple[str, ...]:
    """Register the experiment's ``plugins:`` (a ``.py`` file relative to the experiment
    file, or an importable module name) and return them as the runs carry them (files as
    absolute paths); a missing or broken one is a :class:`ConfigError` naming the entry."""
    from dcsim.plugins import load_local

    out = []
    for i, entry in enumerate(entries):
        target = str(Path(base_dir, entry)) if entry.endswith(".py") else entry
        try:
            load_local(target)
        except PluginError as e:
            raise ConfigError(f"{source}: plugins.{i}: {e}") from None
        out.append(str(Path(target).resolve()) if entry.endswith(".py") else entry)
    return tuple(out)


def _check_point(point: ExperimentSpec, data: dict[str, Any], source: str, base_dir: str
                 ) -> ExperimentSpec:
    """The point with its mode's sections typed (:meth:`Mode.sections`), after building what
    a run of it needs once (its mode's checks), so that errors surface before anything
    runs."""
    mode = MODES[point.mode]
    try:
        point = point.model_copy(update=mode.sections(point))
        mode.check(point, base_dir)
    except ConfigError as e:
        raise ConfigError(f"{source}: {e}") from None
    return point


def _path_problem(label: str) -> str | None:
    """Why a ``label:`` holding an absolute path is refused (labels name results and
    reports, which travel; :mod:`dcsim.labels`), or None."""
    found = absolute_paths(label)
    if found:
        return (f"holds an absolute path ({found[0][:60]}); a label names results and "
                "reports: name the file, not its folder")
    return None


def _slug(label: str) -> str:
    """The label as the start of a run id (and of its file names): no leading ``.`` or
    ``_``, which Parquet readers take for hidden files and skip."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", label).lstrip("._").rstrip("_") or "run"


def resolved_config(exp: Experiment) -> dict[str, Any]:
    """The experiment with every default filled in (what ``experiment.yaml`` records)."""
    mode = MODES[exp.spec.mode]
    unused = {m.plugin_key for m in MODES.values()}
    for section in ("failures", "power", "plugins"):  # written only when the file has them
        if not getattr(exp.spec, section, None):
            unused.add(section)
    out = exp.spec.model_dump(mode="json", exclude=unused)
    metrics = exp.runs[0].metrics if exp.runs else ()
    if metrics:  # each metric's options with their defaults filled in
        out["metrics"]["plugins"] = [dict(m) for m in metrics]
    else:  # written only when the file has some
        out["metrics"].pop("plugins", None)
    out.update(mode.resolved(exp.spec))
    allocators, seen = [], set()
    for r in exp.runs:
        if r.label not in seen:
            seen.add(r.label)
            allocators.append({"name": r.allocator["name"], "label": r.label,
                               "options": r.allocator["options"]})
    out[exp.spec.plugin_key] = allocators
    return out
