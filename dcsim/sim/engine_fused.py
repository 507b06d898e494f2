"""The loss engine's common case as one loop: each request offered, decided, reserved and
its departure scheduled, and the departures due before each arrival run in place, with
everything the loop reads bound once per workload batch.

It applies when nothing else needs to see an arrival (no ``capacity: wait``, no deferred
departures, no component failures): :meth:`FusedArrivals._fused_arrivals` is then the
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
request at 1,000 servers). A mixin of :class:`~dcsim.sim.engine.Engine`.
"""

from __future__ import annotations

import time
from heapq import heappop, heappush
from types import GeneratorType, MappingProxyType
from typing import Any

import numpy as np
from simpy.events import NORMAL

from dcsim.model.request import new_request
from dcsim.sim.core import InlineEvent

NO_ATTRS: MappingProxyType[str, Any] = MappingProxyType({})  # a request without attrs


class _ServerDeparture(InlineEvent):
    """The departure of a request the fused path put on one server: run in place by the
    fused arrivals, or by SimPy (``callbacks``: the engine's ``_depart_event``)."""

    __slots__ = ("server", "request", "amount")


class FusedArrivals:
    """``_fused_arrivals``; the engine's state it reads (``env``, ``meter``, ``view``,
    ``allocator``, ``_take_one``, ``_depart_server``, ``_n_servers``, the warm-up bounds and
    counters) is the engine's."""

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
        callbacks = [self._depart_event]  # shared: SimPy only reads an event's list
        new = object.__new__
        Departure = _ServerDeparture
        for i, t in enumerate(times):
            now = env._now
            if t > now:
                # the Timeout(t - now) the arrival process would wait on: its time and id
                now += t - now
                key = (now, NORMAL, next(eids))
                while queue:  # the events due before it
                    entry = queue[0]
                    if not entry < key:
                        env._now = now
                        break
                    ev = entry[3]
                    if type(ev) is not Departure:  # something else: SimPy runs them all
                        yield self.wake_at(key)
                        break
                    heappop(queue)  # what Environment.step does for it, in place
                    env._now = entry[0]
                    ev.callbacks = None
                    depart(ev.server, ev.request, ev.amount, ev)
                else:
                    env._now = now
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
