"""Cluster state as numpy arrays: free resources per server, free bandwidth per link.

:class:`ClusterState` owns the invariant ``0 <= free <= capacity`` for every server resource
and link: :meth:`ClusterState.reserve` and :meth:`ClusterState.release` validate a placement
before touching anything, so a failed call leaves the state unchanged. :meth:`copy` is two
array copies, cheap enough for lookahead allocators that fork state hundreds of times per
decision. Allocators never see a ``ClusterState`` directly; they get a read-only
:class:`StateView`.

An allocator that keeps an index of the free resources (per-rack aggregates, so that a
decision need not scan every server) asks :meth:`StateView.server_changes` for a
:class:`ServerChanges`: the servers whose free resources changed since it last looked.
A server counts as changed when its free resources or the free bandwidth of one of its own
links changed. Every change made through :meth:`ClusterState.reserve`,
:meth:`~ClusterState.release`, :meth:`~ClusterState.take_one`,
:meth:`~ClusterState.give_one` (and the engine's :meth:`~ClusterState.server_ops`) is
recorded there; code that writes ``free`` or ``link_free`` directly calls
:meth:`ClusterState.touch` (a view with ``server_up`` set, i.e. with failures, may see such
writes unrecorded: indexes do not trust it).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from dcsim.errors import StateError
from dcsim.model.placement import Placement
from dcsim.model.topology import Topology

#: Relative tolerance for float comparisons against zero and capacity.
EPS = 1e-9


class ClusterState:
    """Mutable free-capacity arrays of one topology."""

    __slots__ = ("topology", "capacity", "link_capacity", "free", "link_free", "_tol", "_ltol",
                 "_abs_tol", "_cap_rows", "_logs")

    def __init__(self, topology: Topology):
        self.topology = topology
        self.capacity = topology.server_capacity
        self.link_capacity = topology.link_capacity
        # column-major: one resource's free column is contiguous, so per-resource scans over
        # all servers (the hot path of most allocators) are fast
        self.free = np.array(topology.server_capacity, dtype=np.float64, order="F")
        self.link_free = np.array(topology.link_capacity, dtype=np.float64)
        self._tol = EPS * np.maximum(self.capacity, 1.0)
        self._ltol = EPS * np.maximum(self.link_capacity, 1.0)
        self._abs_tol = EPS * max(float(self.capacity.max(initial=1.0)), 1.0)
        self._cap_rows = self.capacity.tolist()  # Python floats for the fast path
        #: one list per live ServerChanges: the servers (ints, index arrays, or None for
        #: all) whose free resources changed since its last drain
        self._logs: list[list] = []

    def copy(self) -> ClusterState:
        """An independent state with the same free capacities."""
        new = ClusterState.__new__(ClusterState)
        new.topology = self.topology
        new.capacity = self.capacity
        new.link_capacity = self.link_capacity
        new.free = self.free.copy(order="F")
        new.link_free = self.link_free.copy()
        new._tol = self._tol
        new._ltol = self._ltol
        new._abs_tol = self._abs_tol
        new._cap_rows = self._cap_rows
        new._logs = []  # a fork is watched by nobody yet
        return new

    # ------------------------------------------------------------------ change tracking
    def server_changes(self) -> ServerChanges:
        """A new record of the servers whose free resources change from now on."""
        return ServerChanges(self)

    def touch(self, servers: Any = None, links: Any = None) -> None:
        """Record that the free resources of ``servers`` (an index or index array) or the
        free bandwidth of ``links`` were changed by a direct write to :attr:`free` or
        :attr:`link_free`; with neither, that anything may have changed."""
        if servers is None and links is None:
            for log in self._logs:
                log.append(None)
            return
        if servers is not None:
            servers = np.array(servers, dtype=np.int64).ravel()
            for log in self._logs:
                log.append(servers)
        if links is not None:
            self._touch_links(np.array(links, dtype=np.int64).ravel())

    def _touch_links(self, links: np.ndarray) -> None:
        """Record the servers at an end of ``links`` (their own links changed)."""
        at = self.topology.link_servers()[links].ravel()
        at = at[at >= 0]
        if at.size:
            for log in self._logs:
                log.append(at)

    # ------------------------------------------------------------------ derived
    @property
    def used(self) -> np.ndarray:
        return self.capacity - self.free

    @property
    def link_used(self) -> np.ndarray:
        return self.link_capacity - self.link_free

    # ------------------------------------------------------------------ validation
    def check(self, p: Placement) -> str | None:
        """Why ``p`` cannot be reserved now, or ``None`` if it can."""
        return self._check(p, release=False)

    def _check(self, p: Placement, release: bool) -> str | None:
        s, a = p.servers, p.amounts
        n_srv, n_res = self.free.shape
        if a.ndim != 2 or a.shape != (s.shape[0], n_res):
            return f"amounts must have shape ({s.shape[0]}, {n_res}), got {a.shape}"
        if s.size:
            if s.min() < 0 or s.max() >= n_srv:
                return f"server index out of range 0..{n_srv - 1}"
            if s.size > 1 and np.unique(s).size != s.size:
                return "a server appears twice in one placement"
            if not np.all(np.isfinite(a)) or a.min() < 0:
                return "negative or non-finite amount"
        ln, bw = p.links, p.bandwidth
        if ln.shape != bw.shape:
            return "links and bandwidth differ in length"
        if ln.size:
            if ln.min() < 0 or ln.max() >= self.link_free.size:
                return f"link index out of range 0..{self.link_free.size - 1}"
            if ln.size > 1 and np.unique(ln).size != ln.size:
                return "a link appears twice in one placement"
            if not np.all(np.isfinite(bw)) or bw.min() < 0:
                return "negative or non-finite bandwidth"
        if release:
            if s.size and np.any(self.free[s] + a > self.capacity[s] + self._tol[s]):
                return "release would exceed server capacity (released twice?)"
            over = self.link_free[ln] + bw > self.link_capacity[ln] + self._ltol[ln]
            if ln.size and np.any(over):
                return "release would exceed link capacity (released twice?)"
        else:
            if s.size and np.any(self.free[s] - a < -self._tol[s]):
                return "not enough free resources on a chosen server"
            if ln.size and np.any(self.link_free[ln] - bw < -self._ltol[ln]):
                return "not enough free bandwidth on a chosen link"
        return None

    # ------------------------------------------------------------------ mutation
    def reserve(self, p: Placement) -> None:
        """Take ``p``'s resources; raise :class:`StateError` (nothing changed) if it cannot."""
        why = self._check(p, release=False)
        if why is not None:
            raise StateError(f"cannot reserve placement: {why}")
        self.apply(p, -1.0)

    def release(self, p: Placement) -> None:
        """Give ``p``'s resources back; raise :class:`StateError` if that exceeds capacity."""
        why = self._check(p, release=True)
        if why is not None:
            raise StateError(f"cannot release placement: {why}")
        self.apply(p, 1.0)

    def fits(self, demand: np.ndarray) -> np.ndarray:
        """Boolean mask of servers whose free resources cover ``demand``."""
        return fits(self.free, demand)

    def take_one(self, server: int, demand: list[float]) -> bool:
        """Reserve ``demand`` (one float per resource) on one server if it fits.

        The engine's single-server fast path: returns False, changing nothing, if it does not
        fit. Works on Python floats: for a handful of resources that is several times cheaper
        than numpy calls.
        """
        vals = self.free[server].tolist()
        tol = self._abs_tol
        for j, d in enumerate(demand):
            v = vals[j] - d
            if v < -tol:
                return False
            vals[j] = v if v > 0.0 else 0.0
        self.free[server] = vals
        for log in self._logs:
            log.append(server)
        return True

    def give_one(self, server: int, amount: list[float]) -> None:
        """Release ``amount`` on one server that ``take_one`` reserved (clamped to capacity)."""
        vals = self.free[server].tolist()
        cap = self._cap_rows[server]
        for j, a in enumerate(amount):
            v = vals[j] + a
            vals[j] = v if v < cap[j] else cap[j]
        self.free[server] = vals
        for log in self._logs:
            log.append(server)

    def server_ops(self) -> tuple[Callable[[int, list[float]], bool],
                                  Callable[[int, list[float]], None]]:
        """``(take_one, give_one)`` for the engine's hot path: with two resources, versions
        unrolled over the two free columns (twice as fast; the same floats), else the
        methods themselves."""
        if self.free.shape[1] != 2:
            return self.take_one, self.give_one
        c0, c1 = self.free[:, 0], self.free[:, 1]
        if c0.flags.c_contiguous and c1.flags.c_contiguous:
            # (free is column-major) each column through a memoryview: its items read and
            # written as the same doubles, without numpy's scalar indexing
            c0, c1 = memoryview(c0), memoryview(c1)
        tol = self._abs_tol
        cap = self._cap_rows
        logs = self._logs  # mutated in place when a ServerChanges is made or dropped

        def take_one(server: int, demand: list[float]) -> bool:
            d0, d1 = demand
            v0 = c0[server] - d0
            v1 = c1[server] - d1
            if v0 < -tol or v1 < -tol:
                return False
            c0[server] = v0 if v0 > 0.0 else 0.0
            c1[server] = v1 if v1 > 0.0 else 0.0
            if logs:
                for log in logs:
                    log.append(server)
            return True

        def give_one(server: int, amount: list[float]) -> None:
            a0, a1 = amount
            k0, k1 = cap[server]
            v0 = c0[server] + a0
            v1 = c1[server] + a1
            c0[server] = v0 if v0 < k0 else k0
            c1[server] = v1 if v1 < k1 else k1
            if logs:
                for log in logs:
                    log.append(server)

        return take_one, give_one

    def apply(self, p: Placement, sign: float) -> None:
        s = p.servers
        if self._logs:
            if s.size:
                for log in self._logs:
                    log.append(s)
            if p.links.size:
                self._touch_links(p.links)
        if s.size == 1 and not p.links.size:  # fast path: one server, no network
            i = int(s[0])
            row = self.free[i]
            if sign < 0:
                row -= p.amounts[0]
                np.maximum(row, 0.0, out=row)
            else:
                row += p.amounts[0]
                np.minimum(row, self.capacity[i], out=row)
            return
        if s.size:
            free = self.free[s] + sign * p.amounts
            # absorb float round-off so that 0 <= free <= capacity holds exactly
            np.clip(free, 0.0, self.capacity[s], out=free)
            self.free[s] = free
        if p.links.size:
            ln = p.links
            lf = self.link_free[ln] + sign * p.bandwidth
            np.clip(lf, 0.0, self.link_capacity[ln], out=lf)
            self.link_free[ln] = lf


