"""Per-rack aggregates of the free resources, for allocators that search racks before servers.

A decision of a multi-server allocator (:mod:`dcsim.allocators.multi.baselines`) on a large cluster
should not touch every server. :class:`RackIndex` keeps, per *group* (the servers of one
rack and one pod; servers of unknown rack or pod form groups of their own), the largest free
amount of each resource, optionally weighted per server (``free · w``), and the largest free
bandwidth on a server's own links. It is kept current from the state's change record
(:meth:`dcsim.model.StateView.server_changes`): before each use, :meth:`RackIndex.sync`
recomputes only the groups of the servers that changed since the last one.

A chooser then bounds each group's best possible score from these maxima, searches the
groups in order of their bound, scores servers only inside the groups it searches, and stops
once no group left can beat (or tie with a lower-ranked server) the best found. The bounds
are computed with the same floating-point operations as the scores, on values at least as
large: rounding is monotone, so a bound is never below a score it bounds (no tolerance is
needed, and a group whose best server attains the bound ties exactly). The choice is the
one a full scan makes, bit for bit (``tests/allocators/multi/test_rack_index.py`` checks it
against one).
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

import numpy as np

from dcsim.model import StateView, Topology
from dcsim.model.state import EPS

if TYPE_CHECKING:
    from dcsim.allocators.multi.step import Partial


class RackGroups:
    """The fixed part: which servers form each group, and per-group constants."""

    def __init__(self, topology: Topology):
        n = topology.n_servers
        rack = np.asarray(topology.server_rack, dtype=np.int64)
        pod = np.asarray(topology.server_pod, dtype=np.int64)
        span = int(pod.max(initial=0)) + 2
        uniq, gid = np.unique((rack + 1) * span + (pod + 1), return_inverse=True)
        gid = gid.ravel().astype(np.int64)
        #: group of each server, 0..n_groups-1
        self.gid = gid
        self.n_groups = int(uniq.shape[0])
        #: the rack and pod of each group (-1: unknown)
        self.rack = uniq // span - 1
        self.pod = uniq % span - 1
        order = np.lexsort((np.arange(n), gid))
        counts = np.bincount(gid, minlength=self.n_groups)
        #: servers by group, ascending within a group; group g is order[ptr[g]:ptr[g+1]]
        self.order = order
        self.ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self.size = counts.astype(np.int64)
        #: lowest server index of each group
        self.first = order[self.ptr[:-1]].copy()
        cap = np.asarray(topology.server_capacity, dtype=np.float64)
        tol = EPS * np.maximum(cap, 1.0)
        starts = self.ptr[:-1]
        #: per group and resource, the smallest and largest tolerance EPS·max(capacity, 1)
        self.min_tol = np.minimum.reduceat(tol[order], starts, axis=0)
        self.max_tol = np.maximum.reduceat(tol[order], starts, axis=0)
        inv = np.divide(1.0, cap, out=np.zeros_like(cap), where=cap > 0)
        #: per group and resource, the largest 1 / capacity
        self.max_inv = np.ascontiguousarray(np.maximum.reduceat(inv[order], starts, axis=0))
        #: per group and resource, the smallest 1 / capacity
        self.min_inv = np.ascontiguousarray(np.minimum.reduceat(inv[order], starts, axis=0))

    def members(self, groups: np.ndarray) -> np.ndarray:
        """The servers of ``groups``, group after group (ascending within each)."""
        if groups.size == 1:
            g = int(groups[0])
            return self.order[self.ptr[g]:self.ptr[g + 1]]
        lens = self.size[groups]
        ends = np.cumsum(lens)
        shift = np.repeat(self.ptr[groups] - (ends - lens), lens)
        return self.order[np.arange(int(ends[-1]) if ends.size else 0) + shift]


# per topology (a Topology is compared and hashed by identity), for as long as it lives
_RACK_GROUPS: WeakKeyDictionary[Topology, RackGroups] = WeakKeyDictionary()
_SERVER_LINKS: WeakKeyDictionary[Topology, tuple[np.ndarray, np.ndarray]] = \
    WeakKeyDictionary()


def rack_groups(topology: Topology) -> RackGroups:
    """The :class:`RackGroups` of ``topology`` (cached for it)."""
    groups = _RACK_GROUPS.get(topology)
    if groups is None:
        groups = _RACK_GROUPS[topology] = RackGroups(topology)
    return groups


def server_links(topology) -> tuple[np.ndarray, np.ndarray]:
    """Per server, the indices of its links (padded with -1) and the padding mask (cached
    for the topology)."""
    cached = _SERVER_LINKS.get(topology)
    if cached is None:
        n = topology.n_servers
        ends = topology.link_servers()
        at = ends[ends >= 0]
        if np.bincount(at, minlength=n).max(initial=0) <= 1:
            # at most one link per server (a Fabric): its index, in one pass over the links
            inc = np.full((n, 1), -1, dtype=np.int64)
            k = np.nonzero(ends >= 0)[0]
            inc[at, 0] = k
        else:  # in the graph's order of each server's neighbours
            li = topology.link_indices()
            rows = [[li[(s, v)] for v in topology.graph.adj[s]] for s in topology.servers]
            width = max((len(r) for r in rows), default=0)
            inc = np.full((n, max(width, 1)), -1, dtype=np.int64)
            for i, r in enumerate(rows):
                inc[i, :len(r)] = r
        cached = _SERVER_LINKS[topology] = (inc, inc < 0)
    return cached


class RackIndex:
    """Per-group maxima of a view's free resources, synced from its change record.

    ``weights``: name -> per-server, per-resource weight array (``free · w`` is aggregated);
    the raw free amounts are always aggregated (:attr:`free_max`). ``links``: also keep the
    largest free bandwidth of a server's own links (:attr:`link_max`). ``mins``: also the
    smallest free amounts (:attr:`free_min`).
    """

    def __init__(self, view: StateView, weights: dict[str, np.ndarray] | None = None,
                 links: bool = False, mins: bool = False):
        topo = view.topology
        self.view = view
        self.groups = rack_groups(topo)
        self.weights = {k: np.asarray(w, dtype=np.float64) for k, w in (weights or {}).items()}
        self._changes = view.server_changes()
        n_res = view.free.shape[1]
        g = self.groups.n_groups
        self.free_max = np.zeros((g, n_res))
        self.free_min = np.zeros((g, n_res)) if mins else None
        self.weighted = {k: np.zeros((g, n_res)) for k in self.weights}
        self.links = links and view.link_free.shape[0] > 0
        self.link_max = np.full(g, -np.inf)
        if self.links:
            self._inc, self._pad = server_links(topo)
        # eligibility as bits (resource r: 1 << r): per server, which free amounts are above
        # its tolerance; per group, which largest ones are above the group's smallest
        self._tol = view.server_tol
        self._bit = 1 << np.arange(n_res, dtype=np.uint8)
        self._all_bits = int(self._bit.sum())
        self.tol_lo = self._tol.min(axis=0, initial=np.inf)
        self.tol_hi = self._tol.max(axis=0, initial=-np.inf)
        self.above = np.zeros(view.free.shape[0], dtype=np.uint8)
        self.group_above = np.zeros(g, dtype=np.uint8)
        self._gtol_lo = self.groups.min_tol.min(axis=0, initial=np.inf)
        self._gtol_hi = self.groups.min_tol.max(axis=0, initial=-np.inf)
        self._update(np.arange(g))

    def usable(self, view: StateView) -> bool:
        """Whether this index describes ``view`` (same state, no untracked writes)."""
        return view.same_state(self.view) and view.server_up is None

    def sync(self) -> None:
        """Bring the maxima up to date with the servers changed since the last sync."""
        changed = self._changes.drain()
        if changed is None:
            self._update(np.arange(self.groups.n_groups))
        elif changed.size:
            self._update(np.unique(self.groups.gid[changed]))

    def _update(self, groups: np.ndarray) -> None:
        gr = self.groups
        idx = gr.members(groups)
        lens = gr.size[groups]
        starts = np.cumsum(lens) - lens
        free = self.view.free[idx]
        self.free_max[groups] = np.maximum.reduceat(free, starts, axis=0)
        if self.free_min is not None:
            self.free_min[groups] = np.minimum.reduceat(free, starts, axis=0)
        for k, w in self.weights.items():
            self.weighted[k][groups] = np.maximum.reduceat(free * w[idx], starts, axis=0)
        if self.links:
            lf = np.where(self._pad[idx], -np.inf, self.view.link_free[self._inc[idx]])
            self.link_max[groups] = np.maximum.reduceat(lf.max(axis=1), starts)
        self.above[idx] = (free > self._tol[idx]) @ self._bit
        self.group_above[groups] = (self.free_max[groups] > self.groups.min_tol[groups]) \
            @ self._bit

    def _needed_bits(self, remaining: np.ndarray, lo: np.ndarray, hi: np.ndarray
                     ) -> int | None:
        """The bits of the resources whose ``remaining`` is above every tolerance between
        ``lo`` and ``hi`` (per resource); None when some resource's is above some and not
        others (the caller then compares server by server)."""
        over = remaining > hi
        if not np.all(over | (remaining <= lo)):
            return None
        return int(over @ self._bit)

    def eligible_bits(self, partial: Partial) -> int:
        """The bits :meth:`eligible_at` tests for ``partial`` as it is now (-1: test
        :meth:`Partial.eligible_at` instead); valid until its next server is added."""
        if partial.eligible_known or (not partial.servers
                                             and not np.any(partial.remaining > 0)):
            return -1
        if partial.eligibility == "any_free":
            return self._all_bits
        need = self._needed_bits(partial.remaining, self.tol_lo, self.tol_hi)
        return -1 if need is None else need

    def eligible_at(self, partial: Partial, idx: np.ndarray, need: int | None = None
                    ) -> np.ndarray:
        """:meth:`Partial.eligible_at` from the synced bits: ``min(free, remaining) > tol``
        exactly when both ``free > tol`` and ``remaining > tol``, and where ``remaining`` is
        above every server's tolerance of a resource or none's, the second is one bit.
        ``need``: :meth:`eligible_bits` of ``partial``, if already known."""
        if need is None:
            need = self.eligible_bits(partial)
        if need < 0:
            return partial.eligible_at(idx)
        return ((self.above[idx] & need) != 0) & ~partial.chosen[idx]

    def may_be_eligible(self, remaining: np.ndarray, any_free: bool,
                        groups: np.ndarray | None = None) -> np.ndarray:
        """Per group (of ``groups``; default all): whether some server might be eligible
        (:meth:`Partial.eligible`): with a free amount above tolerance of a resource the
        request still needs (``any_free``: of any resource). Never False for a group with
        an eligible server."""
        need = self._all_bits if any_free else self._needed_bits(
            remaining, self._gtol_lo, self._gtol_hi)
        if need is None:
            min_tol = _rows(self.groups.min_tol, groups)
            above = _rows(self.free_max, groups) > min_tol
            above &= remaining > min_tol
            return above.any(axis=1)
        return (_rows(self.group_above, groups) & need) != 0

    def may_fit(self, remaining: np.ndarray, groups: np.ndarray | None = None) -> np.ndarray:
        """Per group (of ``groups``; default all): whether some server might hold all of
        ``remaining`` (within the tolerance of
        :class:`~dcsim.allocators.multi.baselines.BestFitMulti`)."""
        need = remaining - _rows(self.groups.max_tol, groups)
        free_max = _rows(self.free_max, groups)
        if not need.shape[1]:
            return np.ones(need.shape[0], dtype=bool)
        fit = free_max[:, 0] >= need[:, 0]  # column by column: the same test, faster
        for r in range(1, need.shape[1]):
            fit &= free_max[:, r] >= need[:, r]
        return fit


def _rows(a: np.ndarray, groups: np.ndarray | None) -> np.ndarray:
    return a if groups is None else a[groups]


@cache
def lexicographic_order(n: int) -> np.ndarray:
    """Server indices ``0..n-1`` sorted as the strings of their numbers: the authors' row
    order (their servers are named ``Resource_<index>``, and rows follow sorted names)."""
    return np.array(sorted(range(n), key=str), dtype=np.int64)


def own_link_scores(partial: Partial, view: StateView, idx: np.ndarray | None = None,
                    raw: bool = False) -> np.ndarray:
    """The ``own_link`` term of :func:`dcsim.allocators.multi.baselines.bandwidth_scores` at the
    servers ``idx`` (default: all); each value depends on its server alone. ``raw``: the
    ``own_raw`` term instead, the free bandwidth of the same link (the freest by share)
    times the request's bandwidth, neither divided by the capacity."""
    inc, pad = server_links(view.topology)
    if idx is not None:
        inc, pad = inc[idx], pad[idx]
    if inc.shape[1] == 1 and not pad.any():  # one link each (a Fabric): the same floats
        if raw:
            return np.maximum(partial.link_free[inc[:, 0]], 0.0) * partial.bandwidth
        cap = view.link_capacity[inc[:, 0]]
        share = partial.link_free[inc[:, 0]] / cap
        return np.maximum(share, 0.0) * (partial.bandwidth / cap)
    cap = np.where(pad, 1.0, view.link_capacity[inc])
    share = np.where(pad, -np.inf, partial.link_free[inc] / cap)
    best = share.argmax(axis=1)
    rows = np.arange(inc.shape[0])
    if raw:
        free = np.where(pad, 0.0, partial.link_free[inc])
        return np.maximum(free[rows, best], 0.0) * partial.bandwidth
    return np.maximum(share[rows, best], 0.0) * (partial.bandwidth / cap[rows, best])


def bound_sum(a: np.ndarray) -> np.ndarray:
    """Per row, the sum of ``a``'s columns left to right: for a bound, where it equals the
    scores' ``sum(axis=1)`` up to the sign of a zero sum (numpy starts from +0.0), which no
    comparison sees; two columns are added without numpy's reduction machinery."""
    if a.shape[1] == 2:
        return a[:, 0] + a[:, 1]
    return a.sum(axis=1)


def matvec(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``a @ x`` with each row's value independent of the others: numpy computes a one-row
    product by another routine than a many-row one (their roundings can differ), so one row
    is computed as two."""
    if a.shape[0] == 1:
        return (np.concatenate([a, a]) @ x)[:1]
    return a @ x
