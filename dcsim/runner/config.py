"""Experiment files: YAML → validated config, ``--set`` overrides and the ``matrix:`` sweep.

Every error names the file and the field path (``experiments/x.yaml: workload.arrival.rate:
Input should be greater than 0``) and is raised as :class:`ConfigError`.
"""

from __future__ import annotations

import copy
import functools
import itertools
import json
from typing import Annotated, Any

from pydantic import Field, ValidationError, create_model, model_validator

from dcsim.config_files import set_dotted
from dcsim.errors import ConfigError
from dcsim.experiment_sections import AllocatorSpec, MetricsSpec
from dcsim.modes import MODES
from dcsim.modes.base import SECTION_ORDER, Mode
from dcsim.results.names import RESERVED_COLUMNS
from dcsim.validation import StrictModel

#: the fields every experiment file has, whatever its mode
COMMON = ("name", "description", "mode", "seed", "seeds", "plugins", "metrics", "matrix")


class ExperimentSpec(StrictModel):
    """The whole experiment file: the fields every mode has, then (in a subclass per mode,
    :func:`experiment_model`) the sections its mode reads (:attr:`Mode.own_sections`) and
    its plugin list. ``mode:`` picks the mode (:data:`dcsim.modes.MODES`: ``loss``, the
    default, ``queue``, ``reschedule``, ``vm_online``, ``gpu``); a section the mode does not
    read is refused, naming the modes that read it.

    In a sweep point the sections a mode parses itself (``topology``, ``workload``, ``vm``,
    ``gpu``) hold its typed models (:meth:`Mode.sections`) in place of the file's mappings.
    """

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.\-]+$")]
    description: str = ""
    mode: str = "loss"
    seed: Annotated[int, Field(ge=0)] = 0
    seeds: Annotated[int, Field(ge=1)] = 1
    #: local plugin modules: Python files (relative to the experiment file) or importable
    #: module names whose hooks register plugins as an installed package's do
    #: (:func:`dcsim.plugins.load_local`)
    plugins: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)

    @property
    def mode_object(self) -> Mode:
        """The :class:`~dcsim.modes.base.Mode` of this experiment."""
        return MODES[self.mode]

    @property
    def plugin_key(self) -> str:
        """The list this mode's plugins come from (``allocators``, ``schedulers``, …)."""
        return MODES[self.mode].plugin_key

    @property
    def plugin_kind(self) -> str:
        """This mode's plugin kind (``allocator``, ``scheduler``, …)."""
        return MODES[self.mode].plugin_kind

    def allocator_specs(self) -> list[AllocatorSpec]:
        """This mode's plugin entries (allocators, or schedulers in queue mode, …)."""
        return [AllocatorSpec(name=a) if isinstance(a, str) else a
                for a in getattr(self, self.plugin_key)]


def _needs_one(self):
    """A mode's model validator: its plugin list has at least one entry."""
    if not getattr(self, self.plugin_key):
        raise ValueError(f"{self.plugin_key}: mode {self.mode!r} needs at least one")
    return self


@functools.cache
def experiment_model(mode: str) -> type[ExperimentSpec]:
    """The experiment file's model in ``mode``: :class:`ExperimentSpec`'s fields, the
    mode's own sections (in :data:`~dcsim.modes.base.SECTION_ORDER`, then any other in the
    mode's order), its plugin list, then
    ``metrics`` and ``matrix``. Each is also an attribute of this module under its class
    name (``LossExperiment``, …), so a validated spec pickles into a worker process."""
    m = MODES[mode]
    # the known sections in their usual place; a new mode's own after them, in its order
    known = {k: i for i, k in enumerate(SECTION_ORDER)}
    own = sorted(m.own_sections.items(), key=lambda kv: known.get(kv[0], len(known)))
    fields: dict[str, Any] = {m.plugin_key: (list[str | AllocatorSpec],
                                             Field(default_factory=list))}
    fields.update({k: sec.field() for k, sec in own})
    fields["metrics"] = (MetricsSpec, Field(default_factory=MetricsSpec))
    fields["matrix"] = (dict[str, list[Any]], Field(default_factory=dict))
    name = f"{''.join(w.title() for w in mode.split('_'))}Experiment"
    model = create_model(name, __base__=ExperimentSpec, __module__=__name__,
                         __validators__={"_needs_one": model_validator(mode="after")(_needs_one)},
                         **fields)
    globals()[name] = model
    return model


def _refused(data: dict[str, Any], mode: str) -> str | None:
    """Why a top-level key of ``data`` is refused in ``mode`` (the first such key), or None:
    another mode's plugin list, or a section only other modes read."""
    m = MODES[mode]
    for key, value in data.items():
        if value is None or value == []:  # an empty section or list is no section
            continue
        if key in COMMON or key == m.plugin_key or key in m.own_sections:
            continue
        if key in m.refusals:
            return f"{key}: {m.refusals[key]}"
        lists = [o for o in MODES.values() if o.plugin_key == key]
        if lists:
            return f"{key}: not used in mode {mode!r}; list {m.plugin_key} instead"
        readers = [o.name for o in MODES.values() if key in o.own_sections]
        if readers:
            names = ", ".join(readers[:-1]) + (" and " if len(readers) > 1 else "") + readers[-1]
            return (f"{key}: not used in mode {mode!r} (only mode{'s' if len(readers) > 1 else ''}"
                    f" {names} read{'' if len(readers) > 1 else 's'} it)")
    return None


