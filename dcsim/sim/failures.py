"""The schedule of component failures and repairs of one run, drawn from or replayed by
its ``failures:`` section (:class:`dcsim.experiment_sections.FailureSpec`, whose docstring says
what each field means), and the run's failure stream (:func:`failure_rng`)."""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dcsim.config_files import resolve_path
from dcsim.csv_tables import read_csv
from dcsim.errors import ConfigError, DcsimError
from dcsim.experiment_sections import KINDS, FailureSpec
from dcsim.parquet_tables import read_parquet

#: the most failure and repair events per arrival of the workload a run may have (module
#: docstring); a run gets :data:`FREE_ARRIVALS` arrivals' worth before its first arrival
MAX_EVENTS_PER_ARRIVAL = 1000
FREE_ARRIVALS = 10


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
