"""Experiment files: YAML → validated config, ``--set`` overrides and the ``matrix:`` sweep.

Every error names the file and the field path (``experiments/x.yaml: workload.arrival.rate:
Input should be greater than 0``) and is raised as :class:`ConfigError`.
"""

from __future__ import annotations

import copy
import itertools
import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, ValidationError, model_validator

from dcsim.config_files import (  # noqa: F401  (their old home; re-exported)
    MAX_EXPANDED_VALUES,
    expanded_size,
    load_yaml,
    parse_set,
    read_text,
    read_yaml,
    set_dotted,
)
from dcsim.errors import ConfigError
from dcsim.runner.modes.base import PLUGIN_LISTS
from dcsim.sim.failures import FailureSpec
from dcsim.sim.power import PowerSpec
from dcsim.validation import StrictModel


class AllocatorSpec(StrictModel):
    """One allocator (or, in queue mode, scheduler) of the comparison: its registered name,
    options and optional label."""

    name: str
    options: dict[str, Any] = Field(default_factory=dict)
    label: str | None = None


class WarmupSpec(StrictModel):
    requests: Annotated[int, Field(ge=0)] = 0
    time: Annotated[float, Field(ge=0)] = 0.0


class MetricsSpec(StrictModel):
    sample_interval: Annotated[float, Field(gt=0)] | None = None
    sample_every: Annotated[int, Field(gt=0)] = 100
    flush_rows: Annotated[int, Field(gt=0)] = 65536  # rows per Parquet row group


class QueueSpec(StrictModel):
    """Queue mode's environment (DeepRM): visible slots, backlog, resource horizon."""

    slots: Annotated[int, Field(ge=1)] = 10
    backlog: Annotated[int, Field(ge=0)] = 60
    horizon: Annotated[int, Field(ge=1)] = 20
    max_steps: Annotated[int, Field(ge=1)] = 10_000


#: queue mode's default machine: DeepRM's two resources of 10 slots each
QUEUE_TOPOLOGY = {"kind": "flat", "servers": 1, "server": {"cpu": 10, "mem": 10}}


#: mode -> (the list its plugins come from, their plugin kind); each mode itself is a
#: module of :mod:`dcsim.runner.modes`
MODES: dict[str, tuple[str, str]] = PLUGIN_LISTS


