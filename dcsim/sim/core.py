"""The SimPy core both simulation engines are built on (:class:`SimCore`), time averages of
piecewise-constant quantities, and the component-failure process.

The loss engine (:mod:`dcsim.modes.loss.engine`) and the VM online engine
(:mod:`dcsim.modes.vm_online.engine`) are :class:`SimCore` subclasses: the core owns the SimPy
environment, runs it with the garbage collector kept out of the way, schedules departures
(a plain ``Timeout`` with a callback; or an :class:`InlineEvent`, which a loop of the
engine's own may run in place, in SimPy's order: :meth:`SimCore.event_queue`,
:meth:`SimCore.wake_at`), periodic processes and the failure process, and
opens and closes the failure metrics' window; each engine adds its domain state (a
topology's free resources; a host × NUMA mapping) and its arrival process. A *failure
target* adapts that state to the failure process (:class:`FailureTarget`): it takes a
component down, deals with what ran on it and brings it back. :class:`FailureProcess` walks
a :class:`~dcsim.sim.failures.FailureSchedule`, calls the target at each failure and repair,
writes the ``component_failures`` table and keeps the failure metrics and the time-averaged
available capacity over the engine's measured window.

Event order: a failure or repair at time ``t`` is one SimPy timeout, scheduled when the
previous one was handled; among the events of one instant SimPy keeps scheduling order, so
the same seed gives the same order, whatever else runs.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from heapq import heappop, heappush
from typing import Any, Protocol

import numpy as np
import simpy

from dcsim.sim.failures import FailureSchedule

#: generation-0 threshold while an engine runs (Python's default is 700)
GC_GEN0 = 50_000


@contextmanager
def quiet_gc() -> Iterator[None]:
    """Run a simulation with less garbage-collector work: the objects alive before it
    (dcsim, numpy, pandas, the topology: ~10^5 of them) are frozen out of every collection
    (``gc.freeze``) and generation 0 is collected every 50,000 allocations instead of 700.
    A run allocates few reference cycles, so this changes when memory is reclaimed, never a
    result. Both are restored afterwards (issue #19: 2.5-8 us per request went to full
    collections scanning the frozen objects)."""
    thresholds = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(GC_GEN0, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


class InlineEvent:
    """An event whose callbacks change only the engine's own state (a departure), built
    without SimPy's ``Event`` constructor: what ``Environment.step`` reads of a plain
    ``Timeout`` — its callbacks, and that it succeeded (``_ok``, ``_value``). Scheduled with
    ``env.schedule(event, NORMAL, delay)``, exactly as a ``Timeout`` schedules itself, it
    keeps its place among the events of an instant; a loop of the engine's own may then run
    it in place of ``Environment.step`` (pop it, set the time, call its callbacks), in
    that same place (:meth:`SimCore.simulate`, the fused arrivals of
    :mod:`dcsim.modes.loss.engine`). Nothing outside the engine holds one, so nothing waits
    on it."""

    __slots__ = ("callbacks",)
    _ok = True
    _value = None


class Clock(simpy.Environment):
    """SimPy's environment, with what the engines' own loops need of it as named parts of
    the class that owns them: its event queue (a heap of ``(time, priority, id, event)``),
    the counter its events' ids come from, and moving the time to an event run in place
    (what ``Environment.step`` does before it calls an event's callbacks). Everything else
    is SimPy's, unchanged."""

    @property
    def queue(self) -> list:
        """The event queue itself (heap order; a loop may pop from it and push to it)."""
        return self._queue

    @property
    def ids(self) -> Any:
        """The counter of event ids: the next one is the id an event scheduled now gets."""
        return self._eid

    def set_ids(self, ids: Any) -> None:
        """Replace the id counter (an iterator of ints): a compiled loop that drew ids up to
        some ``n - 1`` itself continues SimPy's with ``itertools.count(n)``."""
        self._eid = ids

    def set_now(self, t: float) -> None:
        """Move the clock to ``t``: the time of the event a loop pops to run in place."""
        self._now = t

    def ready_at(self, key: tuple[float, int, int]) -> simpy.Event:
        """An event already succeeded, in the queue at ``key`` = ``(time, NORMAL, id)``:
        what a ``Timeout`` scheduled with that id would be."""
        event = simpy.Event(self)
        event._ok = True
        event._value = None
        heappush(self._queue, (*key, event))
        return event


class SimCore:
    """A SimPy environment and what every engine does with it (see the module docstring).

    ``_failures`` is the engine's failure adapter (it has a ``process``:
    :class:`FailureProcess`), or None."""

    def __init__(self) -> None:
        self.env = Clock()
        self._failures: Any = None

    def simulate(self, until: simpy.Event | None = None) -> None:
        """Run the environment until ``until`` fires (None: until no event is left), with
        the garbage collector kept out of the way (:func:`quiet_gc`).

        Without ``until`` it is ``env.run()`` with each :class:`InlineEvent` run in place
        (what ``Environment.step`` does for it, without the call): the same events in the
        same order."""
        with quiet_gc():
            if until is not None:
                self.env.run(until=until)
                return
            env = self.env
            queue = env.queue
            step, set_now = env.step, env.set_now
            while queue:
                event = queue[0][3]
                if isinstance(event, InlineEvent):
                    set_now(heappop(queue)[0])
                    callbacks, event.callbacks = event.callbacks, None
                    for callback in callbacks:
                        callback(event)
                else:
                    step()

    def event_queue(self) -> tuple[list, Any]:
        """SimPy's event queue (a heap of ``(time, priority, id, event)``) and its id
        counter, for a loop that runs :class:`InlineEvent` in place: the next id is the one
        an event scheduled now would get."""
        return self.env.queue, self.env.ids

    def wake_at(self, key: tuple[float, int, int]) -> simpy.Event:
        """A stand-in for the ``Timeout`` a process would have yielded when it drew the
        id in ``key`` = ``(time, NORMAL, id)``: an event that succeeds at ``time`` in that
        place, for the process to yield (what ``Timeout`` does, with the id drawn
        earlier)."""
        return self.env.ready_at(key)

    def depart_after(self, delay: float, callback: Callable[[simpy.Event], None]) -> None:
        """Call ``callback`` ``delay`` from now: a plain ``Timeout``, so among the events of
        one instant it runs in the order it was scheduled."""
        self.env.timeout(delay).callbacks.append(callback)

    def every(self, period: float, action: Callable[[], None],
              while_: Callable[[], bool]) -> simpy.Process:
        """A periodic process: ``action()`` now, then every ``period``, as long as
        ``while_()`` holds when it wakes."""
        def run():
            while while_():
                action()
                yield self.env.timeout(period)
        return self.env.process(run())

    def walk(self, times: list[float], arrive: Callable[[int, float], Any], *,
             periodic: Sequence[tuple[float, Callable[[float], None]]] = (),
             end: float = math.inf, shift: float = 0.0, tick: Callable[[float], None] | None
             = None):
        """The arrival process's clock, for ``yield from`` in an engine's arrival process:
        waits until each arrival ``times[i]`` and calls ``arrive(i, t)``; returns the
        total ``shift``.

        ``arrive`` returns None, or a generator the clock runs (``yield from``) before the
        next arrival: a request held for capacity or a stepwise decision; the time it
        returns (held) shifts every later arrival, and ``times[i]`` is rewritten with the
        shifted time. ``periodic`` are ``(period, action)`` pairs: ``action(t)`` at
        ``period``, 2·``period``, … merged with the arrivals; at one instant the periodic
        actions come first, in the order given, then the arrival (events scheduled before,
        like departures, before all of them). The clock stops before an event later than
        ``end``; ``tick(t)`` (optional) runs before each event.
        """
        env = self.env
        if not periodic:  # the loss engine's hot path: arrivals only
            for i, t in enumerate(times):
                if shift:
                    t = times[i] = t + shift
                if t > end:
                    break
                if t > env.now:
                    yield env.timeout(t - env.now)
                if tick is not None:
                    tick(t)
                held = arrive(i, t)
                if held is not None:
                    held = yield from held
                    if held:
                        shift += held
            return shift
        n = len(times)
        ks = [1] * len(periodic)
        i = 0
        while True:
            due = [k * p if p else math.inf for k, (p, _a) in zip(ks, periodic, strict=True)]
            t_arr = times[i] + shift if i < n else math.inf
            t = min(min(due), t_arr)
            if t > end or t == math.inf:
                return shift
            if t > env.now:
                yield env.timeout(t - env.now)
            if tick is not None:
                tick(env.now)
            j = next((j for j, d in enumerate(due) if d == t), None)
            if j is not None:
                periodic[j][1](t)
                ks[j] += 1
                continue
            if shift:
                times[i] = t
            held = arrive(i, t)
            if held is not None:
                held = yield from held
                if held:
                    shift += held
            i += 1

    def start_failures(self) -> None:
        if self._failures is not None:
            self._failures.process.start()

    def failures_window(self, now: float, open_: bool) -> None:
        """Open or close the failure metrics' window with the engine's measured one."""
        if self._failures is not None:
            if open_:
                self._failures.process.open(now)
            else:
                self._failures.process.close(now)


class TimeAverage:
    """The integral of a piecewise-constant vector over a window, and its mean.

    :meth:`advance` adds ``value × (t − last)`` (the value held since the last call) while
    the window is open; :meth:`open` and :meth:`close` bound the window.
    """

    def __init__(self, n: int, open_at: float | None = None):
        self.area = np.zeros(n)
        self.last = 0.0
        self.start = math.nan
        self.end = math.nan
        self.running = False
        if open_at is not None:
            self.open(open_at)

    def open(self, t: float) -> None:
        self.start = self.last = float(t)
        self.running = True

    def advance(self, t: float, value: Sequence[float] | np.ndarray) -> None:
        """The quantity was ``value`` from the last call until ``t``."""
        if self.running and t > self.last:
            self.area += np.asarray(value) * (t - self.last)
            self.last = t

    def close(self, t: float, value: Sequence[float] | np.ndarray) -> None:
        self.advance(t, value)
        if self.running:
            self.end = float(t)
        self.running = False

    def mean(self, fallback: Sequence[float] | np.ndarray | None = None) -> np.ndarray:
        """The time average over the window; ``fallback`` (or NaN) for an empty window."""
        span = self.end - self.start
        if span > 0:
            return self.area / span
        return (np.asarray(fallback, dtype=np.float64) if fallback is not None
                else np.full(self.area.shape, math.nan))


@dataclass
class Outcome:
    """What one failure did to the work on the component."""

    interrupted: int = 0   # requests (VMs) that were on it
    reallocated: int = 0   # of them, placed again
    lost_time: float = 0.0  # remaining holding time of those not placed again


class FailureTarget(Protocol):
    """An engine's domain state as the failure process sees it."""

    def fail(self, kind: str, component: int) -> Outcome:
        """Take ``component`` down: deal with what runs on it; it offers nothing until
        :meth:`repair`."""

    def repair(self, kind: str, component: int) -> None:
        """Bring ``component`` back with its whole capacity."""

    def availability(self) -> list[float]:
        """The available share of each measured capacity (in :attr:`avail_columns` order)."""

    def measuring(self) -> bool:
        """Whether the engine's measured window is open."""


#: the failures table's own columns (before the target's availability columns)
FAILURE_COLUMNS = ("time", "event", "kind", "component", "interrupted", "reallocated",
                   "lost_time", "measured")


class FailureProcess:
    """Failures and repairs from ``schedule`` applied to ``target`` (a SimPy process).

    A component that fails while already down (overlapping replayed failures) stays down
    until each of its failures is repaired; only its first failure and its last repair
    reach the target and the table.
    """

    def __init__(self, env: simpy.Environment, schedule: FailureSchedule,
                 target: FailureTarget, avail_columns: Sequence[str]):
        self.env = env
        self.schedule = schedule
        self.target = target
        self.avail_columns = list(avail_columns)
        self._down: dict[tuple[str, int], int] = {}
        self.rows: dict[str, list] = {c: [] for c in (*FAILURE_COLUMNS, *self.avail_columns)}
        self.avail = TimeAverage(len(self.avail_columns))
        self.failures = self.interrupted = self.reallocated = 0
        self.lost_time = 0.0
        self.stopped = False

    def start(self) -> simpy.Process:
        return self.env.process(self._run())

    def _run(self):
        env, schedule = self.env, self.schedule
        while not self.stopped:
            t = schedule.peek()
            if t == math.inf:
                return
            if t > env.now:
                yield env.timeout(t - env.now)
                if self.stopped:
                    return
            _t, kind, comp, event = schedule.pop()
            key = (kind, comp)
            n = self._down.get(key, 0)
            if event == "fail":
                self._down[key] = n + 1
                if n == 0:
                    self._apply(kind, comp, event)
            else:
                self._down[key] = n - 1
                if n == 1:
                    del self._down[key]
                    self._apply(kind, comp, event)

    def _apply(self, kind: str, comp: int, event: str) -> None:
        now = self.env.now
        self.avail.advance(now, self.target.availability())
        if event == "fail":
            out = self.target.fail(kind, comp)
        else:
            self.target.repair(kind, comp)
            out = Outcome()
        measured = self.target.measuring()
        if measured:
            self.failures += event == "fail"
            self.interrupted += out.interrupted
            self.reallocated += out.reallocated
            self.lost_time += out.lost_time
        r = self.rows
        for k, v in (("time", float(now)), ("event", event), ("kind", kind),
                     ("component", comp), ("interrupted", out.interrupted),
                     ("reallocated", out.reallocated), ("lost_time", float(out.lost_time)),
                     ("measured", measured)):
            r[k].append(v)
        for k, v in zip(self.avail_columns, self.target.availability(), strict=True):
            r[k].append(float(v))

    # -- the engine's window and its end -------------------------------------------------
    def open(self, t: float) -> None:
        self.avail.open(t)

    def close(self, t: float) -> None:
        self.avail.close(t, self.target.availability())

    def columns(self) -> dict[str, list]:
        return self.rows

    def summary(self, lost_name: str) -> dict[str, Any]:
        """The failure metrics of the measured window."""
        out: dict[str, Any] = {"n_failures": self.failures, "interrupted": self.interrupted,
                               "reallocated": self.reallocated, lost_name: self.lost_time}
        means = self.avail.mean(fallback=self.target.availability())
        out.update(zip(self.avail_columns, (float(x) for x in means), strict=True))
        return out
