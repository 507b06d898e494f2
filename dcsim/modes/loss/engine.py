"""The SimPy engine: arrivals, allocation decisions, holding periods, departures, metrics.

One :class:`Engine` runs one simulation: one topology, one workload stream, one allocator.
It owns every state change. An allocator only returns a choice; the engine validates it
(a bad choice is a :class:`PluginError` naming the allocator), reserves the resources,
schedules the departure and writes one record per request.

This is loss mode: a request the allocator rejects is dropped (``admit`` is where an
accepted choice is validated and reserved). Queue mode, which holds jobs for a scheduler,
and the VM and GPU engines are their own modes' packages (:mod:`dcsim.modes`) on the same
core (:mod:`dcsim.sim.core`). With ``capacity="wait"`` (the Nara
authors' environment) ``_arrivals`` first holds (``_hold``) a request whose demand exceeds
the cluster's *total* free resources, pausing the arrival process until departures make it
fit; only then is it offered to the allocator.

``departures`` orders the departures of an instant against its arrival. The default,
``before_arrivals``, releases every request ending at ``t`` before a request arriving at ``t``
is offered. ``after_first_step`` is the Nara authors' environment's clock: those departures
are released after the first server of the request decided at ``t`` is taken, or after its
decision when it takes no partial step; a request held for capacity is offered one time
unit after the departures that make room. The engine releases them itself: while it
decides under that clock it sets ``view.step_boundaries``, a multi-server allocator then
decides stepwise and its generator yields :data:`~dcsim.allocators.base.FIRST_STEP` after
the first server (:mod:`dcsim.allocators.multi.step`), and ``_arrive_steps`` releases the
due departures there before resuming it.

An allocator may also decide *stepwise*: when its ``allocate()`` returns a generator, the
arrival process runs it (``_arrive_steps``): the SimPy events it yields go to SimPy, so the
generator can wait on events that something outside the simulation triggers at the same
instant — a learning environment (:mod:`dcsim.learn.nara.env`) uses this to hand each
server choice to an agent — and :data:`~dcsim.allocators.base.FIRST_STEP` is acted on by
the engine. Loss-mode allocators returning a choice are unaffected.

**The common case as one loop** (``_fused_arrivals``): each request offered, decided, reserved and
its departure scheduled, and the departures due before each arrival run in place, with
everything the loop reads bound once per workload batch.

It applies when nothing else needs to see an arrival (no ``capacity: wait``, no deferred
departures, no component failures): ``_fused_arrivals`` is then the
arrival process over a batch. An allocator returning a server index that fits is handled in
place (the state's unrolled ``take_one``, the meter's ``held``, a departure event); any
other choice — a :class:`~dcsim.model.Placement`, ``None``, a bad index, a stepwise
generator — goes to the engine's general path (``_settle``, ``_arrive_steps``), so each is
checked and recorded exactly as there.

The clock is SimPy's, kept exactly: where the general path's arrival clock
(:meth:`~dcsim.sim.core.SimCore.walk`) would wait on a ``Timeout`` until the next arrival,
this loop draws the id that ``Timeout`` would have drawn and runs, in SimPy's order
``(time, priority, id)``, the departures (:class:`_ServerDeparture`, an
:class:`~dcsim.sim.core.InlineEvent`) due before it, as ``Environment.step`` would; the
first other event due before it (a periodic sample, a ``Timeout`` of the general path,
anything a plugin scheduled) hands the clock back to SimPy with a stand-in for that
``Timeout`` (:meth:`~dcsim.sim.core.SimCore.wake_at`), in its place. So every event runs
at the same time in the same order as on the general path, without a SimPy event per
arrival. The results are those of the general path; the loop exists because the engine
runs it once per request (issue #37: the engine at the speed of bare SimPy's process per
request at 1,000 servers).

**The Nara authors' environment** (``_hold``, ``_defer_departure``): ``capacity: wait``
holds a request until the cluster's total free resources cover it, and ``departures:
after_first_step`` releases the departures of an instant after the first step of the
request decided then (``_arrive_steps`` on :data:`~dcsim.allocators.base.FIRST_STEP`, or
``_settle``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from functools import partial
from heapq import heappop, heappush
from itertools import compress, repeat
from operator import is_not
from types import GeneratorType, MappingProxyType
from typing import Any

import numpy as np
import simpy
from simpy.events import NORMAL

from dcsim.allocators.base import FIRST_STEP, Allocator
from dcsim.allocators.single import FirstFitAllocator
from dcsim.errors import DcsimError, PluginError
from dcsim.kernels import kernels_on
from dcsim.metrics import Observers, RunStart
from dcsim.model import ClusterState, Placement, Request, StateView, Topology
from dcsim.model.request import new_request
from dcsim.model.state import EPS
from dcsim.modes.loss.compiled_loop import DONE, HAND_OVER, REFUSED, CompiledLoop
from dcsim.modes.loss.metrics import AcceptanceLog, Meter
from dcsim.modes.loss.power import PowerMeter, PowerSetup
from dcsim.modes.loss.records import ColumnBuffer, request_columns, unpack_batch
from dcsim.modes.loss.spec import EngineConfig
from dcsim.sim.core import InlineEvent, SimCore
from dcsim.workload.base import RequestBatch, RequestSource
from dcsim.workload.facts import WorkloadFacts

NO_ATTRS: MappingProxyType[str, Any] = MappingProxyType({})  # a request without attrs


class _ServerDeparture(InlineEvent):
    """The departure of a request the fused path put on one server: run in place by the
    fused arrivals, or by SimPy (``callbacks``: the engine's ``_depart_event``)."""

    __slots__ = ("server", "request", "amount")


#: Receives column batches: ``sink(kind, columns)`` with kind "requests" (one call per
#: workload batch, numpy arrays or lists) or "timeseries". The sink decides how to group
#: them into files.
Sink = Callable[[str, dict[str, list]], None]


def _close(total: np.ndarray, demand: np.ndarray) -> bool:
    """``np.allclose(total, demand, rtol=1e-9, atol=1e-9)``, on Python floats for the few
    resources a request has (np.allclose costs some 50 us a call); numpy decides whenever
    the plain test fails (infinities, NaN)."""
    if all(abs(x - y) <= 1e-9 + 1e-9 * abs(y) < math.inf  # finite, as numpy's formula
           for x, y in zip(total.tolist(), demand.tolist(), strict=True)):
        return True
    return bool(np.allclose(total, demand, rtol=1e-9, atol=1e-9))


class Engine(SimCore):
    """Simulate one workload against one allocator on one topology."""

    def __init__(
        self,
        topology: Topology,
        source: RequestSource,
        allocator: Allocator,
        rng: np.random.Generator,
        config: EngineConfig | None = None,
        sink: Sink | None = None,
        failures: Callable[[Engine], Any] | None = None,
        power: PowerSetup | None = None,
        metrics: Observers | None = None,
    ):
        self.topology = topology
        self.source = source
        self.allocator = allocator
        self.rng = rng
        self.config = config or EngineConfig()
        self.sink = sink
        SimCore.__init__(self)
        self.state = ClusterState(topology)
        self.view = StateView(self.state)
        self.view.workload = WorkloadFacts.of(source)
        self.meter = Meter(topology)
        self.received = 0
        self.accepted = 0
        self.released = 0
        self._measured_received = 0
        self._measured_accepted = 0
        self._footprint_sum = 0.0
        self._decision_sum = 0.0
        # what the failure adapter (dcsim.modes.loss.failures) reads and calls: whether the
        # workload has ended, the departure callback (on_depart), the deferred departures
        # (due), whether the allocator wants release callbacks, admit() and wake_held()
        self.arrivals_done = False
        self._measured_log = AcceptanceLog()  # for acceptance_last20
        #: the run's metric plugins (dcsim.metrics), or None: then no metric hook is called
        #: anywhere (the calls are installed here, once, only when there are some)
        self.metrics = metrics
        if metrics is not None:
            self._observe(metrics)
        self._wait = self.config.capacity == "wait"
        self._hold_tol = EPS * np.maximum(self.meter.capacity, 1.0)
        self._departure: simpy.Event | None = None  # a held request waits on this
        self.on_depart = self._depart_and_notify if self._wait else self._depart
        # departures: after_first_step: requests ending now wait in due until the request
        # decided now has taken its first server (or has been decided)
        self._defer = self.config.departures == "after_first_step"
        self.due: list[tuple[Request, Placement, list[float]]] = []
        self._deciding = False
        if self._defer:
            self.on_depart = self._defer_departure
        self._samples = ColumnBuffer(None)
        self._n_servers = topology.n_servers
        # skip the per-departure call when the allocator does not override released()
        self.notifies_release = type(allocator).released is not Allocator.released
        # one read-only index array per server, shared by single-server placements
        self._server_ids = [np.array([i], dtype=np.int64) for i in range(topology.n_servers)]
        for a in self._server_ids:
            a.flags.writeable = False
        # component failures (dcsim.modes.loss.failures.LossFailures), built on this engine
        self._failures = failures(self) if failures is not None else None
        self._take_one, self._give_one = self.state.server_ops()
        self._departure_callbacks = [self._depart_event]  # what every departure event runs
        # power and energy (dcsim.modes.loss.power): None when the run has no power: section
        self.power = PowerMeter(power, topology, self.state) if power is not None else None
        if self.power is not None:
            self._take_one, self._give_one = self.power.server_ops(
                self._take_one, self._give_one, self.env)
        #: request id -> the switch-on delay it waited (power.power_on_delay), until its
        #: batch's rows are written
        self._switch_on_delays: dict[int, float] = {}
        # the common case, fused (_fused_arrivals): loss mode, nothing else watching arrivals
        # (a switch-on delay is checked on the general path only)
        self._fused = (not self._defer and self._failures is None and not self._wait
                       and (self.power is None or not self.power.delay)
                       and metrics is None)
        self._warm_requests = self.config.warmup_requests
        self._warm_time = self.config.warmup_time
        # the fused loop compiled (dcsim.modes.loss.compiled_loop): built-in first_fit on
        # two resources with capacity, nothing told of releases, no power meter
        self._compiled = (CompiledLoop(self.state.capacity)
                          if self._fused and type(allocator) is FirstFitAllocator
                          and self.power is None and not self.notifies_release
                          and len(topology.resources) == 2
                          and bool((self.meter.capacity > 0).all()) and kernels_on()
                          else None)

    # ------------------------------------------------------------------ processes
    def run(self) -> dict[str, Any]:
        """Run to completion (every accepted request departed); return the summary metrics."""
        self.start()
        # with failures the failure process never runs out: stop when every request is out
        self.simulate(until=self._failures.done if self._failures is not None else None)
        if not self.arrivals_done:  # cannot happen: a held request fits an empty cluster
            raise DcsimError(f"request {self.received} was held for capacity and never fitted")
        self._flush(final=True)
        return self.summary()

    def start(self) -> simpy.Process:
        """Set the allocator up and start the processes without running them; returns the
        arrival process (it ends after the last arrival's decision). :meth:`run` is
        ``start()`` then running to completion; a caller that steps the simulation itself
        (a learning environment) calls ``start()`` and ``env.step()``."""
        self.allocator.setup(self.view)
        if self.metrics is not None:
            self.metrics.start(RunStart("loss", self.topology, self.view,
                                        tuple(self.topology.resources)))
        arrivals = self.env.process(self._arrivals())
        if self.config.sample_interval:
            self.every(self.config.sample_interval, self._sample,
                       while_=lambda: not self.arrivals_done)
        self.start_failures()
        return arrivals

    def _arrivals(self):
        """Offer each request to the allocator at its arrival.

        Under ``capacity="wait"`` a request the cluster's total free resources cannot cover
        is first held (:meth:`_hold`); the arrival process pauses meanwhile, so every later
        arrival time shifts by the wait (the gaps between arrivals stay the workload's).
        """
        env = self.env
        wait = self._wait
        # a sample before every sample_every-th arrival, unless samples are periodic
        every = 0 if self.config.sample_interval else self.config.sample_every
        shift = 0.0  # total wait so far: how far later arrivals are pushed back
        for batch in self.source.batches(self.rng):
            demand, duration, bandwidth, attrs = unpack_batch(batch, self.topology.resources,
                                                              self.received)
            first_id = self.received
            placements: list[Placement | int | None] = []
            decisions: list[float] = []
            times = batch.arrival.tolist()
            waits = [0.0] * len(times) if wait else None
            if self._fused:  # the common case (_fused_arrivals), compiled where it can be
                loop = self._compiled
                if loop is not None and self.view.server_up is None and loop.ready():
                    yield from self._compiled_arrivals(times, demand, duration, bandwidth,
                                                       attrs, placements, decisions, every)
                else:
                    if loop is not None:
                        loop.owe(len(times))
                    yield from self._fused_arrivals(times, demand, duration, bandwidth,
                                                    attrs, placements, decisions, every)
            else:
                offer = self._offer(demand, duration, bandwidth, attrs, placements, decisions,
                                    waits, every)
                shift = yield from self.walk(times, offer, shift=shift)
            self._finish_batch(batch, first_id, np.asarray(times, dtype=np.float64), placements,
                               decisions, None if waits is None else np.asarray(waits))
            self.meter.spill_samples()
        self.arrivals_done = True
        if self._measured_received:  # the last request's per-request utilisation sample
            self.meter.decision_sample()
        self.meter.close_window(env.now)
        if self.power is not None:
            self.power.close(env.now)
        self.failures_window(env.now, open_=False)
        if self._failures is not None:
            self._failures.check_done()

    def _offer(self, demand: np.ndarray, duration: list[float], bandwidth: list[float],
               attrs: dict[str, list], placements: list, decisions: list,
               waits: list[float] | None, every: int):
        """``offer(i, t)`` for one batch, the general path: request i of the batch, at t,
        decided now, or a generator for the clock to run (a hold for capacity, a stepwise
        decision) that returns the time held."""
        def offer(i: int, t: float):
            if every and self.received % every == 0:
                self._sample()
            req = new_request(
                self.received, t, duration[i], demand[i], bandwidth[i],
                (MappingProxyType({k: v[i] for k, v in attrs.items()}) if attrs
                 else NO_ATTRS))
            if waits is not None:
                return self._held_arrival(req, i, placements, decisions, waits)
            r = self._arrive(req)
            if type(r) is not tuple:  # a stepwise allocator: run its decision here
                return self._stepwise(r, placements, decisions)
            placements.append(r[0])
            decisions.append(r[1])
            return None
        return offer

    def _held_arrival(self, req: Request, i: int, placements: list, decisions: list,
                      waits: list[float]):
        """``capacity: wait``: hold ``req`` until the cluster's total free resources cover
        it, then offer it; returns the time held."""
        held = yield from self._hold(req)
        waits[i] = held
        r = self._arrive(req)
        if type(r) is not tuple:
            r = yield from r
        placements.append(r[0])
        decisions.append(r[1])
        return held

    @staticmethod
    def _stepwise(steps, placements: list, decisions: list):
        p, dt = yield from steps
        placements.append(p)
        decisions.append(dt)
        return 0.0

    def _open_window(self, now: float) -> None:
        self.meter.open_window(now)
        if self.power is not None:
            self.power.open(now)
        self.failures_window(now, open_=True)

    def _observe(self, metrics: Observers) -> None:
        """Have ``metrics`` see every arrival, decision and departure: the general path's
        methods, wrapped on this engine only (the fused path, which has no such calls,
        is off for this run); a run without metrics never gets here."""
        arrive, settle, depart = self._arrive, self._settle, self._depart
        env = self.env
        on_arrival, on_decision, on_departure = (metrics.arrival, metrics.decision,
                                                 metrics.departure)

        def observed_arrive(req: Request):
            on_arrival(env.now, req)
            return arrive(req)

        def observed_settle(req: Request, choice: Any, now: float, measured: bool,
                            decision: float) -> tuple[Placement | None, float]:
            out = settle(req, choice, now, measured, decision)
            on_decision(now, req, out[0])
            return out

        def observed_depart(req: Request, placement: Placement, amount: list[float],
                            event: simpy.Event) -> None:
            depart(req, placement, amount, event)
            on_departure(env.now, req)

        self._arrive = observed_arrive  # type: ignore[method-assign]
        self._settle = observed_settle  # type: ignore[method-assign]
        self._depart = observed_depart  # type: ignore[method-assign]

    # ------------------------------------------------------------------ decisions
    def _arrive(self, req: Request):
        """Offer ``req`` to the allocator: (placement or None, decision seconds), or, for an
        allocator whose ``allocate()`` returns a generator, a generator the arrival process
        runs (``yield from``) to get that pair."""
        now = self.env.now
        measured = req.id >= self._warm_requests and req.arrival >= self._warm_time
        if measured and not self.meter.open:
            self._open_window(now)
        self.received += 1
        if measured:
            self.meter.decision_sample()
        self.view.now = now
        if self._defer:  # ask for a stepwise decision that marks its first step
            self._deciding = True
            self.view.step_boundaries = True
        t0 = time.perf_counter()
        choice = self.allocator.allocate(req, self.view)
        decision = time.perf_counter() - t0
        if type(choice) is GeneratorType:
            return self._arrive_steps(req, choice, now, measured, decision)
        return self._settle(req, choice, now, measured, decision)

    def _placement(self, s: int, req: Request) -> Placement:
        return Placement(self._server_ids[s], req.demand[None])

    def _arrive_steps(self, req: Request, steps, now: float, measured: bool, decision: float):
        """A stepwise allocator's decision: ``allocate()`` returned a generator that yields
        SimPy events (e.g. an agent's next action) and returns the choice. The arrival
        process waits on those events (simulated time must not pass: whoever triggers them
        does so at the same instant), passing what SimPy sends or throws (an interrupt) on
        to the generator; ``decision_s`` is the wall time until the choice.

        :data:`~dcsim.allocators.base.FIRST_STEP` is not for SimPy: the request's first
        server is taken, so the departures due now are released here
        (``departures: after_first_step``; nothing is due otherwise) and the generator
        resumes with ``None``."""
        t0 = time.perf_counter()
        send, throw = steps.send, steps.throw
        value: Any = None
        thrown: BaseException | None = None
        try:
            while True:
                if thrown is None:
                    out = send(value)
                else:
                    out, thrown = throw(thrown), None
                if out is FIRST_STEP:
                    self._release_due()
                    value = None
                    continue
                try:
                    value = yield out
                except GeneratorExit:
                    steps.close()
                    raise
                except BaseException as e:  # e.g. simpy.Interrupt: the generator's to handle
                    thrown = e
        except StopIteration as stop:
            choice = stop.value
        decision += time.perf_counter() - t0
        return self._settle(req, choice, now, measured, decision)

    def _settle(self, req: Request, choice: Any, now: float, measured: bool, decision: float
                ) -> tuple[Placement | None, float]:
        """Admit ``choice`` for ``req`` (arrived at ``now``) and count it."""
        placement, amount = self.admit(req, choice)
        if self._defer:  # whatever is still due (no first step was marked)
            self._deciding = False
            self.view.step_boundaries = False
            self._release_due()
        if placement is not None:
            hold = req.duration
            if self.power is not None:
                if self.power.delay and self.power.switches_on(placement):
                    hold += self.power.delay  # it runs once its server is on
                    self._switch_on_delays[req.id] = self.power.delay
                self.power.placed(now, placement)
            self.meter.accepted(req.id, now, now + hold, placement, amount)
            self.accepted += 1
            if measured:
                self._footprint_sum += placement.footprint
            if self._failures is None:
                self.depart_after(hold, partial(self.on_depart, req, placement, amount))
            else:  # released by what it holds at its end (a failure may have moved it)
                self._failures.hold(req, placement, amount, now + hold)
                self.depart_after(hold, partial(self._failures.departure, req.id))
        return placement, decision

    def admit(self, req: Request, choice: Any) -> tuple[Placement | None, list[float] | None]:
        """Validate an allocator's choice and reserve it (loss mode: None = drop).

        Returns the placement and its total per resource as Python floats.
        """
        if choice is None:
            return None, None
        if self._failures is not None:
            why = self._failures.refused(choice, req.demand)
            if why is not None:
                raise self._error(why)
        if type(choice) is int or isinstance(choice, np.integer):
            s = int(choice)
            if not 0 <= s < self._n_servers:
                raise self._error(
                    f"chose server {s}, outside 0..{self._n_servers - 1}"
                )
            amount = req.demand.tolist()
            if not self.state.take_one(s, amount):
                raise self._error(
                    f"chose server {s} for request {req.id}, which lacks "
                    f"free resources (free {self.state.free[s].tolist()}, "
                    f"demand {req.demand.tolist()})"
                )
            return Placement(self._server_ids[s], req.demand[None]), amount
        if isinstance(choice, Placement):
            total = choice.amounts.sum(axis=0) if choice.amounts.size else None
            if total is None or total.shape != req.demand.shape or not _close(
                total, req.demand
            ):
                raise self._error(
                    f"placed {None if total is None else total.tolist()} "
                    f"for request {req.id}, which demands {req.demand.tolist()}"
                )
            why = self.state.check(choice)
            if why is not None:
                raise self._error(f"returned an invalid placement: {why}")
            self.state.apply(choice, -1.0)
            return choice, total.tolist()
        raise self._error(
            f"returned {type(choice).__name__}; "
            "expected a server index, a Placement or None"
        )

    def _error(self, what: str) -> PluginError:
        return PluginError(f"allocator {self.allocator.label!r} {what}")

    def _depart_server(self, s: int, req: Request, amount: list[float],
                       _event: simpy.Event) -> None:
        """``_depart`` of a request the fused path (_fused_arrivals) put on server ``s``."""
        self._give_one(s, amount)
        self.meter.departed(req.id)
        self.released += 1
        if self.notifies_release:
            self.view.now = self.env.now
            self.allocator.released(req, self._placement(s, req), self.view)

    def _depart(self, req: Request, placement: Placement, amount: list[float],
                _event: simpy.Event) -> None:
        # one callback per accepted request, so each is released exactly once; the state
        # clamps to capacity against float round-off
        if placement.servers.shape[0] == 1 and not placement.links.shape[0]:
            self.state.give_one(int(placement.servers[0]), amount)
        else:
            self.state.apply(placement, 1.0)
        self.meter.departed(req.id)
        if self.power is not None:
            self.power.released(self.env.now, placement)
        self.released += 1
        if self.notifies_release:
            self.view.now = self.env.now
            self.allocator.released(req, placement, self.view)
        if self._failures is not None:
            self._failures.released(placement)

    # ------------------------------------------------------------------ records
    def _finish_batch(
        self,
        batch: RequestBatch,
        first_id: int,
        arrival: np.ndarray,
        placements: list[Placement | None],
        decisions: list[float],
        waits: np.ndarray | None,
    ) -> None:
        """Count the batch's measured requests, their acceptances and decision time; keep
        their accepted flags (for acceptance_last20); write the batch's rows."""
        n = len(placements)
        ids = np.arange(first_id, first_id + n, dtype=np.int64)
        accepted = np.fromiter(map(is_not, placements, repeat(None, n)), dtype=bool, count=n)
        measured = (ids >= self.config.warmup_requests) & (arrival >= self.config.warmup_time)
        kept = accepted[measured]
        self._measured_log.extend(kept)
        self._measured_received += int(kept.size)
        self._measured_accepted += int(np.count_nonzero(kept))
        self._decision_sum += sum(compress(decisions, measured.tolist()))
        delays = None
        if self._switch_on_delays:
            pop = self._switch_on_delays.pop
            delays = np.fromiter((pop(i, 0.0) for i in ids.tolist()), dtype=np.float64,
                                 count=n)
        if self.sink is not None:
            self.sink("requests", request_columns(self.topology, batch, ids, arrival, accepted,
                                                  measured, placements, decisions, waits,
                                                  delays))

    def _sample(self, active: int | None = None) -> None:
        """One row of the time series, now; ``active``: the requests held, when the meter's
        ``active`` is not up to date (the compiled loop's samples)."""
        row = {
            "time": float(self.env.now),
            "received": self.received,
            "accepted": self.accepted,
            **(self.meter.instant(self.state) if self._failures is None
               else self._failures.instant()),
        }
        if active is not None:
            row["active"] = float(active)
        if self.power is not None:
            row.update(self.power.instant())
        if self.metrics is not None:
            row.update(self.metrics.sample(row["time"]))
        self._samples.append_row(row)
        if self._samples.rows >= self.config.flush_rows:
            self._flush()

    def _flush(self, final: bool = False) -> None:
        if self._samples.rows and self.sink is not None:
            self.sink("timeseries", self._samples.columns)
        self._samples.clear()
        if final and self._failures is not None and self.sink is not None:
            rows = self._failures.process.columns()
            if rows["time"]:
                self.sink("component_failures", rows)

    # ------------------------------------------------------------------ summary
    def summary(self) -> dict[str, Any]:
        rec, acc = self._measured_received, self._measured_accepted
        out: dict[str, Any] = {
            "received": rec,
            "accepted": acc,
            "acceptance_ratio": acc / rec if rec else math.nan,
            "acceptance_last20": self._measured_log.last20(),
        }
        out.update(self.meter.averages())
        if self.topology.n_links:
            out["mean_footprint"] = self._footprint_sum / acc if acc else math.nan
        out["mean_decision_s"] = self._decision_sum / rec if rec else math.nan
        out["sim_time"] = float(self.env.now)
        if self._failures is not None:
            out.update(self._failures.process.summary("lost_request_time"))
        if self.power is not None:
            out.update(self.power.summary(float(self.env.now)))
        if self.metrics is not None:
            out.update(self.metrics.summary())
        return out

    # ------------------------------------------- capacity: wait and departures: after_first_step

    def _hold(self, req: Request):
        """Until the cluster's total free resources cover ``req``'s demand, wait for
        departures (``capacity="wait"``); return the time held. A request larger than the
        whole cluster could never fit: it is not held."""
        free = self.state.free
        capacity = self.meter.capacity
        tol = self._hold_tol
        d = req.demand
        if not ((free.sum(axis=0) + tol < d).any() and (d <= capacity + tol).all()):
            return 0.0
        cfg = self.config
        # the window opens at the arrival, before the wait, as in loss mode
        if (not self.meter.open and req.id >= cfg.warmup_requests
                and req.arrival >= cfg.warmup_time):
            self._open_window(self.env.now)
        since = self.env.now
        while (free.sum(axis=0) + tol < d).any():
            self._departure = self.env.event()
            yield self._departure
        if self._defer:  # the authors' clock ticks once more before the request is placed
            yield self.env.timeout(1.0)
        return self.env.now - since

    def _depart_and_notify(self, req: Request, placement: Placement, amount: list[float],
                           event: simpy.Event) -> None:
        """``_depart``, then wake a request held for capacity (``capacity="wait"``).

        The held request resumes after every other departure at this instant: their
        timeouts were scheduled before this wake-up event.
        """
        self._depart(req, placement, amount, event)
        self.wake_held()

    def wake_held(self) -> None:
        """Wake the request held for capacity, if any (it re-checks the totals)."""
        waiting = self._departure
        if waiting is not None:
            self._departure = None
            waiting.succeed()

    def _defer_departure(self, req: Request, placement: Placement, amount: list[float],
                         _event: simpy.Event) -> None:
        """``departures: after_first_step``: hold the release until the request decided at
        this instant has taken its first server; a zero-delay event releases them when no
        decision is under way (it fires after the arrival due now, scheduled earlier)."""
        if not self.due:
            self.env.timeout(0).callbacks.append(self._release_due_event)
        self.due.append((req, placement, amount))

    def _release_due_event(self, _event: simpy.Event) -> None:
        if not self._deciding:
            self._release_due()

    def _release_due(self) -> None:
        """Release the deferred departures (each once), then wake a held request."""
        if not self.due:
            return
        due, self.due = self.due, []
        for req, placement, amount in due:
            self._depart(req, placement, amount, None)
        self.wake_held()

    # ------------------------------------------------------------------ the fused arrivals

    def _depart_event(self, event: _ServerDeparture) -> None:
        """A departure SimPy runs (the fused arrivals run theirs in place, the same way)."""
        self._depart_server(event.server, event.request, event.amount, event)

    def _fused_arrivals(self, times: list[float], demand: np.ndarray, duration: list[float],
                        bandwidth: list[float], attrs: dict[str, list], placements: list,
                        decisions: list[float], every: int):
        """The arrival process over one batch (its columns as :func:`unpack_batch` gives
        them), for ``yield from``: request ``i`` arrives at ``times[i]``."""
        amounts = demand.tolist()  # each request's demand as floats, once per batch
        env = self.env
        set_now = env.set_now
        queue, eids = self.event_queue()
        view = self.view
        meter = self.meter
        allocator = self.allocator
        allocate = allocator.allocate
        take_one, depart = self._take_one, self._depart_server
        n_servers = self._n_servers
        held, decision_sample = meter.held, meter.decision_sample
        warm_requests, warm_time = self._warm_requests, self._warm_time
        clock = time.perf_counter
        add_placement = placements.append
        add_decision = decisions.append
        callbacks = self._departure_callbacks  # shared: SimPy only reads an event's list
        new = object.__new__
        Departure = _ServerDeparture
        for i, t in enumerate(times):
            now = env.now
            if t > now:
                # the Timeout(t - now) the arrival process would wait on: its time and id
                now += t - now
                key = (now, NORMAL, next(eids))
                while queue:  # the events due before it
                    entry = queue[0]
                    if not entry < key:
                        set_now(now)
                        break
                    ev = entry[3]
                    if type(ev) is not Departure:  # something else: SimPy runs them all
                        yield self.wake_at(key)
                        break
                    heappop(queue)  # what Environment.step does for it, in place
                    set_now(entry[0])
                    ev.callbacks = None
                    depart(ev.server, ev.request, ev.amount, ev)
                else:
                    set_now(now)
            rid = self.received
            if every and rid % every == 0:
                self._sample()
            req = new_request(rid, t, duration[i], demand[i], bandwidth[i],
                              MappingProxyType({k: v[i] for k, v in attrs.items()}) if attrs
                              else NO_ATTRS)
            measured = rid >= warm_requests and t >= warm_time
            if measured:
                if not meter.open:
                    self._open_window(now)
                decision_sample()
            self.received = rid + 1
            view.now = now
            t0 = clock()
            choice = allocate(req, view)
            decision = clock() - t0
            if type(choice) is int and 0 <= choice < n_servers:
                amount = amounts[i]
                if take_one(choice, amount):
                    dur = duration[i]
                    held(rid, now, now + dur, amount)
                    self.accepted += 1
                    ev = new(Departure)
                    ev.callbacks = callbacks
                    ev.server = choice
                    ev.request = req
                    ev.amount = amount
                    heappush(queue, (now + dur, NORMAL, next(eids), ev))  # as env.schedule
                    add_placement(choice)  # the records read an index as its placement
                    add_decision(decision)
                    continue
            if type(choice) is GeneratorType:
                yield from self._stepwise(self._arrive_steps(req, choice, now, measured,
                                                             decision), placements, decisions)
                continue
            placement, decision = self._settle(req, choice, now, measured, decision)
            add_placement(placement)
            add_decision(decision)

    def _compiled_arrivals(self, times: list[float], demand: np.ndarray,
                           duration: list[float], bandwidth: list[float],
                           attrs: dict[str, list], placements: list, decisions: list[float],
                           every: int):
        """:meth:`_fused_arrivals` over one batch, run by the compiled loop
        (:mod:`dcsim.modes.loss.compiled_loop`): the first measured request (the window
        opens) by the fused loop, a per-request sample where the kernel stops for it, a
        refused choice by the general path's check, and the rest of the batch by the fused
        loop when SimPy holds another event."""
        loop = self._compiled
        n = len(times)
        first = self.received
        t_arr = np.asarray(times, dtype=np.float64)
        d_arr = np.asarray(duration, dtype=np.float64)

        def request(i: int) -> Request:
            return new_request(first + i, times[i], duration[i], demand[i], bandwidth[i],
                               MappingProxyType({k: v[i] for k, v in attrs.items()}) if attrs
                               else NO_ATTRS)

        def fused(lo: int, hi: int):
            return self._fused_arrivals(times[lo:hi], demand[lo:hi], duration[lo:hi],
                                        bandwidth[lo:hi], {k: v[lo:hi] for k, v in attrs.items()},
                                        placements, decisions, every)

        def sample(i: int, accepted: int, active: int) -> None:
            self.received, self.accepted = first + i, accepted_before + accepted
            self._sample(active)

        i = 0
        while i < n:
            accepted_before = self.accepted
            out = loop.run(env=self.env, state=self.state, meter=self.meter, times=t_arr,
                           duration=d_arr, demand=demand, i0=i, rid0=first,
                           warm_requests=self._warm_requests, warm_time=self._warm_time,
                           every=every,
                           departure=_ServerDeparture, callbacks=self._departure_callbacks,
                           request=request, sample=sample)
            if out is None:  # SimPy holds another event: the fused loop for the rest
                yield from fused(i, n)
                return
            why, stop, choice, accepted, released, seconds = out
            handled = stop - i
            self.received = first + stop
            self.accepted = accepted_before + accepted
            self.released += released
            if handled:
                placements.extend([c if c >= 0 else None for c in choice[i:stop].tolist()])
                decisions.extend([seconds / handled] * handled)
            if why == HAND_OVER:
                yield from fused(stop, stop + 1)
            elif why == REFUSED:  # the general path's check says why (it raises)
                self.received += 1
                measured = first + stop >= self._warm_requests and times[stop] >= self._warm_time
                placement, decision = self._settle(request(stop), int(choice[stop]),
                                                   self.env.now, measured, 0.0)
                placements.append(placement)
                decisions.append(decision)
            i = stop + 1 if why != DONE else stop
