"""What an allocator may know of a run's workload before it arrives (``view.workload``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dcsim.workload.synthetic import AugmentedSource, SyntheticSource


@dataclass(frozen=True)
class WorkloadFacts:
    """What an allocator may know of a run's workload before it arrives (``view.workload``
    in loss mode; None outside a simulation): ``attrs``, the distributions of a synthetic
    workload's per-request attributes (name -> :class:`~dcsim.workload.BaseDist`; empty
    for a trace), and ``mean_duration``, its exact mean holding time (None where the
    workload does not say: a trace). Every field is always there: a plugin reads it, it
    does not probe for it."""

    attrs: Mapping[str, Any] = field(default_factory=dict)
    mean_duration: float | None = None

    @classmethod
    def of(cls, source: Any) -> WorkloadFacts:
        """The facts of a request source (a synthetic one, a trace with synthetic
        attributes on top, a trace, or a user's own source: the last two say nothing)."""
        if isinstance(source, SyntheticSource):
            return cls(dict(source.attrs), float(source.mean_duration))
        if isinstance(source, AugmentedSource):
            return cls(dict(source.attrs), cls.of(source.inner).mean_duration)
        return cls()
