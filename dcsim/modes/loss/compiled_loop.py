"""The loss engine's fused loop compiled: a workload batch's arrivals, departures and
``first_fit`` decisions in one numba kernel (:mod:`dcsim.modes.loss.compiled_kernel`),
handing back to Python only for the batch's records.

When: the engine's fused path (:meth:`~dcsim.modes.loss.engine.Engine._fused_arrivals`)
applies (no metric plugins, no failures, no ``capacity: wait``, no deferred departures, no
switch-on delay), the allocator is the built-in ``first_fit`` itself (not a subclass) on
two resources with capacity, no power meter, the allocator is not told of releases, no
and at the kernel's start SimPy's event queue holds
nothing but the fused path's departures (no periodic samples, nothing a plugin scheduled).
Otherwise the batch runs the fused loop, unchanged.

How (:meth:`CompiledLoop.run`): the queue's departures are moved into the kernel's heap
with their SimPy keys ``(time, NORMAL, id)``; the kernel draws event ids from SimPy's
counter exactly as the fused loop does (one per arrival that waits, one per departure it
schedules), runs the departures due before each arrival in that order, decides, reserves
and schedules; the departures still pending go back on SimPy's queue as the fused path's
departure events with their keys, and the counter continues after the last id drawn. So
every event happens at the same time in the same order, and the rows, summaries and final
state are those of the fused loop and the general path (``tests/modes/loss/
test_fused_loop.py`` compares them). Watchers of the state's changes
(:meth:`~dcsim.model.ClusterState.server_changes`) are told of the servers the kernel
touched (``touch``) when it hands back. The first measured request (where the measured
window opens) is run by the fused loop (the kernel hands over before it and resumes after
it); a per-request sample (``sample_every``) is taken by the engine where the kernel
stops for it, between the request's departures and its decision, with the counts of that
moment; a choice
the state refuses by the general path's check, as before.

A request's ``decision_s`` under the kernel is the kernel's wall time over the requests
it handled (a decision is not timed on its own there).

Cost: loading the kernel costs ~1-2 s from numba's cache, numba's import included
(several seconds to compile the first time). With ``DCSIM_KERNELS=auto`` it is loaded
only once the fused loop has cost the process :data:`LOAD_AFTER_S` more than the kernel
would have, estimated at :data:`SAVING_PER_REQUEST_S` a request the kernel could have run,
so small runs (the quickstart, the tests) never load it; ``numba`` loads it at once,
``numpy`` never.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from simpy.events import NORMAL

from dcsim.kernels import kernel_choice
from dcsim.model.state import EPS

#: why :meth:`CompiledLoop.run` stopped (:mod:`dcsim.modes.loss.compiled_kernel`'s values)
DONE, HAND_OVER, REFUSED, SAMPLE = 0, 1, 2, 3

#: estimated seconds the kernel saves per request against the fused loop with first_fit:
#: on the M/M/c/c stream of benchmarks/bench_engine.py (100 servers) the fused loop cost
#: ~10-12 us a request and the compiled one ~1.4-1.6 us, all records included
SAVING_PER_REQUEST_S = 8e-6
#: the kernel is loaded once the fused loop has cost the process this much more than it
#: would have (process-wide, like first_fit's scan: the loading is paid once a process):
#: importing numba and loading the kernel from the cache took 1.1-2.0 s on this project's
#: 2-core machine (load average 2.6), so the kernel comes after ~190,000 requests
LOAD_AFTER_S = 1.5
#: the seconds owed so far (a list's item: written per batch)
OWED = [0.0]


def load_kernel() -> Any:
    """The compiled kernel module, loaded (compiled, or read from the cache) now."""
    from dcsim.modes.loss import compiled_kernel as k

    z = np.zeros(1)
    i = np.zeros(1, dtype=np.int64)
    k.heapify(z, i, i, 0)
    k.run_batch(z[:0], z, z, z, 0, 0, 0, 0.0, True, 0, False, z, z, z, z, 0.0, 0.0, 1.0, 1.0,
                z, i, i, 0, i, z, z, 0, np.zeros(5), 0.0, 0, i, z, z, z)
    return k


class CompiledLoop:
    """The compiled loop of one engine: whether it is loaded, and running it on a batch."""

    def __init__(self, capacity: np.ndarray):
        self._k: Any = None
        self._cap = (capacity[:, 0].copy(), capacity[:, 1].copy())
        self._total = tuple(float(x) for x in capacity.sum(axis=0).tolist())
        self._tol = EPS * max(float(capacity.max(initial=1.0)), 1.0)  # ClusterState's

    def ready(self) -> bool:
        """Whether the kernel is to run now (loading it if it now pays)."""
        if self._k is None and (kernel_choice() == "numba" or OWED[0] >= LOAD_AFTER_S):
            self._k = load_kernel()
        return self._k is not None

    @staticmethod
    def owe(n_requests: int) -> None:
        """The fused loop ran ``n_requests`` the kernel could have run."""
        OWED[0] += n_requests * SAVING_PER_REQUEST_S

    def run(self, *, env: Any, state: Any, meter: Any, times: np.ndarray,
            duration: np.ndarray, demand: np.ndarray, i0: int, rid0: int,
            warm_requests: int, warm_time: float, every: int, departure: type, callbacks: list,
            request: Callable[[int], Any], sample: Callable[[int, int, int], None]
            ) -> tuple[int, int, np.ndarray, int, int, float] | None:
        """Requests ``i0..`` of a batch through the kernel; None if SimPy's queue holds an
        event that is not a departure of the fused path (then the fused loop runs).

        Request ``i`` of the batch has id ``rid0 + i``. ``departure`` is the fused path's
        departure event class (``server``, ``request``, ``amount``) and ``callbacks`` the
        list its events share; ``request(i)`` builds request ``i``'s
        :class:`~dcsim.model.Request` (for a departure still pending at the end);
        ``sample(i, accepted, active)`` takes the per-request sample due before request
        ``i``'s decision, with the clock at it, ``accepted`` requests accepted by this call
        so far and ``active`` requests held (the meter's ``active`` is brought up to date
        only when the call returns). Returns
        ``(why, stop, choice, accepted, released, seconds)`` (``why``, ``stop``: see
        :func:`~dcsim.modes.loss.compiled_kernel.run_batch`; ``choice[i]`` request i's
        server or -1; ``seconds`` the kernel's wall time); the meter, the state, the
        clock, SimPy's queue and its id counter are brought up to date."""
        k = self._k
        queue = env.queue
        d0 = np.ascontiguousarray(demand[:, 0], dtype=np.float64)
        d1 = np.ascontiguousarray(demand[:, 1], dtype=np.float64)
        for entry in queue:
            if type(entry[3]) is not departure:
                return None
        n = times.shape[0]
        p = len(queue)
        cap = p + n - i0
        ht = np.empty(cap)
        hid = np.empty(cap, dtype=np.int64)
        hslot = np.empty(cap, dtype=np.int64)
        dep_server = np.empty(p + n, dtype=np.int64)
        dep_a0 = np.empty(p + n)
        dep_a1 = np.empty(p + n)
        pulled = [entry[3] for entry in queue]
        for j, entry in enumerate(queue):
            ev = entry[3]
            ht[j] = entry[0]
            hid[j] = entry[2]
            hslot[j] = j
            dep_server[j] = ev.server
            dep_a0[j], dep_a1[j] = ev.amount
        k.heapify(ht, hid, hslot, p)
        choice = np.full(n, -1, dtype=np.int64)
        start = np.empty(n)
        util0 = np.empty(n)
        util1 = np.empty(n)
        acc = np.array(meter.accumulators(), dtype=np.float64)
        eids = env.ids
        next_id = next(eids)
        c0, c1 = state.free[:, 0], state.free[:, 1]
        t0 = time.perf_counter()
        now, size, accepted, i, resume = env.now, p, 0, i0, False
        while True:
            why, stop, now, next_id, size, got = k.run_batch(
                times, duration, d0, d1, i, rid0, warm_requests, warm_time, meter.open, every,
                resume, c0, c1, self._cap[0], self._cap[1], self._tol, EPS, self._total[0],
                self._total[1], ht, hid, hslot, size, dep_server, dep_a0, dep_a1, p - i0, acc,
                now, next_id, choice, start, util0, util1)
            accepted += got
            if why != SAMPLE:
                break
            env.set_now(now)
            sample(stop, accepted, size)
            i, resume = stop, True
        seconds = time.perf_counter() - t0
        env.set_ids(itertools.count(next_id))
        env.set_now(now)
        meter.set_accumulators(acc.tolist())
        end = stop + 1 if why == REFUSED else stop  # REFUSED: request stop was decided
        measured = np.flatnonzero(
            (np.arange(rid0 + i0, rid0 + end) >= warm_requests) & (times[i0:end] >= warm_time))
        if measured.size:
            meter.decision_samples([util0[i0:end][measured], util1[i0:end][measured]])
        # the meter's active requests: those that departed out, those pending in
        remaining = hslot[:size]
        pending_new = np.sort(remaining[remaining >= p])
        kept = np.zeros(p, dtype=bool)
        kept[remaining[remaining < p]] = True
        active = meter.active
        for j in np.flatnonzero(~kept).tolist():
            del active[pulled[j].request.id]
        released = p + accepted - size  # the departures the kernel ran
        new = object.__new__
        queue.clear()
        ht_l, hid_l, slot_l = ht[:size].tolist(), hid[:size].tolist(), remaining.tolist()
        evs: dict[int, Any] = {}
        for slot in pending_new.tolist():
            i = slot - (p - i0)
            req = request(i)
            amount = [float(dep_a0[slot]), float(dep_a1[slot])]
            ev = new(departure)
            ev.callbacks = callbacks
            ev.server = int(dep_server[slot])
            ev.request = req
            ev.amount = amount
            evs[slot] = ev
        ends = {}
        for t, slot in zip(ht_l, slot_l, strict=True):
            ends[slot] = t
        for slot in pending_new.tolist():  # in request order, as held() inserts them
            ev = evs[slot]
            active[ev.request.id] = (float(start[slot - (p - i0)]), ends[slot], ev.amount,
                                     None)
        for t, eid, slot in zip(ht_l, hid_l, slot_l, strict=True):
            ev = pulled[slot] if slot < p else evs[slot]
            queue.append((t, NORMAL, eid, ev))
        heapq.heapify(queue)
        touched = np.concatenate([dep_server[:p], choice[i0:end]])
        state.touch(np.unique(touched[touched >= 0]))
        return why, stop, choice, accepted, released, seconds
