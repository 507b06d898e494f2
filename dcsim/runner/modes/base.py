"""What a mode provides (:class:`Mode`) and what building one run gives (:class:`Built`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: mode -> (the list its plugins come from, their plugin kind); the table the experiment
#: spec reads before the modes themselves are imported
PLUGIN_LISTS: dict[str, tuple[str, str]] = {
    "loss": ("allocators", "allocator"),
    "queue": ("schedulers", "scheduler"),
    "reschedule": ("reschedulers", "rescheduler"),
    "vm_online": ("placers", "placer"),
    "gpu": ("gpu_allocators", "gpu_allocator"),
}


@dataclass
class Built:
    """One run, ready: ``simulate(sink)`` runs it and returns the summary metrics; the
    ``families`` and ``flags`` bind the mode's declared tables (:mod:`dcsim.results.schema`)
    to this run."""

    simulate: Callable[[Any], dict[str, Any]]
    families: dict[str, list[str]] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)


class Mode(ABC):
    """One simulation family."""

    name: str

    @property
    def plugin_key(self) -> str:
        return PLUGIN_LISTS[self.name][0]

    @property
    def plugin_kind(self) -> str:
        return PLUGIN_LISTS[self.name][1]

    #: the sections of the experiment file the mode does not read (left out of the
    #: resolved ``experiment.yaml``)
    unused: frozenset[str] = frozenset()

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
              plugin_rng: np.random.Generator) -> Built:
        """One run of ``plan``: the workload drawn from ``workload_rng``, the plugin given
        ``plugin_rng``."""


def plugin_instance(plan, kind: str, rng, **kwargs):
    """This run's plugin of ``kind``, built with its validated options and generator."""
    from dcsim.plugins import get_plugin_class

    cls = get_plugin_class(plan.allocator["name"], kind)
    return cls(cls.parse_options(plan.allocator["options"], where=plan.where), rng=rng,
               **kwargs)


def topology_families(topology) -> tuple[dict[str, list[str]], list[str]]:
    """The table families and flags of a run on ``topology``."""
    families = {"resource": list(topology.resources),
                "tier": [topology.tier_label(t) for t in topology.tiers()]}
    return families, (["links"] if topology.n_links else [])
