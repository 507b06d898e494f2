"""The loss engine's two behaviours of the Nara authors' environment (``capacity: wait`` and
``departures: after_first_step``, :mod:`dcsim.sim.engine`): holding a request until the
cluster's total free resources cover it, and releasing the departures of an instant after
the first step of the request decided then. A mixin of :class:`~dcsim.sim.engine.Engine`,
kept apart so the engine's common path reads on its own."""

from __future__ import annotations

import simpy

from dcsim.model import Placement, Request


class HeldAndDeferred:
    """``_hold`` (capacity: wait) and the deferred departures (after_first_step); the
    state they use (``env``, ``state``, ``meter``, ``config``, ``_due``, ``_departure``,
    ``_deciding``, ``_defer``, ``_hold_tol``) is the engine's."""

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
        self._wake_held()

    def _wake_held(self) -> None:
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
        if not self._due:
            self.env.timeout(0).callbacks.append(self._release_due_event)
        self._due.append((req, placement, amount))

    def _release_due_event(self, _event: simpy.Event) -> None:
        if not self._deciding:
            self._release_due()

    def _release_due(self) -> None:
        """Release the deferred departures (each once), then wake a held request."""
        if not self._due:
            return
        due, self._due = self._due, []
        for req, placement, amount in due:
            self._depart(req, placement, amount, None)
        self._wake_held()
