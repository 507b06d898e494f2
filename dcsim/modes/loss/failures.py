"""Loss mode under component failures: the loss engine's state as a failure target.

A failed server or link offers no capacity: its free resources are 0 while it is down, the
view's ``server_up`` / ``link_up`` masks say so, ``view.fits`` leaves failed servers out,
and the engine refuses a choice that uses one (a :class:`PluginError` naming the
allocator). What ran on it is released at the failure and, by ``on_failure``:

* ``drop``: counted as interrupted; its remaining holding time is lost;
* ``reallocate``: offered to the allocator again, whole (a multi-server request or a virtual
  cluster is re-embedded from scratch), as a request arriving now with the remaining holding
  time; placed, it departs when it would have; rejected, it is dropped.

The allocator hears of it through ``released()`` (the interrupted request),
``failed()`` / ``repaired()`` (the component), then ``allocate()`` (each interrupted
request again, in arrival order). Repairs restore the component's whole capacity. Under
``capacity: wait`` a failure's releases and a repair wake a held request.

The run goes on until every accepted request has departed or been dropped; failures keep
happening until then, but only those while the measured window is open count in the
summary (every one is a row of the ``component_failures`` table, handed to the sink every
``metrics.flush_rows`` rows: :mod:`dcsim.sim.failure_stream`).
"""

from __future__ import annotations

from types import GeneratorType
from typing import TYPE_CHECKING

import numpy as np

from dcsim.allocators.base import Allocator
from dcsim.errors import PluginError
from dcsim.experiment_sections import FailureSpec
from dcsim.model import Placement, Request
from dcsim.sim.core import Outcome
from dcsim.sim.failure_stream import StreamedFailureProcess
from dcsim.sim.failures import Components, FailureSchedule

if TYPE_CHECKING:
    from dcsim.modes.loss.engine import Engine