class ExperimentSpec(StrictModel):
    """The whole experiment file. ``topology``, ``workload`` and ``vm`` are checked by their
    builders.

    ``mode: loss`` (default): requests arrive and are placed or rejected by ``allocators``.
    ``mode: queue``: jobs wait in a queue and ``schedulers`` pick which starts (DeepRM);
    ``workload`` is then a job source (:mod:`dcsim.queue.spec`) and ``topology`` defaults
    to one machine of 10 cpu / 10 mem whose total capacity the jobs share.
    ``mode: reschedule``: each of ``reschedulers`` migrates at most MNL VMs of a mapping
    (``vm:``, :mod:`dcsim.sim.vm_static`) to lower its fragment rate (VMR²L).
    ``mode: vm_online``: VMs arrive and depart (``vm:``, :mod:`dcsim.sim.vm_online`); each of
    ``placers`` places them, with optional periodic rescheduling.
    ``mode: gpu``: the pods of a GPU-sharing cluster (``gpu:``, :mod:`dcsim.sim.gpu`); each
    of ``gpu_allocators`` places them (FGD, ATC'23).
    """

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.\-]+$")]
    description: str = ""
    mode: Literal["loss", "queue", "reschedule", "vm_online", "gpu"] = "loss"
    seed: Annotated[int, Field(ge=0)] = 0
    seeds: Annotated[int, Field(ge=1)] = 1
    # the mode's sections: mappings in the file; in a sweep point, the mode's typed models
    # (Mode.sections: TopologySpec, WorkloadSpec or a job source, StaticSpec, OnlineSpec)
    topology: dict[str, Any] | BaseModel | None = None
    workload: dict[str, Any] | BaseModel | None = None
    allocators: list[str | AllocatorSpec] = Field(default_factory=list)
    schedulers: list[str | AllocatorSpec] = Field(default_factory=list)
    reschedulers: list[str | AllocatorSpec] = Field(default_factory=list)
    placers: list[str | AllocatorSpec] = Field(default_factory=list)
    gpu_allocators: list[str | AllocatorSpec] = Field(default_factory=list)
    queue: QueueSpec = Field(default_factory=QueueSpec)
    vm: dict[str, Any] | BaseModel | None = None
    gpu: dict[str, Any] | BaseModel | None = None
    capacity: Literal["reject", "wait"] = "reject"  # lack of total cpu/mem: drop or hold
    # requests ending at t: released before the arrival at t, or after its first step
    departures: Literal["before_arrivals", "after_first_step"] = "before_arrivals"
    failures: FailureSpec | None = None  # component failures (dcsim.sim.failures)
    power: PowerSpec | None = None  # power and energy (dcsim.sim.power)
    warmup: WarmupSpec = Field(default_factory=WarmupSpec)
    metrics: MetricsSpec = Field(default_factory=MetricsSpec)
    matrix: dict[str, list[Any]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _sections_of_the_mode(self) -> ExperimentSpec:
        own = self.plugin_key
        for key, _kind in MODES.values():
            if key != own and getattr(self, key):
                raise ValueError(f"{key}: not used in mode {self.mode!r}; list {own} instead")
        if not getattr(self, own):
            raise ValueError(f"{own}: mode {self.mode!r} needs at least one")
        if self.mode in ("loss", "queue") and self.workload is None:
            raise ValueError("workload: Field required")
        if self.departures != "before_arrivals" and self.mode != "loss":
            raise ValueError(f"departures: only the loss-mode engine has it (mode {self.mode!r})")
        if self.failures is not None and self.mode not in ("loss", "vm_online", "gpu"):
            raise ValueError(f"failures: only modes loss, vm_online and gpu simulate "
                             f"failures (mode {self.mode!r})")
        if self.power is not None and self.mode == "gpu":
            raise ValueError("power: mode gpu takes its power model under gpu.power "
                             "(watts per GPU model and CPU socket)")
        if self.power is not None and self.mode != "loss":
            raise ValueError(f"power: only modes loss and gpu (gpu.power) account energy "
                             f"(mode {self.mode!r})")
        if self.mode in ("reschedule", "vm_online") and self.vm is None:
            raise ValueError(f"vm: Field required in mode {self.mode!r}")
        if (self.mode == "gpu") != (self.gpu is not None):
            raise ValueError("gpu: Field required in mode 'gpu'" if self.mode == "gpu" else
                             f"gpu: only mode gpu reads it (mode {self.mode!r})")
        if self.topology is None:
            if self.mode == "loss":
                raise ValueError("topology: Field required")
            if self.mode == "queue":
                self.topology = copy.deepcopy(QUEUE_TOPOLOGY)
        return self

    @property
    def plugin_key(self) -> str:
        """The list this mode's plugins come from (``allocators``, ``schedulers``, …)."""
        return MODES[self.mode][0]

    @property
    def plugin_kind(self) -> str:
        """This mode's plugin kind (``allocator``, ``scheduler``, …)."""
        return MODES[self.mode][1]

    def allocator_specs(self) -> list[AllocatorSpec]:
        """This mode's plugin entries (allocators, or schedulers in queue mode, …)."""
        return [AllocatorSpec(name=a) if isinstance(a, str) else a
                for a in getattr(self, self.plugin_key)]


def validate_spec(data: dict[str, Any], source: str) -> ExperimentSpec:
    try:
        return ExperimentSpec.model_validate(data)
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
        if not loc:  # a whole-file rule; its message starts with the field it is about
            raise ConfigError(f"{source}: {err['msg'].removeprefix('Value error, ')}") from None
        raise ConfigError(f"{source}: {loc}: {err['msg'].removeprefix('Value error, ')}") \
            from None


#: Column names results already use; a swept key never takes one of them.
RESERVED_COLUMNS = frozenset({
    "experiment", "allocator", "seed", "run_id", "code_id", "wall_time_s", "received", "accepted",
    "acceptance_ratio", "acceptance_last20", "mean_concurrent", "mean_footprint",
    "mean_decision_s", "sim_time", "window_start", "window_end", "id", "arrival", "duration",
    "bandwidth", "start", "end", "n_servers", "servers", "locality", "footprint", "measured",
    "wait", "decision_s", "time", "active", "cpu", "mem",
    # queue mode
    "jobset", "dropped", "slowdown", "completion_time", "mean_slowdown",
    "mean_completion_time", "finished", "unfinished", "jobsets", "forced_jobsets",
    # failures (their table and summary columns)
    "n_failures", "interrupted", "reallocated", "lost_request_time", "lost_vm_time", "event",
    "kind", "component", "lost_time", "interruptions",
    # power: (dcsim.sim.power)
    "energy_j", "energy_servers_j", "energy_network_j", "mean_power_w", "mean_power_servers_w",
    "mean_power_network_w", "power_ons", "carbon_g", "power_w", "power_servers_w",
    "power_network_w",
    # the statistics' columns (dcsim.results.stats.STAT_COLUMNS, beside the swept keys in
    # the tables of `dcsim run` and `dcsim report`)
    "mean", "half_width", "ci_low", "ci_high", "n", "identical", "clipped",
    # gpu mode (its pods/ and timeseries/ tables and its summary; not its pods' "name",
    # which a sweep of some `name` key keeps: the writer refuses that clash)
    "row", "inflated", "num_gpu", "gpu_milli", "gpu_types", "node", "devices",
    "arrived_gpu_share", "alloc_gpu_share", "frag_gpus", "arrived_pct", "pods", "frag_ratio",
    "alloc_cpu_share", "alloc_mem_share", "unalloc_gpus", "rejected", "final_alloc_gpu_share",
    "used_nodes", "nodes", "gpus", "typical_pods", "gpu_acceptance",
    # gpu mode with gpu.power and failures
    "power_gpu_w", "power_cpu_w", "mean_power_gpu_w", "mean_power_cpu_w", "energy_gpu_j",
    "energy_cpu_j", "lost_pod_time", "lost_gpu_time", "avail_gpu", "avail_cpu",
})
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
