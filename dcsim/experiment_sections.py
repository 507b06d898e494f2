"""The sections an experiment file may have in more than one mode: an entry of its plugin
list (:class:`AllocatorSpec`), ``metrics:`` (:class:`MetricsSpec`) and ``failures:``
(:class:`FailureSpec`; modes loss, vm_online and gpu), whose schedule
:class:`dcsim.sim.failures.FailureSchedule` draws or replays.

The ``failures:`` section:

it draws or replays.

::

    failures:
      name: servers               # optional: the results' column when failures is swept
      on_failure: drop            # or reallocate
      servers:                    # every server (in vm_online: every host)
        ttf: {dist: exponential, mean: 20000}   # time to failure, from being up
        ttr: {dist: exponential, mean: 500}     # time to repair, from failing
      links:                      # loss mode on a topology with links
        ttf: {dist: exponential, mean: 50000}   # every link ...
        ttr: 200
        tiers:                    # ... or, per tier (name as in util_bw_<tier>, or number),
          core: {ttf: {dist: exponential, mean: 10000}, ttr: 300}
      trace: {path: failures.csv} # replayed failures: time, kind, component, duration

**Drawn failures.** Each listed component alternates up and down: up for a draw of ``ttf``,
down for a draw of ``ttr``, and so on (an alternating renewal process), independently of
the others. A link's tier entry wins over the links' own ``ttf``/``ttr``; a link of a tier
not listed, with no links' own pair, never fails. Draws come from the run's failure stream
(:func:`failure_rng`), which depends only on the experiment seed and the run's seed index,
so every allocator of a seed sees the same failures, and adding failures changes neither
the workload nor the allocators' streams.

**Limits.** A run's times are float64 in the workload's time unit, so the mean of every
``ttf`` and ``ttr`` must be at least :data:`MIN_MEAN_TIME` (1e-6): a clock that reaches
1e9 units (a billion requests at one per tick) steps by about 1.2e-7 there, and shorter
draws would be rounded away while the run stood still. A run stops with a
:class:`~dcsim.errors.DcsimError` when its failures outnumber the workload's arrivals by
more than :data:`MAX_EVENTS_PER_ARRIVAL` (after a first 10 arrivals' worth): such a run
would simulate little but failures, as slowly as its rows pile up.

**Replayed failures.** A CSV or Parquet table with columns ``time`` (when it fails),
``kind`` (``server`` or ``link``; ``host`` is read as ``server``), ``component`` (its
index) and ``duration`` (how long it stays down). Drawn and replayed failures may be
combined; a component that fails while already down stays down until every failure of it
is repaired.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from dcsim.errors import ConfigError
from dcsim.validation import StrictModel, first_error
from dcsim.workload.distributions import parse_distribution


class AllocatorSpec(StrictModel):
    """One plugin of the comparison (an allocator, or in queue mode a scheduler, …): its
    registered name, options and optional label."""

    name: str
    options: dict[str, Any] = Field(default_factory=dict)
    label: str | None = None


class MetricPluginSpec(StrictModel):
    """One entry of ``metrics.plugins``: a metric plugin's registered name and options."""

    name: str
    options: dict[str, Any] = Field(default_factory=dict)


class MetricsSpec(StrictModel):
    """The ``metrics:`` section: when the time series is sampled, how many rows a Parquet
    row group holds, and the metric plugins (:mod:`dcsim.metrics`) the runs add."""

    sample_interval: Annotated[float, Field(gt=0)] | None = None
    sample_every: Annotated[int, Field(gt=0)] = 100
    flush_rows: Annotated[int, Field(gt=0)] = 65536  # rows per Parquet row group
    #: metric plugins, by name or ``{name, options}``, in the order their hooks run
    plugins: list[str | MetricPluginSpec] = Field(default_factory=list)

    def plugin_specs(self) -> list[MetricPluginSpec]:
        """``plugins`` with every entry as a :class:`MetricPluginSpec`."""
        return [MetricPluginSpec(name=p) if isinstance(p, str) else p for p in self.plugins]


KINDS = ("server", "link")

#: the shortest mean ``ttf`` / ``ttr`` (in the workload's time unit; module docstring)
MIN_MEAN_TIME = 1e-6


def _dist(value: Any, info) -> Any:
    try:
        d = parse_distribution(value, "")
    except ConfigError as e:
        raise ValueError(str(e)) from None
    if not hasattr(d, "sample"):
        raise ValueError("a product of attributes is not a time distribution")
    lb = d.lower_bound()
    if lb < 0:
        raise ValueError(f"can draw negative times (from {lb:g}); add min: 0")
    if not d.mean() > 0:
        raise ValueError("its mean must be positive (a component would fail and be repaired "
                         "forever at one instant)")
    if d.mean() < MIN_MEAN_TIME:
        raise ValueError(f"mean {d.mean():g} is below the resolution of failure times, "
                         f"{MIN_MEAN_TIME:g} time units (the workload's; a run's clock would "
                         "stop advancing while failures pile up)")
    return d


class Lifetimes(StrictModel):
    """Time to failure and time to repair of one kind of component."""

    ttf: Any
    ttr: Any

    _check = field_validator("ttf", "ttr", mode="before")(_dist)


class LinkFailures(StrictModel):
    """Links: one pair for all, and/or one pair per tier."""

    ttf: Any = None
    ttr: Any = None
    tiers: dict[str, Lifetimes] = Field(default_factory=dict)

    @field_validator("ttf", "ttr", mode="before")
    @classmethod
    def _optional(cls, value: Any, info) -> Any:
        return None if value is None else _dist(value, info)

    @field_validator("tiers", mode="before")
    @classmethod
    def _keys(cls, value: Any) -> Any:
        return {str(k): v for k, v in value.items()} if isinstance(value, dict) else value

    @model_validator(mode="after")
    def _pairs(self) -> LinkFailures:
        if (self.ttf is None) != (self.ttr is None):
            raise ValueError("ttf and ttr go together")
        if self.ttf is None and not self.tiers:
            raise ValueError("give ttf and ttr, or tiers")
        return self


class FailureTrace(StrictModel):
    path: str


class FailureSpec(StrictModel):
    """The ``failures:`` section."""

    name: str = ""  # what a sweep's ``failures`` column shows for this section
    on_failure: Literal["drop", "reallocate"] = "drop"
    servers: Lifetimes | None = None
    links: LinkFailures | None = None
    trace: FailureTrace | None = None

    @model_validator(mode="after")
    def _something(self) -> FailureSpec:
        if self.servers is None and self.links is None and self.trace is None:
            raise ValueError("name servers, links or a trace (nothing would fail)")
        return self


def parse_failures(data: Any, where: str = "failures") -> FailureSpec:
    """Validate a ``failures:`` section; a :class:`ConfigError` names the field."""
    if isinstance(data, FailureSpec):
        return data
    try:
        return FailureSpec.model_validate(data if data is not None else {})
    except ValidationError as e:
        raise ConfigError(first_error(e, where)) from None
