"""Component failures: the ``failures:`` section, and the schedule of failures and repairs
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

import heapq
import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from pydantic import Field, ValidationError, field_validator, model_validator

from dcsim.config_files import resolve_path
from dcsim.csv_tables import read_csv
from dcsim.errors import ConfigError, DcsimError
from dcsim.parquet_tables import read_parquet
from dcsim.validation import StrictModel, first_error
from dcsim.workload.distributions import parse_distribution

KINDS = ("server", "link")

#: the shortest mean ``ttf`` / ``ttr`` (in the workload's time unit; module docstring)
MIN_MEAN_TIME = 1e-6
#: the most failure and repair events per arrival of the workload a run may have (module
#: docstring); a run gets :data:`FREE_ARRIVALS` arrivals' worth before its first arrival
MAX_EVENTS_PER_ARRIVAL = 1000
FREE_ARRIVALS = 10


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


def failure_rng(seed: int, index: int) -> np.random.Generator:
    """The failure stream of run ``index`` of experiment ``seed``: the third child of the
    run's seed sequence (the workload and the plugin take the first two,
    :func:`dcsim.runner.run.run_rngs`), so it is independent of both."""
    return np.random.default_rng(np.random.SeedSequence(entropy=seed, spawn_key=(index, 2)))


# ------------------------------------------------------------------------------ schedule
@dataclass
class Components:
    """What can fail in one run: how many of each kind, and each link's tier label."""

    servers: int
    links: int = 0
    link_tiers: list[str] = field(default_factory=list)  # per link, its tier label
    tier_numbers: dict[str, int] = field(default_factory=dict)  # label -> tier number

    @classmethod
    def of_topology(cls, topology) -> Components:
        """A loss-mode topology's servers and links."""
        return cls(topology.n_servers, topology.n_links,
                   [topology.tier_label(int(t)) for t in topology.link_tier],
                   {topology.tier_label(t): t for t in topology.tiers()})


def read_failure_trace(path: str, base_dir: str | None, comps: Components,
                       where: str) -> list[tuple[float, str, int, float]]:
    """``(time, kind, component, duration)`` rows of a failure trace, checked."""

    p = resolve_path(path, base_dir)
    if not p.is_file():
        raise ConfigError(f"{where}.path: no such file: {p}")
    try:
        df = (read_parquet(p) if p.suffix.lower() in (".parquet", ".pq")
              else read_csv(p))
    except Exception as e:  # noqa: BLE001 - any reader failure is the file's fault
        raise ConfigError(f"{where}.path: cannot read {p}: {e}") from None
    missing = [c for c in ("time", "kind", "component", "duration") if c not in df.columns]
    if missing:
        raise ConfigError(f"{where}: {path}: missing column {missing[0]!r} (a failure trace "
                          "has time, kind, component, duration)")
    rows = []
    count = {"server": comps.servers, "link": comps.links}
    for i, (t, kind, comp, dur) in enumerate(zip(df["time"], df["kind"], df["component"],
                                                 df["duration"], strict=True)):
        line = f"{where}: {path}: row {i + 2}"  # +1 header, +1 from 0
        kind = "server" if str(kind) == "host" else str(kind)
        if kind not in KINDS:
            raise ConfigError(f"{line}: kind {kind!r} is not server or link")
        try:
            t, dur = float(t), float(dur)
            comp_f = float(comp)
        except (TypeError, ValueError):
            raise ConfigError(f"{line}: time, component and duration must be numbers") \
                from None
        if not (math.isfinite(t) and t >= 0 and math.isfinite(dur) and dur > 0):
            raise ConfigError(f"{line}: time must be >= 0 and duration > 0, both finite")
        if not (comp_f.is_integer() and 0 <= comp_f < count[kind]):
            raise ConfigError(f"{line}: there is no {kind} {comp} "
                              f"({count[kind]} {kind}s, numbered from 0)")
        rows.append((t, kind, int(comp_f), dur))
    return rows