class LossFailures:
    """Which request holds what, which component is down, and what a failure does."""

    def __init__(self, engine: Engine, spec: FailureSpec, rng: np.random.Generator,
                 base_dir: str | None = None):
        self.engine = engine
        topo = engine.topology
        schedule = FailureSchedule(spec, Components.of_topology(topo), rng, base_dir)
        self.reallocate = spec.on_failure == "reallocate"
        #: request id -> [request, placement, amount, end] while it holds resources
        self.placed: dict[int, list] = {}
        self.on_server: list[set[int]] = [set() for _ in range(topo.n_servers)]
        self.on_link: list[set[int]] = [set() for _ in range(topo.n_links)]
        self._server_up = np.ones(topo.n_servers, dtype=bool)
        self._n_down = 0  # components down now (a release checks them only when some are)
        self._link_up = np.ones(topo.n_links, dtype=bool)
        view = engine.view
        view.server_up = self._server_up.view()
        view.server_up.flags.writeable = False
        view.link_up = self._link_up.view()
        view.link_up.flags.writeable = False
        self.down_capacity = np.zeros(len(topo.resources))
        meter = engine.meter
        self._tier_capacity = meter.tier_capacity
        self._tier_down = np.zeros(len(meter.tiers))
        avail = [f"avail_{r}" for r in topo.resources]
        avail += [f"avail_bw_{topo.tier_label(t)}" for t in meter.tiers]
        # rows to the sink every metrics.flush_rows; at most so many events per arrival
        self.process = StreamedFailureProcess(engine.env, schedule, self, avail, engine.sink,
                                              engine.config.flush_rows,
                                              lambda: engine.received, "request arrival")
        self.done = engine.env.event()
        alloc = engine.allocator
        self._notify_failed = _overrides(alloc, "failed")
        self._notify_repaired = _overrides(alloc, "repaired")

    # -- requests --------------------------------------------------------------------------
    def hold(self, req: Request, placement: Placement, amount: list[float], end: float) -> None:
        """``req`` took ``placement`` until ``end`` (it is on the servers and links where it
        holds something)."""
        self.placed[req.id] = [req, placement, amount, end]
        for s in _holding(placement):
            self.on_server[s].add(req.id)
        for ln in placement.links[placement.bandwidth > 0].tolist():
            self.on_link[ln].add(req.id)

    def _unhold(self, rid: int) -> list:
        entry = self.placed.pop(rid)
        p = entry[1]
        for s in _holding(p):
            self.on_server[s].discard(rid)
        for ln in p.links[p.bandwidth > 0].tolist():
            self.on_link[ln].discard(rid)
        return entry

    def departure(self, rid: int, event) -> None:
        """A request's holding time is over: release what it holds now, unless a failure
        dropped it already (it was released then)."""
        if rid not in self.placed:
            return
        req, placement, amount, _end = self._unhold(rid)
        self.engine.on_depart(req, placement, amount, event)

    def released(self, placement: Placement) -> None:
        """After the engine released ``placement``: a failed component stays at 0 (a release
        deferred past its failure under ``departures: after_first_step``); the run may end."""
        if self._n_down:
            st = self.engine.state
            s = placement.servers[~self._server_up[placement.servers]]
            if s.size:
                st.free[s] = 0.0
            ln = placement.links[~self._link_up[placement.links]]
            if ln.size:
                st.link_free[ln] = 0.0
        self.check_done()

    def check_done(self) -> None:
        e = self.engine
        if e.arrivals_done and not self.placed and not e.due and not self.done.triggered:
            self.done.succeed()

    def refused(self, choice, demand: np.ndarray) -> str | None:
        """Why a choice takes something of a failed component, or None (a request that
        needs nothing of it, e.g. of zero demand, is not on it)."""
        if type(choice) is int or isinstance(choice, np.integer):
            s = int(choice)
            return (f"chose server {s}, which has failed (view.server_up)"
                    if 0 <= s < self._server_up.size and not self._server_up[s]
                    and (demand > 0).any() else None)
        if isinstance(choice, Placement):
            s = choice.servers
            if s.size and s.min() >= 0 and s.max() < self._server_up.size and \
                    choice.amounts.shape[0] == s.size:
                bad = ~self._server_up[s] & (choice.amounts > 0).any(axis=1)
                if bad.any():
                    return (f"placed on server {int(s[bad][0])}, which has failed "
                            "(view.server_up)")
            ln = choice.links[choice.bandwidth > 0] if \
                choice.bandwidth.shape == choice.links.shape else choice.links
            if ln.size and ln.min() >= 0 and ln.max() < self._link_up.size and \
                    not self._link_up[ln].all():
                return (f"routed over link {int(ln[~self._link_up[ln]][0])}, which has "
                        "failed (view.link_up)")
        return None

    # -- the failure target ----------------------------------------------------------------
    def measuring(self) -> bool:
        return self.engine.meter.open

    def availability(self) -> list[float]:
        cap = self.engine.meter.capacity
        out = [(c - d) / c if c > 0 else float("nan")
               for c, d in zip(cap.tolist(), self.down_capacity.tolist(), strict=True)]
        out += [(c - d) / c if c > 0 else float("nan")
                for c, d in zip(self._tier_capacity.tolist(), self._tier_down.tolist(),
                                strict=True)]
        return out

    def fail(self, kind: str, comp: int) -> Outcome:
        e = self.engine
        now = e.env.now
        on = self.on_server[comp] if kind == "server" else self.on_link[comp]
        hit = [self._unhold(rid) for rid in sorted(on)]
        power = e.power
        metrics = e.metrics
        for req, placement, _amount, _end in hit:
            e.state.apply(placement, 1.0)
            e.meter.interrupted(req.id, now)
            if metrics is not None:
                metrics.departure(now, req)
            if power is not None:
                power.released(now, placement)
            if e.notifies_release:
                e.view.now = now
                e.allocator.released(req, placement, e.view)
        self._n_down += 1
        if kind == "server":
            e.state.free[comp] = 0.0
            self._server_up[comp] = False
            self.down_capacity += e.state.capacity[comp]
            if power is not None:  # a failed server draws nothing
                power.server_failed(now, comp, 1.0)
        else:
            e.state.link_free[comp] = 0.0
            self._link_up[comp] = False
            self._tier_down[e.meter.link_tier_pos[comp]] += e.state.link_capacity[comp]
            if power is not None:
                power.link_failed(now, comp, 1)
        e.view.now = now
        if metrics is not None:
            metrics.failure(now, kind, comp)
        if self._notify_failed:
            e.allocator.failed(kind, comp, e.view)
        out = Outcome(interrupted=len(hit))
        for req, _p, _a, end in hit:
            if self.reallocate and self._offer_again(req, end):
                out.reallocated += 1
            else:
                out.lost_time += end - now
                e.released += 1
        e.wake_held()
        self.check_done()
        return out

    def _offer_again(self, old: Request, end: float) -> bool:
        e = self.engine
        now = e.env.now
        req = Request(old.id, now, end - now, old.demand, old.bandwidth, old.attrs)
        choice = e.allocator.allocate(req, e.view)
        if type(choice) is GeneratorType:
            choice.close()
            raise PluginError(f"allocator {e.allocator.label!r} decides stepwise; "
                              "failures.on_failure: reallocate needs a direct choice")
        placement, amount = e.admit(req, choice)
        if e.metrics is not None:
            e.metrics.decision(now, req, placement)
        if placement is None:
            return False
        self.hold(req, placement, amount, end)
        e.meter.accepted(req.id, now, end, placement, amount)
        if e.power is not None:
            e.power.placed(now, placement)
        return True

    def repair(self, kind: str, comp: int) -> None:
        e = self.engine
        self._n_down -= 1
        if kind == "server":
            e.state.free[comp] = e.state.capacity[comp]
            self._server_up[comp] = True
            self.down_capacity -= e.state.capacity[comp]
            if e.power is not None:
                e.power.server_failed(e.env.now, comp, -1.0)
        else:
            e.state.link_free[comp] = e.state.link_capacity[comp]
            self._link_up[comp] = True
            self._tier_down[e.meter.link_tier_pos[comp]] -= e.state.link_capacity[comp]
            if e.power is not None:
                e.power.link_failed(e.env.now, comp, -1)
        e.view.now = e.env.now
        if e.metrics is not None:
            e.metrics.repair(e.env.now, kind, comp)
        if self._notify_repaired:
            e.allocator.repaired(kind, comp, e.view)
        e.wake_held()

    # -- records ---------------------------------------------------------------------------
    def instant(self) -> dict[str, float]:
        """Corrections and additions to a time-series sample: used shares without the
        failed capacity, and the available shares."""
        e = self.engine
        out = e.meter.instant(e.state, self.down_capacity, ~self._link_up)
        out.update(zip(self.process.avail_columns, self.availability(), strict=True))
        return out


def _holding(p: Placement) -> list[int]:
    """The servers where ``p`` holds something."""
    if p.servers.shape[0] == 1:
        return p.servers.tolist() if (p.amounts > 0).any() else []
    return p.servers[(p.amounts > 0).any(axis=1)].tolist()


def _overrides(obj, name: str) -> bool:
    return getattr(type(obj), name) is not getattr(Allocator, name)
