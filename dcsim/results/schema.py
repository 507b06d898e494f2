"""The tables dcsim writes, declared once: every mode's streamed tables and its summary row.

A table is a list of :class:`Col`. A column's name is either fixed (``accepted``) or a
pattern with one ``<family>`` (``util_<resource>``), expanded for a run by
:meth:`Table.bind` with that run's names (its topology's resources, its link tiers). The
``<attribute>`` family of loss mode's ``requests`` is the workload's own columns (its
``attrs:`` and extra trace columns): bound by the first batch a run writes, typed from it.
A column with ``when`` is present only when the run has that property (``links``).

:class:`~dcsim.results.writer.RunWriter` writes only what a run's bound tables declare: a
batch with a column the table does not have, without one it has, or with columns of unequal
length is refused with a :class:`SchemaError` naming the table and the column, and nothing of
the run is kept. ``docs/reference/outputs.md`` is checked against these declarations
(``tests/test_schema.py``).

**Missing values are nulls.** Where a value does not apply (a rejected request's ``start``,
a job that never finished, a run that measured nothing) the column holds an Arrow null,
never NaN, and typed columns stay typed: an int column's engine marker (``-1`` for a
rejected VM's ``host``) is written as a null int (:attr:`Col.sentinel`). Each column that
can be null says when (:attr:`Col.null`); in ``summary.parquet`` a column that only some
runs have (one with ``when``, in a sweep whose points differ) is null in the others, and a
sweep parameter is null at a point the YAML gives as ``null``. pandas skips nulls in its
aggregates, polars and duckdb too; they did not skip NaN (``tests/test_nulls.py``).

Around a table's own columns the writer adds the run's sweep parameters (constant per file,
typed once for the whole sweep: :func:`param_types`) and, when read back as a dataset, the
partition columns ``allocator`` and ``seed``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import pyarrow as pa

from dcsim.errors import DcsimError

_FAMILY = re.compile(r"<(\w+)>")

#: Arrow type of each declared type name (``inferred``: from the first batch's values)
ARROW: dict[str, pa.DataType | None] = {
    "int64": pa.int64(), "float64": pa.float64(), "bool": pa.bool_(), "string": pa.string(),
    "list<int64>": pa.list_(pa.int64()), "inferred": None,
}


class SchemaError(DcsimError):
    """A run tried to write a column its table does not declare, or left one out."""


@dataclass(frozen=True)
class Col:
    """One column (or, with a ``<family>`` in its name, one per name of that family)."""

    name: str
    type: str
    unit: str
    meaning: str
    when: str | None = None  # only when the run has this property ("links")
    #: the values it can take, (low, high), where its unit does not say (a ratio of counts)
    bounds: tuple[float, float] | None = None
    #: when the column holds a null: the rows where a value does not apply ("rejected")
    null: str | None = None
    #: an int column's value in the engine's records that is written as null (-1)
    sentinel: int | None = None

    @property
    def range(self) -> tuple[float, float] | None:
        """The values the column can take: its ``bounds``, else [0, 1] for a fraction."""
        return self.bounds or ((0.0, 1.0) if self.unit == "fraction" else None)

    @property
    def nullable(self) -> bool:
        return self.null is not None

    @property
    def family(self) -> str | None:
        m = _FAMILY.search(self.name)
        return m.group(1) if m else None

    def expand(self, names: Sequence[str]) -> list[str]:
        return [_FAMILY.sub(n, self.name) for n in names] if self.family else [self.name]

    def expands_to(self, name: str) -> bool:
        """Whether ``name`` is one of this family column's expanded names, for a family
        with a fixed part (``util_<resource>`` matches ``util_cpu``; a bare ``<resource>``
        matches nothing: it could be any name)."""
        return bool(self.family and _FAMILY.sub("", self.name) and re.fullmatch(
            _FAMILY.sub(r"\\w+", self.name), name))


@dataclass(frozen=True)
class Table:
    """A declared table: ``name`` is its folder (``requests/``) or ``summary``."""

    name: str
    columns: tuple[Col, ...]
    rows: str  # what one row is, for the docs

    def plus(self, columns: Iterable[Col]) -> Table:
        """This table with ``columns`` after its own (a run's metric plugins' columns)."""
        return Table(self.name, (*self.columns, *columns), self.rows)

    def bind(self, *, flags: Iterable[str] = (), **families: Sequence[str]) -> Bound:
        """This table for one run: families expanded with ``families`` (a family not given,
        ``attribute``, stays open), columns whose ``when`` is not in ``flags`` left out."""
        flags = set(flags)
        fixed: list[tuple[str, pa.DataType | None]] = []
        sentinels: dict[str, int] = {}
        open_family: Col | None = None
        for c in self.columns:
            if c.when is not None and c.when not in flags:
                continue
            if c.family is not None and c.family not in families:
                open_family = c
                fixed.append((c.name, None))        # the open family's place in the order
                continue
            names = families.get(c.family, ()) if c.family else ()
            fixed.extend((n, ARROW[c.type]) for n in c.expand(names))
            if c.sentinel is not None:
                sentinels.update(dict.fromkeys(c.expand(names), c.sentinel))
        return Bound(self.name, fixed, open_family, sentinels)


@dataclass
class Bound:
    """A table bound to one run: its column names and Arrow types, in order. An open family
    (``<attribute>``) is filled by the first batch: the names it has beyond the others."""

    table: str
    columns: list[tuple[str, pa.DataType | None]]
    open_family: Col | None = None
    #: int columns whose engine marker (-1) is written as null (:attr:`Col.sentinel`)
    sentinels: dict[str, int] = field(default_factory=dict)

    def resolve(self, names: Iterable[str]) -> list[tuple[str, pa.DataType | None]]:
        """The final column list given a first batch's ``names`` (in order); raises
        :class:`SchemaError` for an unknown column."""
        declared = [n for n, _ in self.columns]
        known = set(declared)
        extra = [n for n in names if n not in known]
        if extra and self.open_family is None:
            raise SchemaError(f"{self.table}: unknown column {extra[0]!r} (the table's "
                              f"columns: {', '.join(declared)})")
        out: list[tuple[str, pa.DataType | None]] = []
        for n, t in self.columns:
            if self.open_family is not None and n == self.open_family.name:
                out.extend((e, None) for e in extra)
            else:
                out.append((n, t))
        return out


def check_batch(table: str, columns: dict[str, Any], expected: Sequence[str]) -> int:
    """The number of rows of ``columns``; :class:`SchemaError` when a column is missing,
    unknown or of another length than the first."""
    if not columns:
        raise SchemaError(f"{table}: a batch with no columns")
    missing = [n for n in expected if n not in columns]
    if missing:
        raise SchemaError(f"{table}: column {missing[0]!r} is missing from the batch")
    unknown = [n for n in columns if n not in set(expected)]
    if unknown:
        raise SchemaError(f"{table}: unknown column {unknown[0]!r} (declared: "
                          f"{', '.join(expected)})")
    first = next(iter(columns))
    n = len(columns[first])
    for k, v in columns.items():
        if len(v) != n:
            raise SchemaError(f"{table}: column {k!r} has {len(v)} values, {first!r} has {n}")
    return n


# ------------------------------------------------------------------------------ sweeps
def param_types(points: Iterable[dict[str, Any]]) -> dict[str, str]:
    """One Arrow type name per sweep column, from its values at every sweep point, so each
    run's constant column has the same type (a value that is None at one point and text at
    another is a nullable string everywhere)."""
    seen: dict[str, set[str]] = {}
    for params in points:
        for k, v in params.items():
            seen.setdefault(k, set()).add(_kind(v))
    out = {}
    for k, kinds in seen.items():
        kinds.discard("null")
        if not kinds:
            out[k] = "string"
        elif kinds <= {"bool"}:
            out[k] = "bool"
        elif kinds <= {"int64"}:
            out[k] = "int64"
        elif kinds <= {"int64", "float64"}:
            out[k] = "float64"
        else:
            out[k] = "string"
    return out


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int64"
    if isinstance(v, float):
        return "float64"
    return "string"


def param_text(v: Any) -> str:
    """A sweep value as every table dcsim prints shows it: ``none`` where the YAML gave
    ``null`` (read back as None, NaN or pandas' NA), ``%g`` for a float, else as text."""
    if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
        return "none"
    return f"{v:g}" if isinstance(v, float) else str(v)


def param_value(v: Any, type_name: str) -> Any:
    """``v`` as its column's type (numbers and text as they are; anything else as JSON)."""
    if v is None:
        return None
    if type_name == "string" and not isinstance(v, str):
        return json.dumps(v, sort_keys=True) if isinstance(v, dict | list) else str(v)
    if type_name == "float64":
        return float(v)
    return v


# ------------------------------------------------------------------------------ tables
_RES = "the topology's resources, e.g. `cpu`, `mem`"
_NOTHING = "nothing was measured"

LOSS_REQUESTS = Table("requests", (
    Col("id", "int64", "—", "arrival index within the run, from 0"),
    Col("arrival", "float64", "time", "arrival time"),
    Col("duration", "float64", "time", "holding time asked for"),
    Col("<resource>", "float64", "server units", f"demand of each resource ({_RES})"),
    Col("bandwidth", "float64", "bandwidth", "the request's bandwidth"),
    Col("<attribute>", "inferred", "—", "one column per workload attribute"),
    Col("accepted", "bool", "—", "whether it was placed"),
    Col("wait", "float64", "time", "time held before being offered (capacity: wait)"),
    Col("start", "float64", "time", "when it started holding resources", null="rejected"),
    Col("end", "float64", "time", "start + duration (+ power.power_on_delay when its "
        "server was switched on for it)", null="rejected"),
    Col("n_servers", "int64", "servers", "number of servers used"),
    Col("servers", "list<int64>", "—", "indices of the servers used"),
    Col("locality", "int64", "—", "0 one server, 1 one rack, 2 one pod, 3 across pods",
        null="rejected, or its rack or pod unknown", sentinel=-1),
    Col("footprint", "float64", "bandwidth", "bandwidth reserved on all links",
        null="rejected"),
    Col("measured", "bool", "—", "counted in the summary (after warm-up)"),
    Col("decision_s", "float64", "wall-clock s", "time the allocate call took"),
), "one per request")

LOSS_TIMESERIES = Table("timeseries", (
    Col("time", "float64", "time", "when the sample was taken"),
    Col("received", "int64", "requests", "arrivals so far"),
    Col("accepted", "int64", "requests", "accepted so far"),
    Col("active", "float64", "requests", "requests holding resources"),
    Col("util_<resource>", "float64", "fraction", "used share of each resource"),
    Col("util_bw_<tier>", "float64", "fraction", "reserved share of each link tier",
        when="links"),
    Col("avail_<resource>", "float64", "fraction", "share of each resource on servers that "
        "are up", when="failures"),
    Col("avail_bw_<tier>", "float64", "fraction", "share of a tier's bandwidth on links "
        "that are up", when="link_failures"),
    Col("power_w", "float64", "W", "power drawn now, servers and switches", when="power"),
    Col("power_servers_w", "float64", "W", "of it, by the servers", when="power"),
    Col("power_network_w", "float64", "W", "of it, by the switches", when="power"),
), "one per sample")

#: ``failures:`` (loss and vm_online): one row per failure or repair of a component
_FAILURE_HEAD = (
    Col("time", "float64", "time", "when the component failed or was repaired"),
    Col("event", "string", "—", "fail or repair"),
    Col("kind", "string", "—", "server or link (vm_online: server = host)"),
    Col("component", "int64", "—", "its index"),
    Col("interrupted", "int64", "requests", "requests (VMs) running on it at a failure"),
    Col("reallocated", "int64", "requests", "of them, placed again (on_failure: reallocate)"),
    Col("lost_time", "float64", "time", "remaining holding time of those not placed again"),
    Col("measured", "bool", "—", "inside the measured window (counted in the summary)"),
)

LOSS_FAILURES = Table("component_failures", (
    *_FAILURE_HEAD,
    Col("avail_<resource>", "float64", "fraction", "share of each resource up after it"),
    Col("avail_bw_<tier>", "float64", "fraction", "share of a tier's bandwidth up after it",
        when="links"),
), "one per failure or repair")

LOSS_SUMMARY = Table("summary", (
    Col("received", "int64", "requests", "measured arrivals"),
    Col("accepted", "int64", "requests", "measured arrivals placed"),
    Col("acceptance_ratio", "float64", "—", "accepted / received", bounds=(0, 1),
        null=_NOTHING),
    Col("acceptance_last20", "float64", "—", "the Nara papers' acceptance", bounds=(0, 1),
        null=_NOTHING),
    Col("util_<resource>", "float64", "fraction", "time-averaged used share"),
    Col("util_bw_<tier>", "float64", "fraction", "time-averaged reserved share of a tier",
        when="links"),
    Col("util_<resource>_last50", "float64", "fraction", "Nara's per-request utilisation",
        null=_NOTHING),
    Col("mean_concurrent", "float64", "requests", "time-averaged requests held"),
    Col("window_start", "float64", "time", "the measured window's start"),
    Col("window_end", "float64", "time", "the measured window's end"),
    Col("mean_footprint", "float64", "bandwidth", "mean reserved bandwidth", when="links"),
    Col("mean_decision_s", "float64", "wall-clock s", "mean allocate time"),
    Col("sim_time", "float64", "time", "simulated time at the end"),
    Col("n_failures", "int64", "—", "component failures in the window", when="failures"),
    Col("interrupted", "int64", "requests", "requests a failure hit in the window",
        when="failures"),
    Col("reallocated", "int64", "requests", "of them, placed again", when="failures"),
    Col("lost_request_time", "float64", "time", "holding time the dropped ones lost",
        when="failures"),
    Col("avail_<resource>", "float64", "fraction", "time-averaged share of each resource "
        "up", when="failures"),
    Col("avail_bw_<tier>", "float64", "fraction", "time-averaged share of a tier's "
        "bandwidth up", when="link_failures"),
    Col("energy_j", "float64", "J", "energy over the window, servers and switches",
        when="power"),
    Col("energy_servers_j", "float64", "J", "of it, the servers' (switch-ons included)",
        when="power"),
    Col("energy_network_j", "float64", "J", "of it, the switches'", when="power"),
    Col("mean_power_w", "float64", "W", "energy_j over the window's length", when="power"),
    Col("mean_power_servers_w", "float64", "W", "the servers' mean power", when="power"),
    Col("mean_power_network_w", "float64", "W", "the switches' mean power", when="power"),
    Col("power_ons", "int64", "—", "idle-off servers switched on in the window",
        when="power"),
    Col("carbon_g", "float64", "gCO2", "emissions of energy_j", when="carbon"),
), "one per run")

QUEUE_JOBS = Table("jobs", (
    Col("id", "int64", "—", "index within its job set"),
    Col("jobset", "int64", "—", "which job set of the run, from 0"),
    Col("arrival", "float64", "steps", "arrival step"),
    Col("duration", "float64", "steps", "the job's length"),
    Col("<resource>", "float64", "slots", "demand per resource"),
    Col("accepted", "bool", "—", "admitted"),
    Col("dropped", "bool", "—", "dropped on a full backlog"),
    Col("start", "float64", "steps", "when it started", null="it never started"),
    Col("end", "float64", "steps", "when it finished", null="it never finished"),
    Col("wait", "float64", "steps", "start − arrival", null="it never started"),
    Col("completion_time", "float64", "steps", "end − arrival", null="it never finished"),
    Col("slowdown", "float64", "—", "completion_time / duration", null="it never finished"),
), "one per job")

QUEUE_TIMESERIES = Table("timeseries", (
    Col("jobset", "int64", "—", "which job set"),
    Col("time", "float64", "steps", "the step"),
    Col("received", "int64", "jobs", "jobs arrived so far"),
    Col("accepted", "int64", "jobs", "of them, not dropped"),
    Col("active", "float64", "jobs", "running"),
    Col("waiting", "int64", "jobs", "arrived, neither started nor dropped"),
    Col("util_<resource>", "float64", "fraction", "running jobs' demand ÷ capacity"),
), "one per time step of each job set")

QUEUE_SUMMARY = Table("summary", (
    Col("received", "int64", "jobs", "jobs of all the run's job sets"),
    Col("accepted", "int64", "jobs", "jobs admitted"),
    Col("acceptance_ratio", "float64", "—", "accepted / received", bounds=(0, 1)),
    Col("mean_slowdown", "float64", "—", "the DeepRM metric", null="no job finished"),
    Col("mean_completion_time", "float64", "steps", "mean finish − arrival",
        null="no job finished"),
    Col("finished", "int64", "jobs", "finished jobs"),
    Col("dropped", "int64", "jobs", "dropped jobs"),
    Col("unfinished", "int64", "jobs", "jobs never started or cut"),
    Col("jobsets", "int64", "—", "job sets played"),
    Col("forced_jobsets", "int64", "—", "job sets ended by queue.max_steps"),
    Col("sim_time", "float64", "steps", "the job sets' lengths added up"),
    Col("util_<resource>", "float64", "fraction", "work done over capacity × sim_time"),
), "one per run")

VM_MIGRATIONS = Table("migrations", (
    Col("step", "int64", "—", "the migration's step, from 1"),
    Col("vm_id", "string", "—", "the VM"),
    Col("from_host", "string", "—", "its host before"),
    Col("from_numa", "int64", "—", "its NUMA before (−1: both)"),
    Col("to_host", "string", "—", "its host after"),
    Col("to_numa", "int64", "—", "its NUMA after (−1: both)"),
), "one per migration")

VM_STATIC_SUMMARY = Table("summary", (
    Col("mnl", "int64", "migrations", "the migration number limit"),
    Col("fr_before", "float64", "—", "fragment rate before", bounds=(0, 1)),
    Col("fr_after", "float64", "—", "fragment rate after", bounds=(0, 1)),
    Col("migrations", "int64", "migrations", "steps used"),
    Col("seconds", "float64", "wall-clock s", "the rescheduler's own time"),
    Col("bound", "float64", "—", "a lower bound on the reachable FR", bounds=(0, 1),
        null="the rescheduler gives none"),
    Col("status", "string", "—", "how the rescheduler ended"),
    Col("fragment_before", "int64", "cores", "Σ free cores mod 16 before"),
    Col("fragment_after", "int64", "cores", "Σ free cores mod 16 after"),
    Col("hosts", "int64", "hosts", "hosts of the mapping"),
    Col("vms", "int64", "VMs", "VMs of the mapping"),
    Col("migratable_vms", "int64", "VMs", "VMs that may move"),
    Col("info", "string", "—", "JSON text of the rescheduler's details"),
), "one per run")

def _failure_summary(component: str, items: str, lost: tuple[str, str, str],
                     shares: tuple[str, ...], extra: tuple[Col, ...] = ()) -> tuple[Col, ...]:
    """The failure columns of a summary (``failures:``): the counts, the time the dropped
    ``items`` lost (``lost``: name, unit, meaning), ``extra``, and the time-averaged share
    up of each of ``shares`` (``avail_<first word, lower case, GPUs -> gpu>``)."""
    def avail(what: str) -> str:
        return "avail_" + {"GPUs": "gpu", "memory": "mem"}.get(what, what)
    return (
        Col("n_failures", "int64", "—", f"{component} failures", when="failures"),
        Col("interrupted", "int64", items, f"{items} a failure hit", when="failures"),
        Col("reallocated", "int64", items, "of them, placed again", when="failures"),
        Col(lost[0], "float64", lost[1], lost[2], when="failures"),
        *extra,
        *(Col(avail(w), "float64", "fraction", f"time-averaged share of {w} up",
              when="failures") for w in shares),
    )


VM_ONLINE_VMS = Table("vms", (
    Col("id", "int64", "—", "arrival index"),
    Col("arrival", "float64", "s", "arrival time"),
    Col("duration", "float64", "s", "lifetime asked for"),
    Col("cpu", "int64", "cores", "cores"),
    Col("mem", "int64", "MB", "memory"),
    Col("numas", "int64", "—", "1 or 2"),
    Col("accepted", "bool", "—", "whether it was placed"),
    Col("host", "int64", "—", "host index at arrival", null="rejected", sentinel=-1),
    Col("numa", "int64", "—", "0, 1; −1 both", null="rejected", sentinel=-2),
    Col("migrations", "int64", "—", "times it moved"),
    Col("decision_s", "float64", "wall-clock s", "the placer's time"),
    Col("interruptions", "int64", "—", "times a host failure hit it", when="failures"),
), "one per arriving VM")

VM_ONLINE_TIMESERIES = Table("timeseries", (
    Col("time", "float64", "s", "when"),
    Col("event", "string", "—", "start, sample, before_reschedule, after_reschedule, end"),
    Col("fragment_rate", "float64", "—", "the FR then", bounds=(0, 1)),
    Col("util_cpu", "float64", "fraction", "cpu used"),
    Col("util_mem", "float64", "fraction", "memory used"),
    Col("vms", "int64", "VMs", "VMs present"),
    Col("received", "int64", "VMs", "arrivals so far"),
    Col("accepted", "int64", "VMs", "placed so far"),
    Col("migrations_so_far", "int64", "migrations", "migrations so far"),
    Col("avail_cpu", "float64", "fraction", "cpu on hosts that are up", when="failures"),
    Col("avail_mem", "float64", "fraction", "memory on hosts that are up", when="failures"),
), "one per sample")

VM_ONLINE_FAILURES = Table("component_failures", (
    *_FAILURE_HEAD,
    Col("avail_cpu", "float64", "fraction", "cpu on hosts up after it"),
    Col("avail_mem", "float64", "fraction", "memory on hosts up after it"),
), "one per host failure or repair")

VM_ONLINE_SUMMARY = Table("summary", (
    Col("received", "int64", "VMs", "arrivals"),
    Col("accepted", "int64", "VMs", "placed"),
    Col("rejected", "int64", "VMs", "not placed"),
    Col("acceptance_ratio", "float64", "—", "accepted / received", bounds=(0, 1)),
    Col("mean_fragment_rate", "float64", "—", "time average of the FR", bounds=(0, 1)),
    Col("final_fragment_rate", "float64", "—", "the FR at the end", bounds=(0, 1)),
    Col("migrations", "int64", "migrations", "migrations done"),
    Col("reschedules", "int64", "—", "rescheduling rounds"),
    Col("util_cpu", "float64", "fraction", "time-averaged cpu used"),
    Col("util_mem", "float64", "fraction", "time-averaged memory used"),
    Col("final_util_cpu", "float64", "fraction", "cpu used at the end"),
    Col("reschedule_seconds", "float64", "wall-clock s", "the rescheduler's time"),
    Col("mean_decision_s", "float64", "wall-clock s", "the placer's mean time"),
    Col("sim_time", "float64", "s", "the run's end"),
    Col("hosts", "int64", "hosts", "hosts"),
    Col("initial_vms", "int64", "VMs", "VMs of the initial mapping"),
    *_failure_summary("host", "VMs", ("lost_vm_time", "s", "lifetime the dropped ones lost "
                                      "(within the run)"), ("cpu", "memory")),
), "one per run")

_GPU_SHARE = "share of the cluster's milli-GPU"


def _gpu_cpu(name: str, unit: str, meaning: str, when: str) -> tuple[Col, ...]:
    """A GPU node's total and its GPUs' and CPUs' parts (``name`` with ``{}`` for the
    part: ``power_{}w`` -> power_w, power_gpu_w, power_cpu_w)."""
    return (Col(name.format(""), "float64", unit, meaning, when=when),
            Col(name.format("gpu_"), "float64", unit, "of it, the GPUs'", when=when),
            Col(name.format("cpu_"), "float64", unit, "of it, the CPUs'", when=when))

GPU_PODS = Table("pods", (
    Col("id", "int64", "—", "arrival index, from 0"),
    Col("name", "string", "—", "the pod's name in the pod list"),
    Col("row", "int64", "—", "its row in the pod list, from 0 (inflated copies share it)"),
    Col("inflated", "bool", "—", "added by gpu.inflate"),
    Col("cpu", "int64", "milli-cores", "cpu asked"),
    Col("mem", "int64", "MiB", "memory asked"),
    Col("num_gpu", "int64", "GPUs", "GPUs asked (1 for a share of one GPU)"),
    Col("gpu_milli", "int64", "milli-GPU", "share of each GPU asked (1000: whole GPUs)"),
    Col("gpu_types", "string", "—", "the GPU models it accepts, |-separated; empty: any"),
    Col("accepted", "bool", "—", "whether it was placed"),
    Col("node", "int64", "—", "node index (the node list's row)", null="rejected",
        sentinel=-1),
    Col("devices", "list<int64>", "—", "the GPU devices of its node it took"),
    Col("arrived_gpu_share", "float64", _GPU_SHARE, "GPU asked by the pods offered so "
        "far (this one included)", bounds=(0.0, float("inf"))),
    Col("alloc_gpu_share", "float64", "fraction", "GPU placed after this pod"),
    Col("frag_gpus", "float64", "GPUs", "the cluster's fragmented GPU after this pod"),
    Col("decision_s", "float64", "wall-clock s", "the allocator's time"),
    Col("arrival", "float64", "s", "arrival time", when="departures"),
    Col("duration", "float64", "s", "holding time (released then if placed)",
        when="departures"),
    Col("interruptions", "int64", "—", "times a node failure hit it", when="failures"),
), "one per offered pod")

GPU_TIMESERIES = Table("timeseries", (
    Col("arrived_pct", "int64", "%", "arrived GPU request, whole percent of the cluster's",
        when="arrived"),
    Col("pods", "int64", "pods", "pods whose arrived share rounds to it (0: the mean is "
        "over the pods within one percent)", when="arrived"),
    Col("time", "float64", "s", "when the sample was taken", when="departures"),
    Col("active", "int64", "pods", "pods placed and not yet released", when="departures"),
    Col("alloc_gpu_share", "float64", "fraction", "GPU placed (mean over those pods)"),
    Col("frag_gpus", "float64", "GPUs", "fragmented GPU (mean)"),
    Col("frag_ratio", "float64", "fraction", "fragmented share of the free GPU (mean)"),
    Col("alloc_cpu_share", "float64", "fraction", "cpu placed (mean)"),
    Col("alloc_mem_share", "float64", "fraction", "memory placed (mean)"),
    *_gpu_cpu("power_{}w", "W", "the nodes' draw (mean)", "power"),
    Col("avail_gpu", "float64", "fraction", "GPUs on nodes that are up", when="failures"),
    Col("avail_cpu", "float64", "fraction", "cpu on nodes that are up", when="failures"),
    Col("unalloc_gpus", "float64", "GPUs", "GPUs not placed: (1 − alloc_gpu_share) × GPUs"),
), "one per whole percent of arrived GPU request (with gpu.arrivals: one per sample)")

GPU_FAILURES = Table("component_failures", (
    *_FAILURE_HEAD,
    Col("avail_gpu", "float64", "fraction", "GPUs on nodes up after it"),
    Col("avail_cpu", "float64", "fraction", "cpu on nodes up after it"),
), "one per node failure or repair")

GPU_SUMMARY = Table("summary", (
    Col("received", "int64", "pods", "pods offered (with gpu.arrivals: in the window)"),
    Col("accepted", "int64", "pods", "of them, placed"),
    Col("rejected", "int64", "pods", "of them, fitting nowhere"),
    Col("acceptance_ratio", "float64", "—", "accepted / received", bounds=(0, 1)),
    Col("arrived_gpu_share", "float64", _GPU_SHARE, "GPU asked by all pods offered",
        bounds=(0.0, float("inf"))),
    Col("alloc_gpu_share", "float64", "fraction", "GPU placed, at the last arrived "
        "percent (the paper's value at 130 %); with gpu.arrivals its time average"),
    Col("final_alloc_gpu_share", "float64", "fraction", "GPU placed after the last pod"),
    Col("unalloc_gpus", "float64", "GPUs", "GPUs not placed, at the last arrived percent"),
    Col("frag_gpus", "float64", "GPUs", "fragmented GPU, at the last arrived percent "
        "(with gpu.arrivals: time average)"),
    Col("frag_ratio", "float64", "fraction", "fragmented share of the free GPU, there "
        "(with gpu.arrivals: time average)"),
    Col("alloc_cpu_share", "float64", "fraction", "cpu placed at the end"),
    Col("alloc_mem_share", "float64", "fraction", "memory placed at the end"),
    Col("used_nodes", "int64", "nodes", "nodes holding a pod at the end"),
    Col("nodes", "int64", "nodes", "nodes of the cluster"),
    Col("gpus", "int64", "GPUs", "GPUs of the cluster"),
    Col("inflated", "int64", "pods", "pods added by gpu.inflate"),
    Col("typical_pods", "int64", "—", "request classes among the typical pods"),
    Col("mean_decision_s", "float64", "wall-clock s", "the allocator's mean time"),
    Col("gpu_acceptance", "float64", "fraction", "GPU request placed over GPU request "
        "offered, in the window", when="departures"),
    Col("window_start", "float64", "s", "the measured window's start", when="departures"),
    Col("window_end", "float64", "s", "the measured window's end", when="departures"),
    Col("sim_time", "float64", "s", "simulated time at the end", when="departures"),
    *_gpu_cpu("power_{}w", "W", "the nodes' draw at the last arrived percent",
              "power_arrived"),
    *_gpu_cpu("mean_power_{}w", "W", "the nodes' time-averaged draw in the window",
              "power_departures"),
    *_gpu_cpu("energy_{}j", "J", "energy over the window (× gpu.power.time_unit_s)",
              "power_departures"),
    *_failure_summary("node", "pods", ("lost_pod_time", "s", "holding time the dropped ones "
                                       "lost"), ("GPUs", "cpu"),
                      extra=(Col("lost_gpu_time", "float64", "GPU·s", "the same, × each "
                                 "pod's GPUs", when="failures"),)),
), "one per run")

#: every mode's tables: the streamed ones, then ``summary``
TABLES: dict[str, dict[str, Table]] = {
    "loss": {"requests": LOSS_REQUESTS, "timeseries": LOSS_TIMESERIES,
             "component_failures": LOSS_FAILURES, "summary": LOSS_SUMMARY},
    "queue": {"jobs": QUEUE_JOBS, "timeseries": QUEUE_TIMESERIES, "summary": QUEUE_SUMMARY},
    "reschedule": {"migrations": VM_MIGRATIONS, "summary": VM_STATIC_SUMMARY},
    "vm_online": {"vms": VM_ONLINE_VMS, "timeseries": VM_ONLINE_TIMESERIES,
                  "component_failures": VM_ONLINE_FAILURES, "summary": VM_ONLINE_SUMMARY},
    "gpu": {"pods": GPU_PODS, "timeseries": GPU_TIMESERIES,
            "component_failures": GPU_FAILURES, "summary": GPU_SUMMARY},
}

#: the folders a mode streams into (everything but ``summary``), over all modes
STREAMED = tuple(dict.fromkeys(t for tables in TABLES.values() for t in tables
                               if t != "summary"))

#: the columns every summary row starts and ends with, around the mode's own
#: (``code_id``: the fingerprint of the code that made the row, :mod:`dcsim.results.provenance`)
SUMMARY_HEAD = ("experiment", "allocator", "seed")
SUMMARY_TAIL = ("wall_time_s", "run_id", "code_id")