def validate_spec(data: dict[str, Any], source: str) -> ExperimentSpec:
    """``data`` (an experiment file's mapping) validated in its mode; a :class:`ConfigError`
    names ``source`` and the field."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of settings, got {type(data).__name__}")
    mode = data.get("mode", "loss")
    if not isinstance(mode, str) or mode not in MODES:
        names = [repr(n) for n in MODES]
        known = f"{', '.join(names[:-1])} or {names[-1]}"
        if isinstance(mode, str):  # a plugin's mode, maybe, whose package is not installed
            raise ConfigError(f"{source}: mode: unknown mode {mode!r}; expected {known} "
                              "(`dcsim plugins --kind mode` lists the registered modes)")
        raise ConfigError(f"{source}: mode: Input should be {known}")
    why = _refused(data, mode)
    if why is not None:
        raise ConfigError(f"{source}: {why}")
    model = experiment_model(mode)
    # an empty section or list the mode does not read, or a required section left empty,
    # is no section (a required one is then "Field required")
    data = {k: v for k, v in data.items()
            if not ((v is None or v == []) and (k not in model.model_fields
                                                 or model.model_fields[k].is_required()))}
    try:
        return model.model_validate(data)
    except ValidationError as e:
        errors = e.errors()
        err = errors[0]
        # an entry that may be a name or a mapping (allocators): a mapping that is wrong
        # inside reports its own field, not "should be a valid string"
        members = [x for x in errors if x["loc"][:len(err["loc"]) - 1] == err["loc"][:-1]
                   and len(x["loc"]) > len(err["loc"])]
        if err["loc"] and err["loc"][-1] == "str" and members:
            err = members[0]
        loc = ".".join(str(x) for x in err["loc"] if not str(x).startswith("function-"))
        # drop pydantic's union-member tags (e.g. "allocators.0.str") for readability
        loc = loc.replace(".str", "").replace(".AllocatorSpec", "")
        loc = loc.replace(".MetricPluginSpec", "")
        if not loc:  # a whole-file rule; its message starts with the field it is about
            raise ConfigError(f"{source}: {err['msg'].removeprefix('Value error, ')}") from None
        raise ConfigError(f"{source}: {loc}: {err['msg'].removeprefix('Value error, ')}") \
            from None


#: Keys that ``matrix:`` may not sweep (use ``seeds:`` / ``--seeds`` for replications).
UNSWEEPABLE = ("name", "seed", "seeds", "matrix")


def sweep_column(key: str, keys: list[str]) -> str:
    """Column name of a swept key: its last segment, or the whole path (dots → underscores)
    when that segment is ambiguous or already a results column (e.g. ``topology_server_cpu``).
    """
    last = key.split(".")[-1]
    if (sum(k.split(".")[-1] == last for k in keys) > 1 or last in RESERVED_COLUMNS
            or last.startswith("util_")):
        return key.replace(".", "_")
    return last


def sweep_value(value: Any) -> Any:
    """What the results column of a swept key holds: the value itself, except for a mapping
    (a whole section, e.g. a workload): its ``name`` if it has a string one, else its compact
    JSON text (keys sorted), so that the column stays one plain string per run."""
    if not isinstance(value, dict):
        return value
    name = value.get("name")
    if isinstance(name, str) and name:
        return name
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def sweep_points(spec: ExperimentSpec, raw: dict[str, Any], source: str):
    """Yield ``(params, resolved_raw_config)`` for every combination in ``matrix``.

    Entries combine as a Cartesian product. A key naming several comma-separated dotted
    keys sweeps them together (zipped): ``"topology.server.cpu,workload.arrival.rate":
    [[8, 12], [16, 20]]`` gives two points, not four. A swept mapping (a whole section such
    as ``workload``) is recorded in ``params`` by its ``name`` field (see :func:`sweep_value`).
    """
    entries = []  # (list of dotted keys, list of value tuples)
    for k, values in spec.matrix.items():
        if not values:
            raise ConfigError(f"{source}: matrix.{k}: needs at least one value")
        keys = [part.strip() for part in k.split(",")]
        for part in keys:
            if part.split(".")[0] in UNSWEEPABLE:
                raise ConfigError(f"{source}: matrix.{k}: cannot be swept; replications are "
                                  "`seeds:` (or --seeds)")
        if len(keys) > 1:
            bad = [v for v in values if not isinstance(v, list) or len(v) != len(keys)]
            if bad:
                raise ConfigError(f"{source}: matrix.{k}: each value must be a list of "
                                  f"{len(keys)} (one per key), got {bad[0]!r}")
            entries.append((keys, [tuple(v) for v in values]))
        else:
            entries.append((keys, [(v,) for v in values]))
    all_keys = [part for keys, _ in entries for part in keys]
    base = {k: v for k, v in raw.items() if k != "matrix"}
    for combo in itertools.product(*(vals for _, vals in entries)):
        data = copy.deepcopy(base)
        params = {}
        for (keys, _), values in zip(entries, combo, strict=True):
            for k, v in zip(keys, values, strict=True):
                # a copy: YAML aliases (*name) make several points share one object, and a
                # later key of the same point may set a field inside it
                set_dotted(data, k, copy.deepcopy(v), where=f"{source}: matrix")
                params[sweep_column(k, all_keys)] = sweep_value(v)
        yield params, data


for _mode in MODES:  # each mode's model exists once this module is imported (pickling)
    experiment_model(_mode)


def __getattr__(name: str) -> Any:
    # the model of a mode registered after this module was imported (a local plugin's), for
    # a worker unpickling a sweep point of it
    for mode in MODES:
        if f"{''.join(w.title() for w in mode.split('_'))}Experiment" == name:
            return experiment_model(mode)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
