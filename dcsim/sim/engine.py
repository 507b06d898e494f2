"""The SimPy engine: arrivals, allocation decisions, holding periods, departures, metrics.

One :class:`Engine` runs one simulation: one topology, one workload stream, one allocator.
It owns every state change. An allocator only returns a choice; the engine validates it
(a bad choice is a :class:`PluginError` naming the allocator), reserves the resources,
schedules the departure and writes one record per request.

Loss mode is the only admission mode so far: a request the allocator rejects is dropped.
``_admit`` is the single place a queue with a scheduler will plug in; periodic rescheduling
will be another SimPy process beside ``_arrivals``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import simpy

from dcsim.allocators.base import Allocator
from dcsim.errors import PluginError
from dcsim.model import ClusterState, Placement, Request, StateView, Topology
from dcsim.model.state import EPS
from dcsim.sim.metrics import Meter
from dcsim.sim.records import ColumnBuffer
from dcsim.workload.base import RequestSource


@dataclass
class EngineConfig:
    """Measurement settings of one run."""

    warmup_requests: int = 0  # the first N arrivals are not measured
    warmup_time: float = 0.0  # arrivals before this time are not measured
    sample_interval: float | None = None  # time-series period (simulated time)
    sample_every: int = 100  # ... or one sample per this many arrivals when no interval
    flush_rows: int = 65536  # records per batch handed to the sink


#: Receives column batches: ``sink(kind, columns)`` with kind "requests" or "timeseries".
Sink = Callable[[str, dict[str, list]], None]


class Engine:
    """Simulate one workload against one allocator on one topology."""

    def __init__(
        self,
        topology: Topology,
        source: RequestSource,
        allocator: Allocator,
        rng: np.random.Generator,
        config: EngineConfig | None = None,
        sink: Sink | None = None,
    ):
        self.topology = topology
        self.source = source
        self.allocator = allocator
        self.rng = rng
        self.config = config or EngineConfig()
        self.sink = sink
        self.env = simpy.Environment()
        self.state = ClusterState(topology)
        self.view = StateView(self.state)
        self.meter = Meter(topology)
        self.received = 0
        self.accepted = 0
        self.released = 0
        self._measured_received = 0
        self._measured_accepted = 0
        self._footprint_sum = 0.0
        self._decision_sum = 0.0
        self._arrivals_done = False
        self._requests = ColumnBuffer(_request_columns(topology))
        self._samples = ColumnBuffer(None)
        self._tol = EPS * np.maximum(self.state.capacity, 1.0)

    # ------------------------------------------------------------------ processes
    def run(self) -> dict[str, Any]:
        """Run to completion (every accepted request departed); return the summary metrics."""
        self.allocator.setup(self.view)
        self.env.process(self._arrivals())
        if self.config.sample_interval:
            self.env.process(self._sampler(self.config.sample_interval))
        self.env.run()
        self._flush(final=True)
        return self.summary()

    def _arrivals(self):
        env = self.env
        cfg = self.config
        resources = self.topology.resources
        for batch in self.source.batches(self.rng):
            arrival = batch.arrival.tolist()
            duration = batch.duration.tolist()
            bandwidth = batch.bandwidth.tolist()
            demand = np.ascontiguousarray(batch.demand, dtype=np.float64)
            if demand.ndim != 2 or demand.shape[1] != len(resources):
                raise PluginError(
                    f"workload yields demand of shape {demand.shape}; "
                    f"expected (n, {len(resources)}) for resources {resources}"
                )
            attrs = {k: v.tolist() for k, v in batch.attrs.items()}
            for i, t in enumerate(arrival):
                if t > env.now:
                    yield env.timeout(t - env.now)
                req = Request(
                    self.received,
                    t,
                    duration[i],
                    demand[i],
                    bandwidth[i],
                    {k: v[i] for k, v in attrs.items()},
                )
                if not cfg.sample_interval and self.received % cfg.sample_every == 0:
                    self._sample()
                self._arrive(req)
        self._arrivals_done = True
        self.meter.close_window(env.now)

    def _sampler(self, interval: float):
        while not self._arrivals_done:
            self._sample()
            yield self.env.timeout(interval)

    # ------------------------------------------------------------------ decisions
    def _arrive(self, req: Request) -> None:
        now = self.env.now
        cfg = self.config
        measured = req.id >= cfg.warmup_requests and now >= cfg.warmup_time
        if measured and not self.meter.open:
            self.meter.open_window(now)
        self.received += 1
        if measured:
            self._measured_received += 1
        self.view.now = now
        t0 = time.perf_counter()
        choice = self.allocator.allocate(req, self.view)
        decision = time.perf_counter() - t0
        placement = self._admit(req, choice)
        if placement is not None:
            self.meter.advance(now)
            self.state._apply(placement, -1.0)
            self.meter.add(placement, +1.0)
            self.accepted += 1
            if measured:
                self._measured_accepted += 1
                self._footprint_sum += placement.footprint
            ev = self.env.timeout(req.duration)
            ev.callbacks.append(partial(self._depart, req, placement))
        if measured:
            self._decision_sum += decision
        self._record(req, placement, measured, decision)

    def _admit(self, req: Request, choice: Any) -> Placement | None:
        """Turn an allocator's choice into a validated placement (loss mode: None = drop)."""
        if choice is None:
            return None
        label = self.allocator.label
        if isinstance(choice, (int, np.integer)) and not isinstance(choice, bool):
            s = int(choice)
            if not 0 <= s < self.topology.n_servers:
                raise PluginError(
                    f"allocator {label!r} chose server {s}, "
                    f"outside 0..{self.topology.n_servers - 1}"
                )
            if (self.state.free[s] - req.demand < -self._tol[s]).any():
                raise PluginError(
                    f"allocator {label!r} chose server {s} for request {req.id}, which lacks "
                    f"free resources (free {self.state.free[s].tolist()}, "
                    f"demand {req.demand.tolist()})"
                )
            return Placement(np.array([s], dtype=np.int64), req.demand.reshape(1, -1))
        if isinstance(choice, Placement):
            total = choice.amounts.sum(axis=0) if choice.amounts.size else None
            if total is None or total.shape != req.demand.shape or not np.allclose(
                total, req.demand, rtol=1e-9, atol=1e-9
            ):
                raise PluginError(
                    f"allocator {label!r} placed {None if total is None else total.tolist()} "
                    f"for request {req.id}, which demands {req.demand.tolist()}"
                )
            why = self.state.check(choice)
            if why is not None:
                raise PluginError(f"allocator {label!r} returned an invalid placement: {why}")
            return choice
        raise PluginError(
            f"allocator {label!r} returned {type(choice).__name__}; "
            "expected a server index, a Placement or None"
        )

    def _depart(self, req: Request, placement: Placement, _event: simpy.Event) -> None:
        self.meter.advance(self.env.now)
        self.state.release(placement)
        self.meter.add(placement, -1.0)
        self.released += 1
        self.view.now = self.env.now
        self.allocator.released(req, placement, self.view)

    # ------------------------------------------------------------------ records
    def _record(self, req: Request, p: Placement | None, measured: bool, decision: float) -> None:
        buf = self._requests
        cols = buf.columns
        cols["id"].append(req.id)
        cols["arrival"].append(req.arrival)
        cols["duration"].append(req.duration)
        for name, v in zip(self.topology.resources, req.demand.tolist(), strict=True):
            cols[name].append(v)
        cols["bandwidth"].append(req.bandwidth)
        for k, v in req.attrs.items():
            cols[k].append(v)
        if p is None:
            cols["accepted"].append(False)
            cols["start"].append(math.nan)
            cols["end"].append(math.nan)
            cols["n_servers"].append(0)
            cols["servers"].append([])
            cols["locality"].append(-1)
            cols["footprint"].append(math.nan)
        else:
            servers = p.servers.tolist()
            cols["accepted"].append(True)
            cols["start"].append(req.arrival)
            cols["end"].append(req.arrival + req.duration)
            cols["n_servers"].append(len(servers))
            cols["servers"].append(servers)
            cols["locality"].append(self.topology.locality(p.servers))
            cols["footprint"].append(p.footprint)
        cols["measured"].append(measured)
        cols["decision_s"].append(decision)
        buf.rows += 1
        if buf.rows >= self.config.flush_rows:
            self._flush()

    def _sample(self) -> None:
        self.meter.advance(self.env.now)
        row = {
            "time": float(self.env.now),
            "received": self.received,
            "accepted": self.accepted,
            **self.meter.instant(),
        }
        self._samples.append_row(row)
        if self._samples.rows >= self.config.flush_rows:
            self._flush()

    def _flush(self, final: bool = False) -> None:
        for kind, buf in (("requests", self._requests), ("timeseries", self._samples)):
            if buf.rows and self.sink is not None:
                self.sink(kind, buf.columns)
            if buf.rows or final:
                buf.clear()

    # ------------------------------------------------------------------ summary
    def summary(self) -> dict[str, Any]:
        rec, acc = self._measured_received, self._measured_accepted
        out: dict[str, Any] = {
            "received": rec,
            "accepted": acc,
            "acceptance_ratio": acc / rec if rec else math.nan,
        }
        out.update(self.meter.averages())
        if self.topology.n_links:
            out["mean_footprint"] = self._footprint_sum / acc if acc else math.nan
        out["mean_decision_s"] = self._decision_sum / rec if rec else math.nan
        out["sim_time"] = float(self.env.now)
        return out


def _request_columns(topology: Topology) -> list[str]:
    """Fixed leading columns; a workload's extra ``attrs`` columns follow them."""
    return [
        "id",
        "arrival",
        "duration",
        *topology.resources,
        "bandwidth",
        "accepted",
        "start",
        "end",
        "n_servers",
        "servers",
        "locality",
        "footprint",
        "measured",
        "decision_s",
    ]