class ServerChanges:
    """The servers of a :class:`ClusterState` whose free resources changed since the last
    :meth:`drain` (or since this record was made). Dropping the record stops the recording.
    """

    __slots__ = ("state", "_log", "__weakref__")

    def __init__(self, state: ClusterState):
        self.state = state
        self._log: list = []
        state._logs.append(self._log)
        weakref.finalize(self, _forget, state._logs, self._log)

    def drain(self) -> np.ndarray | None:
        """The servers changed since the last call (ascending, unique; may be empty), or None
        when every server may have changed (:meth:`ClusterState.touch` without servers)."""
        log = self._log
        if not log:
            return _NONE
        items = log[:]
        log.clear()
        if any(x is None for x in items):
            return None
        if len(items) == 1 and type(items[0]) is not int:
            return np.unique(items[0])
        return np.unique(np.concatenate([np.atleast_1d(x) for x in items]).astype(np.int64))


_NONE = np.zeros(0, dtype=np.int64)
_NONE.flags.writeable = False


def _forget(logs: list, log: list) -> None:
    for i, other in enumerate(logs):
        if other is log:
            del logs[i]
            return


def fits(free: np.ndarray, demand: np.ndarray) -> np.ndarray:
    """Servers (rows of ``free``) that can hold ``demand``, within float tolerance.

    Compares one resource column at a time: on column-major state that is several times
    faster than ``np.all(free >= demand, axis=1)``.
    """
    mask = free[:, 0] >= demand[0] - EPS
    for j in range(1, free.shape[1]):
        mask &= free[:, j] >= demand[j] - EPS
    return mask


