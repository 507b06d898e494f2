"""What a mode provides (:class:`Mode`) and what building one run gives (:class:`Built`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: Receives a run's record batches: ``sink(table, columns)``.
Sink = Callable[[str, dict[str, Any]], None]

#: the runner's progress watcher of one run (:func:`dcsim.runner.progress.watch_run` bound to
#: the run): ``with watch(read): ...`` around the simulation, ``read()`` -> (done, total,
#: simulated time)
Watch = Callable[[Callable[[], tuple]], AbstractContextManager]

#: where each section an experiment file may have stands in its resolved
#: ``experiment.yaml`` (a mode's own sections are written in this order)
SECTION_ORDER = ("topology", "workload", "queue", "vm", "gpu", "capacity", "departures",
                 "failures", "power", "warmup")


@dataclass(frozen=True)
class Section:
    """One top-level section a mode reads: its type (a pydantic annotation: a typed model,
    or ``dict[str, Any] | BaseModel`` for a section the mode parses itself in
    :meth:`Mode.sections`) and its default (``...``: the section is required;
    ``factory``: a fresh default per file)."""

    annotation: Any
    default: Any = None
    factory: Callable[[], Any] | None = None

    def field(self) -> tuple[Any, Any]:
        """The ``(annotation, FieldInfo)`` pair pydantic's ``create_model`` takes."""
        from pydantic import Field

        if self.factory is not None:
            return self.annotation, Field(default_factory=self.factory)
        return self.annotation, Field(self.default)


@dataclass
class Built:
    """One run, ready: ``simulate(sink)`` runs it and returns the summary metrics; the
    ``families`` and ``flags`` bind the mode's declared tables (:mod:`dcsim.results.schema`)
    to this run."""

    simulate: Callable[[Any], dict[str, Any]]
    families: dict[str, list[str]] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)


class Mode(ABC):
    """One simulation family: the plugin list it reads (``plugin_key``, whose entries are
    plugins of ``plugin_kind``), the top-level sections it reads (:attr:`own_sections`;
    every other section is refused with a message naming the modes that read it), and how a
    run is checked and built. A mode's module imports its engine only inside
    :meth:`build`, so validating an experiment imports no engine."""

    name: str
    plugin_key: str
    plugin_kind: str
    #: the sections this mode reads besides the ones every mode has (``name``, ``mode``,
    #: ``seed``, ``seeds``, ``plugins``, ``metrics``, ``matrix``) and its plugin list
    own_sections: dict[str, Section] = {}
    #: why a section this mode refuses is not read, where a plain "not used" would mislead
    #: (e.g. gpu's own ``gpu.power``)
    refusals: dict[str, str] = {}
    description: str = ""
    #: whether this mode's engine calls metric plugins (``metrics.plugins``,
    #: :mod:`dcsim.metrics`); the planner refuses them in a mode that does not
    runs_metrics: bool = False

    @property
    def tables(self) -> dict[str, Any]:
        """The tables a run writes, by name (:class:`dcsim.results.schema.Table`; the
        streamed ones, then ``summary``): a built-in mode's are declared in
        :data:`dcsim.results.schema.TABLES`; a plugin's mode overrides this."""
        from dcsim.errors import PluginError
        from dcsim.results.schema import TABLES

        if self.name not in TABLES:
            raise PluginError(f"mode {self.name!r} declares no tables (a plugin's mode sets "
                              "``tables``, a summary Table at least)")
        return TABLES[self.name]

    def sections(self, spec) -> dict[str, Any]:
        """The mode's own sections of ``spec`` parsed into their typed models (a
        :class:`~dcsim.errors.ConfigError` names the field): what a sweep point carries
        into :meth:`check` and :meth:`build` in place of the file's mappings."""
        return {}

    @abstractmethod
    def check(self, point, base_dir: str) -> None:
        """Build what a run of this sweep point needs once, so that a bad file or value is
        a :class:`~dcsim.errors.ConfigError` before anything runs."""

    @abstractmethod
    def resolved(self, spec) -> dict[str, Any]:
        """The mode's own sections with every default filled in."""

    @abstractmethod
    def build(self, spec, plan, workload_rng: np.random.Generator,
              plugin_rng: np.random.Generator, watch: Watch) -> Built:
        """One run of ``plan``: the workload drawn from ``workload_rng``, the plugin given
        ``plugin_rng``; ``watch(read)`` is the runner's progress watcher, a context manager
        around the simulation whose ``read()`` returns ``(done, total, sim_time)`` (it only
        reads)."""


def plugin_instance(plan, kind: str, rng, **kwargs):
    """This run's plugin of ``kind``, built with its validated options and generator."""
    from dcsim.plugins import get_plugin_class

    cls = get_plugin_class(plan.allocator["name"], kind)
    return cls(cls.parse_options(plan.allocator["options"], where=plan.where), rng=rng,
               **kwargs)


def metric_observers(plan, spec):
    """This run's metric plugins (``plan.metrics``) as one
    :class:`~dcsim.metrics.Observers`, each built with its validated options and its own
    generator (:func:`~dcsim.metrics.metric_rng`); None when the run has none (the engine
    then calls no metric hook)."""
    if not plan.metrics:
        return None
    from dcsim.metrics import Observers, metric_rng
    from dcsim.plugins import get_plugin_class

    metrics = []
    for k, entry in enumerate(plan.metrics):
        cls = get_plugin_class(entry["name"], "metric")
        metrics.append(cls(cls.parse_options(entry["options"], where=f"metrics.plugins.{k}"),
                           rng=metric_rng(spec.seed, plan.seed, k)))
    return Observers(metrics)


def topology_families(topology) -> tuple[dict[str, list[str]], list[str]]:
    """The table families and flags of a run on ``topology``."""
    families = {"resource": list(topology.resources),
                "tier": [topology.tier_label(t) for t in topology.tiers()]}
    return families, (["links"] if topology.n_links else [])
