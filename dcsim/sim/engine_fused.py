"""The loss engine's common case in one function: a request offered, decided, reserved and
its departure scheduled, with everything the path reads bound once per workload batch.

It applies when nothing else needs to see an arrival (no ``capacity: wait``, no deferred
departures, no component failures): :meth:`FusedArrivals._fused_offer` builds the
``offer(i, t)`` the arrival clock (:meth:`~dcsim.sim.core.SimCore.walk`) calls for request
``i`` of a batch. An allocator returning a server index that fits is handled in place (the
state's unrolled ``take_one``, the meter's ``held``, a departure event); any other choice —
a :class:`~dcsim.model.Placement`, ``None``, a bad index, a stepwise generator — goes to
the engine's general path (``_settle``, ``_arrive_steps``), so each is checked and recorded
exactly as there. The results are those of the general path; it exists because the engine
runs it once per request (issue #19: the engine at 0.6 of bare SimPy at 1,000 servers).
A mixin of :class:`~dcsim.sim.engine.Engine`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from types import GeneratorType, MappingProxyType
from typing import Any

import numpy as np
from simpy.events import NORMAL

from dcsim.model.request import new_request

NO_ATTRS: MappingProxyType[str, Any] = MappingProxyType({})  # a request without attrs


class _Departure:
    """What SimPy's ``Environment.step`` reads of a plain ``Timeout`` (its callbacks and
    that it succeeded), without the ``Timeout`` constructor's checks: scheduled with
    ``env.schedule(event, NORMAL, delay)``, exactly as ``Timeout`` schedules itself, so
    departures keep their place among the events of an instant."""

    __slots__ = ("callbacks", "_ok", "_value")

    def __init__(self, callback: Callable[[Any], None]):
        self.callbacks = [callback]
        self._ok = True
        self._value = None


class FusedArrivals:
    """``_fused_offer``; the engine's state it reads (``env``, ``meter``, ``view``,
    ``allocator``, ``_take_one``, ``_n_servers``, the warm-up bounds and counters) is the
    engine's."""

    def _fused_offer(self, demand: np.ndarray, duration: list[float], bandwidth: list[float],
                     attrs: dict[str, list], placements: list, decisions: list[float],
                     every: int) -> Callable[[int, float], Any]:
        """``offer(i, t)`` for one batch (its columns as :func:`unpack_batch` gives them):
        request ``i`` arrives at ``t``; returns None, or the generator of a stepwise
        decision for the clock to run."""
        amounts = demand.tolist()  # each request's demand as floats, once per batch
        env = self.env
        view = self.view
        meter = self.meter
        allocate = self.allocator.allocate
        take_one = self._take_one
        n_servers = self._n_servers
        held = meter.held
        decision_sample = meter.decision_sample
        warm_requests, warm_time = self._warm_requests, self._warm_time
        depart = self._depart_server
        schedule = env.schedule
        clock = time.perf_counter
        add_placement = placements.append
        add_decision = decisions.append

        def offer(i: int, t: float) -> Any:
            rid = self.received
            if every and rid % every == 0:
                self._sample()
            req = new_request(rid, t, duration[i], demand[i], bandwidth[i],
                              MappingProxyType({k: v[i] for k, v in attrs.items()}) if attrs
                              else NO_ATTRS)
            now = env.now
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
                    schedule(_Departure(partial(depart, choice, req, amount)), NORMAL, dur)
                    add_placement(choice)  # the records read an index as its placement
                    add_decision(decision)
                    return None
            if type(choice) is GeneratorType:
                return self._stepwise(self._arrive_steps(req, choice, now, measured, decision),
                                      placements, decisions)
            placement, decision = self._settle(req, choice, now, measured, decision)
            add_placement(placement)
            add_decision(decision)
            return None

        return offer