class StateView:
    """What an allocator may read: free capacities (read-only), topology, time, forks.

    The arrays are read-only views that always reflect the live state. Allocators that need
    to simulate ahead call :meth:`fork` to get a private, mutable :class:`ClusterState`.
    """

    __slots__ = ("_state", "topology", "free", "link_free", "capacity", "link_capacity", "now",
                 "inv_capacity", "server_tol", "columns", "workload", "step_boundaries",
                 "server_up", "link_up")

    def __init__(self, state: ClusterState):
        self._state = state
        self.topology = state.topology
        self.free = state.free.view()
        self.free.flags.writeable = False
        self.link_free = state.link_free.view()
        self.link_free.flags.writeable = False
        self.capacity = state.capacity
        self.link_capacity = state.link_capacity
        #: 1 / capacity per server and resource (0 where capacity is 0), for normalising
        self.inv_capacity = np.divide(
            1.0, self.capacity, out=np.zeros_like(self.capacity, dtype=np.float64),
            where=self.capacity > 0,
        )
        self.inv_capacity.flags.writeable = False
        #: EPS · max(capacity, 1) per server and resource: "more than nothing" for a server
        self.server_tol = EPS * np.maximum(self.capacity, 1.0)
        self.server_tol.flags.writeable = False
        #: ``free``'s columns, one per resource: contiguous read-only arrays (the state is
        #: column-major), for code that compares each resource on its own
        self.columns = [self.free[:, j] for j in range(self.free.shape[1])]
        self.now = 0.0
        #: what the run's workload declares in advance, set by the engine: a
        #: :class:`dcsim.workload.facts.WorkloadFacts` (lookahead allocators sample its
        #: ``attrs`` distributions); None outside a simulation
        self.workload: Any = None
        #: True while the engine decides a request under ``departures: after_first_step``
        #: (the Nara authors' clock): it wants a stepwise decision that yields
        #: ``dcsim.allocators.base.FIRST_STEP`` after the request's first partial step,
        #: where the engine releases the requests ending now. False otherwise (then a
        #: multi-server allocator decides in one call)
        self.step_boundaries = False
        #: with ``failures:``, read-only masks of the servers and links that are up (a
        #: failed one has no free capacity and takes no request); None without failures
        self.server_up: np.ndarray | None = None
        self.link_up: np.ndarray | None = None

    def fits(self, demand: np.ndarray) -> np.ndarray:
        """Boolean mask of servers whose free resources cover ``demand`` (vectorised)."""
        cols = self.columns
        d = demand.tolist()
        mask = cols[0] >= d[0] - EPS
        for j in range(1, len(cols)):
            mask &= cols[j] >= d[j] - EPS
        if self.server_up is not None:  # a failed server takes nothing, not even 0
            mask &= self.server_up
        return mask

    @property
    def used(self) -> np.ndarray:
        """Used resources per server (servers × resources), a fresh array."""
        return self.capacity - self.free

    def load(self) -> np.ndarray:
        """Per server, the largest used fraction over its resources (0 = idle, 1 = full)."""
        return ((self.capacity - self.free) * self.inv_capacity).max(axis=1)

    def fork(self) -> ClusterState:
        """A private mutable copy of the current state."""
        return self._state.copy()

    def same_state(self, other: StateView) -> bool:
        """Whether ``other`` reads the same live state as this view (a view of a fork, or
        of another run's state, does not)."""
        return other._state is self._state

    def server_changes(self) -> ServerChanges:
        """A record of the servers whose free resources change from now on (see the module
        docstring; not to be trusted while ``server_up`` is set)."""
        return self._state.server_changes()

    def check(self, p: Placement) -> str | None:
        return self._state.check(p)