class FailureSchedule:
    """Failures and repairs in time order, drawn lazily (:meth:`pop`)."""

    def __init__(self, spec: FailureSpec, comps: Components, rng: np.random.Generator,
                 base_dir: str | None = None, where: str = "failures"):
        self.rng = rng
        self._heap: list[tuple[float, int, str, int, str, int]] = []
        self._seq = 0
        self.where = where
        #: events popped so far, and how many may be before the rate is checked again
        self.events = 0
        self._allowed = math.inf
        self._arrivals = None
        self._unit = "arrival"
        #: per group: (kind, component indices, ttf, ttr)
        self.groups: list[tuple[str, np.ndarray, Any, Any]] = []
        #: per group, its section (``failures.servers``, ``failures.links.tiers.core``)
        self.sections: list[str] = []
        if spec.servers is not None and comps.servers:
            self.groups.append(("server", np.arange(comps.servers), spec.servers.ttf,
                                spec.servers.ttr))
            self.sections.append(f"{where}.servers")
        if spec.links is not None:
            if not comps.links:
                raise ConfigError(f"{where}.links: this run has no links")
            tiers = spec.links.tiers
            known = set(comps.link_tiers) | {str(n) for n in comps.tier_numbers.values()}
            for name in tiers:
                if name not in known:
                    raise ConfigError(f"{where}.links.tiers.{name}: no such tier (the "
                                      f"topology's: {', '.join(comps.tier_numbers)})")
            by_label = np.asarray(comps.link_tiers)
            claimed = np.zeros(comps.links, dtype=bool)
            for name, life in tiers.items():
                label = next((lb for lb, n in comps.tier_numbers.items() if str(n) == name),
                             name)
                idx = np.flatnonzero((by_label == label) & ~claimed)
                claimed[idx] = True
                if idx.size:
                    self.groups.append(("link", idx, life.ttf, life.ttr))
                    self.sections.append(f"{where}.links.tiers.{name}")
            if spec.links.ttf is not None and (~claimed).any():
                self.groups.append(("link", np.flatnonzero(~claimed), spec.links.ttf,
                                    spec.links.ttr))
                self.sections.append(f"{where}.links")
        for g, (kind, idx, ttf, _ttr) in enumerate(self.groups):
            for c, t in zip(idx.tolist(), ttf.sample(rng, idx.size).tolist(), strict=True):
                self._push(t, kind, c, "fail", g)
        if spec.trace is not None:
            for t, kind, c, dur in read_failure_trace(spec.trace.path, base_dir, comps,
                                                      f"{where}.trace"):
                self._push(t, kind, c, "fail", -1)
                self._push(t + dur, kind, c, "repair", -1)

    def _push(self, t: float, kind: str, comp: int, event: str, group: int) -> None:
        heapq.heappush(self._heap, (float(t), self._seq, kind, comp, event, group))
        self._seq += 1

    def peek(self) -> float:
        """The time of the next event (inf when there is none)."""
        return self._heap[0][0] if self._heap else math.inf

    def limit(self, arrivals, unit: str = "request arrival") -> None:
        """Cap the events at :data:`MAX_EVENTS_PER_ARRIVAL` per ``arrivals()`` (the
        workload's arrivals so far; ``unit`` names one in the error)."""
        self._arrivals, self._unit = arrivals, unit
        self._allowed = MAX_EVENTS_PER_ARRIVAL * FREE_ARRIVALS

    def _check_rate(self) -> None:
        n = int(self._arrivals())
        self._allowed = MAX_EVENTS_PER_ARRIVAL * (n + FREE_ARRIVALS)
        if self.events <= self._allowed:
            return
        if self.groups:  # the group that fails most often
            rates = [idx.size / (ttf.mean() + ttr.mean()) for _k, idx, ttf, ttr in self.groups]
            g = int(np.argmax(rates))
            _k, idx, ttf, ttr = self.groups[g]
            fastest = (f"the fastest are {self.sections[g]} ({idx.size} of them, mean ttf "
                       f"{ttf.mean():g}, mean ttr {ttr.mean():g}): make them fail less "
                       "often")
        else:
            fastest = f"shorten {self.where}.trace"
        raise DcsimError(
            f"{self.where}: {self.events:,} failure and repair events for {n:,} "
            f"{self._unit}s so far, more than {MAX_EVENTS_PER_ARRIVAL:,} per {self._unit}: "
            f"the failures would swamp the run; {fastest}")

    def pop(self) -> tuple[float, str, int, str]:
        """The next ``(time, kind, component, "fail" | "repair")``; a drawn component's
        next event is drawn now (its repair after a failure, its next failure after a
        repair). Past the rate :meth:`limit` allows, a :class:`DcsimError`."""
        self.events += 1
        if self.events > self._allowed:
            self._check_rate()
        t, _, kind, comp, event, g = heapq.heappop(self._heap)
        if g >= 0:
            _kind, _idx, ttf, ttr = self.groups[g]
            nxt = ttr if event == "fail" else ttf
            self._push(t + float(nxt.sample(self.rng, 1)[0]), kind, comp,
                       "repair" if event == "fail" else "fail", g)
        return t, kind, comp, event
