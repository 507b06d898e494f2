"""Metric plugins: observers of a run that add their own summary and time-series columns.

A metric is a :class:`Metric` subclass registered through the ``register_metrics`` hook
and selected under ``metrics.plugins`` of an experiment (``metrics: {plugins:
[rack_imbalance, {name: ..., options: {...}}]}``). It declares its columns
(:attr:`Metric.summary_columns`, :attr:`Metric.timeseries_columns`: name ->
:class:`Column`), which the planner checks against every built-in column and every other
metric's before anything runs, and which the results schema declares for the run.

The engine calls its hooks, always with the simulated time first:

* :meth:`Metric.on_start` once, before the first arrival, with a :class:`RunStart` (the
  topology and the read-only view of the cluster that allocators get);
* :meth:`Metric.on_arrival` ``(now, request, None)``: a request is offered;
* :meth:`Metric.on_decision` ``(now, request, placement)``: it was placed (``placement``),
  or rejected (``None``); a request a failure interrupted and the allocator placed again
  (``failures.on_failure: reallocate``) is decided again, without a new arrival;
* :meth:`Metric.on_departure` ``(now, request, placement)``: a placed request released what
  it held (its end, or a failure that interrupted it): exactly once after each decision
  that placed it;
* :meth:`Metric.on_failure` / :meth:`Metric.on_repair` ``(now, kind, component)``: a
  ``server`` or ``link`` failed or was repaired (after the requests it interrupted departed);
* :meth:`Metric.sample` ``(now)``: at each of the mode's time-series samples; returns the
  values of :attr:`Metric.timeseries_columns`;
* :meth:`Metric.summary` ``()``: at the end; returns the values of
  :attr:`Metric.summary_columns`.

A metric only reads: the view's arrays and every placement it is handed are read-only (a
write raises), so it cannot change what the run does. An experiment without a metric pays
nothing: the engine installs these calls only when the run has a metric.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from dcsim.errors import PluginError
from dcsim.model import Placement
from dcsim.plugin_base import Configurable

#: the column types a metric may declare
COLUMN_TYPES = ("float64", "int64", "bool")
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class Column:
    """One column a metric adds: its type (``float64``, ``int64`` or ``bool``), what it
    means (shown by ``dcsim plugins`` and the report) and its unit (``—``: none)."""

    type: str
    meaning: str
    unit: str = "—"


@dataclass(frozen=True)
class RunStart:
    """What :meth:`Metric.on_start` receives about the run: its ``mode``, its ``topology``
    (loss mode: a :class:`~dcsim.model.Topology`; None in vm_online and gpu, whose view
    holds the hosts or nodes), the read-only ``view`` of the cluster that the mode's
    plugins get (loss: a :class:`~dcsim.model.StateView`, whose ``free`` and ``capacity``
    arrays always reflect the live state; vm_online: a :class:`~dcsim.vm.view.MappingView`;
    gpu: a :class:`~dcsim.gpu.cluster.GpuClusterView`) and the names of its
    ``resources``. The item the other hooks get is the mode's: a loss-mode request, a VM
    (placed as ``(host, numa)``), a GPU pod (placed as ``(node, devices)``)."""

    mode: str
    topology: Any
    view: Any
    resources: tuple[str, ...]


class Metric(Configurable):
    """A metric plugin (see the module docstring): ``name``, typed ``Options``, its declared
    columns, and the hooks it overrides (each does nothing by default)."""

    kind: ClassVar[str] = "metric"
    #: the columns it adds to ``summary.parquet`` (one value each per run)
    summary_columns: ClassVar[dict[str, Column]] = {}
    #: the columns it adds to each row of the mode's ``timeseries/`` table
    timeseries_columns: ClassVar[dict[str, Column]] = {}

    def on_start(self, run: RunStart) -> None:
        """Once, before the first arrival."""

    def on_arrival(self, now: float, request: Any, placement: None) -> None:
        """``request`` is offered at ``now`` (``placement`` is always None here)."""

    def on_decision(self, now: float, request: Any, placement: Any | None) -> None:
        """``request`` was placed as ``placement`` at ``now``, or rejected (None)."""

    def on_departure(self, now: float, request: Any, placement: Any) -> None:
        """``request`` released ``placement`` at ``now``."""

    def on_failure(self, now: float, kind: str, component: int) -> None:
        """Component ``component`` of ``kind`` (``server``, ``link``) failed at ``now``."""

    def on_repair(self, now: float, kind: str, component: int) -> None:
        """Component ``component`` of ``kind`` was repaired at ``now``."""

    def sample(self, now: float) -> dict[str, float]:
        """The values of :attr:`timeseries_columns` now (a time-series sample)."""
        return {}

    def summary(self) -> dict[str, float]:
        """The values of :attr:`summary_columns` at the end of the run."""
        return {}


def column_problem(cls: type, table: str) -> str | None:
    """Why ``cls``'s declared columns of ``table`` (``summary`` or ``timeseries``) are not
    usable, or None: each needs a lower-case identifier name and a :class:`Column` of a
    known type."""
    cols = getattr(cls, f"{table}_columns", None)
    if not isinstance(cols, dict):
        return f"{table}_columns must be a dict of column name -> Column"
    for name, col in cols.items():
        if not isinstance(name, str) or not _NAME.match(name):
            return (f"{table} column {name!r}: a column name is lower-case letters, digits "
                    "and _, starting with a letter")
        if not isinstance(col, Column):
            return f"{table} column {name!r}: declare it as dcsim.metrics.Column(type, meaning)"
        if col.type not in COLUMN_TYPES:
            return (f"{table} column {name!r}: type {col.type!r} is not one of "
                    f"{', '.join(COLUMN_TYPES)}")
    return None


def _frozen(p: Any) -> Any:
    """``p`` with read-only views of its arrays (what a metric is handed): a loss-mode
    :class:`~dcsim.model.Placement`; another mode's placement is immutable already
    (vm_online's ``(host, numa)``, gpu's frozen ``GpuPlacement``)."""
    if not isinstance(p, Placement):
        return p
    arrays = []
    for a in (p.servers, p.amounts, p.links, p.bandwidth):
        v = a.view()
        v.flags.writeable = False
        arrays.append(v)
    return Placement(*arrays)


class Observers:
    """A run's metrics, called in the order the experiment lists them. The engine builds
    one only when the run has a metric, and calls it at each event."""

    def __init__(self, metrics: Sequence[Metric]):
        if not metrics:
            raise ValueError("Observers needs at least one metric")
        self.metrics = list(metrics)
        #: request id -> the read-only placement its metrics were handed at its decision
        self._placed: dict[int, Placement] = {}

    def start(self, run: RunStart) -> None:
        for m in self.metrics:
            m.on_start(run)

    def arrival(self, now: float, request: Any) -> None:
        for m in self.metrics:
            m.on_arrival(now, request, None)

    def decision(self, now: float, request: Any, placement: Any | None) -> None:
        if placement is not None:
            placement = self._placed[request.id] = _frozen(placement)
        for m in self.metrics:
            m.on_decision(now, request, placement)

    def departure(self, now: float, request: Any) -> None:
        placement = self._placed.pop(request.id)
        for m in self.metrics:
            m.on_departure(now, request, placement)

    def failure(self, now: float, kind: str, component: int) -> None:
        for m in self.metrics:
            m.on_failure(now, kind, component)

    def repair(self, now: float, kind: str, component: int) -> None:
        for m in self.metrics:
            m.on_repair(now, kind, component)

    def sample(self, now: float) -> dict[str, float]:
        out: dict[str, float] = {}
        for m in self.metrics:
            out.update(_checked(m, m.sample(now), "timeseries", "sample"))
        return out

    def summary(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for m in self.metrics:
            out.update(_checked(m, m.summary(), "summary", "summary"))
        return out


def _checked(m: Metric, values: Any, table: str, hook: str) -> dict[str, Any]:
    """``values`` (what ``m.<hook>()`` returned) as plain Python values, when they are
    exactly ``m``'s declared ``table`` columns; else a :class:`PluginError` naming it."""
    declared = getattr(m, f"{table}_columns")
    if not isinstance(values, dict):
        raise PluginError(f"metric {m.label!r}: {hook}() returned {type(values).__name__}, "
                          "expected a dict of its columns' values")
    missing = [c for c in declared if c not in values]
    extra = [c for c in values if c not in declared]
    if missing or extra:
        what = (f"left out {missing[0]!r}" if missing else f"returned {extra[0]!r}, "
                f"which it does not declare in {table}_columns")
        raise PluginError(f"metric {m.label!r}: {hook}() {what} (declared: "
                          f"{', '.join(declared) or 'none'})")
    out = {}
    for name, col in declared.items():
        v = values[name]
        if isinstance(v, np.generic):
            v = v.item()
        if col.type == "float64":
            v = math.nan if v is None else float(v)
        elif v is not None and col.type == "int64":
            v = int(v)
        elif v is not None:
            v = bool(v)
        out[name] = v
    return out


def metric_rng(seed: int, index: int, position: int) -> np.random.Generator:
    """The generator of the ``position``-th metric of run ``index`` of experiment ``seed``:
    its own child of the run's seed sequence (after the workload's, the plugin's and the
    failures', :func:`dcsim.sim.failures.failure_rng`), so a metric drawing numbers changes
    nothing else in the run."""
    return np.random.default_rng(np.random.SeedSequence(entropy=seed,
                                                        spawn_key=(index, 3 + position)))
