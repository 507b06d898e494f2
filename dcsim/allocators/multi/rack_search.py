"""Choosers that search racks before servers (issue #19): the full scan's choice, bit for bit.

Each keeps a :class:`~dcsim.allocators.multi.rack_index.RackIndex` of the view it serves
and bounds each rack group's best possible score from the group's maxima; groups are
searched best bound first, a few at a time, and the search stops once no group left can
beat the best server found or tie with it at a lower rank. Only servers inside searched
groups are scored, with the full scan's own floating-point operations
(:mod:`dcsim.allocators.multi.rack_index` explains why a bound is never below a score it
bounds).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dcsim.allocators.multi.rack_index import (
    RackIndex,
    bound_sum,
    lexicographic_order,
    matvec,
    own_link_scores,
    server_links,
)
from dcsim.allocators.multi.step import Partial, path_service
from dcsim.model import ClusterState, StateView
from dcsim.model.state import EPS


class TetrisSearch:
    """The Tetris choice (:func:`dcsim.allocators.multi.baselines.tetris_scores`, then the best
    score, ties by ``ties``) of a ``tetris``, ``nalb`` or ``nulb`` allocator.

    A group's bound: its servers' largest ``free / capacity²`` per resource against the
    demand, plus the largest bandwidth term a server of it could have (its link entirely
    free: ``B`` over the smallest capacity of its links), times the locality penalty where
    it applies; -inf for a group no server of which can be eligible.
    """

    def __init__(self, alloc: Any, view: StateView):
        self.alloc = alloc
        self.inv_cap2 = alloc.inv_cap2
        self.index = ix = RackIndex(view, {"tetris": self.inv_cap2})
        gr = ix.groups
        # the layout numpy gives free · inv_cap2 in the full scan: a subset's product takes
        # the same, so that its matrix-vector product rounds the same way
        self.order = "C" if (view.free * self.inv_cap2).flags.c_contiguous else "F"
        ix.weighted["tetris"] = np.asarray(ix.weighted["tetris"], order=self.order)
        # per group, the smallest capacity of a link of its servers (inf: none)
        inc, pad = server_links(view.topology)
        n = view.free.shape[0]
        cap = np.where(pad, np.inf, view.link_capacity[inc]).min(axis=1) if \
            view.link_capacity.size else np.full(n, np.inf)
        self.link_cap = np.minimum.reduceat(cap[gr.order], gr.ptr[:-1])
        self.lex_rank = self.group_lex_rank = None  # ties: name, made when first needed

    @classmethod
    def build(cls, alloc: Any, view: StateView) -> TetrisSearch | None:
        """A search for ``alloc`` on ``view``, or None where the full scan must serve: fewer
        than ``alloc.index_min_servers`` servers, failures (``server_up``), more than 7
        resources, or a ``bandwidth_term`` other than ``none`` and ``own_link`` (the
        misaligned ones move their values between servers with the eligible set; the raw
        ones have no bound here)."""
        n, n_res = view.free.shape
        if (n < max(alloc.index_min_servers, 2) or n_res > 7 or view.server_up is not None
                or alloc.options.bandwidth_term not in ("none", "own_link")
                or not isinstance(view, StateView | ClusterState)
                or (view.link_capacity.size and not view.link_capacity.min() > 0)):
            return None
        return cls(alloc, view)

    def usable(self, view: StateView) -> bool:
        return self.index.usable(view)

    def choose(self, partial: Partial, view: StateView, anchor: str, carried: int) -> int:
        """The full scan's choice (-1: none)."""
        o = self.alloc.options
        ix = self.index
        gr = ix.groups
        ix.sync()
        vec = np.asarray(partial.remaining if o.demand == "remaining"
                         else partial.request.demand, dtype=np.float64)
        bound = matvec(ix.weighted["tetris"], vec)
        bw = (o.bandwidth_term == "own_link" and partial.bandwidth > 0
              and view.link_free.shape[0] > 0)
        if bw:  # a server's term is at most B / capacity of one of its links (share <= 1)
            bound = bound + partial.bandwidth / self.link_cap
        at = partial.anchor(anchor, carried)
        local = -1
        if at >= 0:
            local = int(view.topology.server_rack[at])
            if local >= 0:
                bound[gr.rack != local] *= o.locality_penalty
        if partial.servers or np.any(partial.remaining > 0):
            bound[~ix.may_be_eligible(partial.remaining, partial.eligibility == "any_free")] \
                = -np.inf
        by_name = o.ties == "name"
        if by_name and self.lex_rank is None:
            n = view.free.shape[0]
            self.lex_rank = np.empty(n, dtype=np.int64)
            self.lex_rank[lexicographic_order(n)] = np.arange(n)
            self.group_lex_rank = np.minimum.reduceat(self.lex_rank[gr.order], gr.ptr[:-1])
        group_rank = self.group_lex_rank if by_name else gr.first
        need = ix.eligible_bits(partial)
        best, best_rank, best_i = -np.inf, -1, -1
        take = 1
        while True:
            # the groups that may still hold the choice: a bound above the best score found,
            # or equal to it with a server ranked before it
            if best_i < 0:
                alive = np.flatnonzero(bound > -np.inf)
            else:
                alive = np.flatnonzero((bound > best)
                                       | ((bound == best) & (group_rank < best_rank)))
            if not alive.size:
                return best_i
            if take == 1:  # the best bound, the first rank among equal ones
                b = bound[alive]
                tied = alive[b == b.max()]
                pick = tied[group_rank[tied].argmin(keepdims=True)]
            elif alive.size > take:
                pick = alive[np.lexsort((group_rank[alive], -bound[alive]))[:take]]
            else:
                pick = alive
            bound[pick] = -np.inf  # searched
            idx = gr.members(pick)
            score = matvec(np.multiply(view.free[idx], self.inv_cap2[idx], order=self.order),
                           vec)
            if bw:
                score = score + own_link_scores(partial, view, idx)
            if local >= 0:
                score[view.topology.server_rack[idx] != local] *= o.locality_penalty
            score[~ix.eligible_at(partial, idx, need)] = -np.inf
            top = score.max()
            if top > -np.inf and top >= best:
                tied = idx[score == top]
                ranks = self.lex_rank[tied] if by_name else tied
                j = int(ranks.argmin())
                if top > best or ranks[j] < best_rank:
                    best, best_rank, best_i = top, int(ranks[j]), int(tied[j])
            take *= 4


class BestFitSearch:
    """The choice of ``best_fit_multi`` within a stage (the chosen servers' racks, their
    pods, or everything: within one, every candidate is equally near), by rack groups.

    A server that holds all that remains exists only in a group whose largest free amount
    of each resource does (within the largest tolerance): those groups are scored whole,
    and the least leftover among their fitting candidates is the choice. Else the choice
    gives the most: a group's bound is ``min(largest free, remaining)`` times the largest
    ``1 / capacity`` per resource, summed as the scan sums; groups are searched best bound
    first (then lowest server), until none left can beat or tie the best found. A group
    none of whose servers has a link with the bandwidth free is skipped where that is
    required.
    """

    def __init__(self, alloc: Any, view: StateView):
        self.alloc = alloc
        self.index = RackIndex(view, links=True, mins=True)
        self._need: int | None = None
        #: per server, its links (padded with -1) and the padding (:func:`server_links`)
        self.incident, self.no_link = server_links(view.topology)
        #: no network to check (the ``flat`` topology)
        self.flat = path_service(view.topology).is_flat
        #: every server has exactly one link (a Fabric)
        self.one_link = self.incident.shape[1] == 1 and not self.no_link.any()

    @classmethod
    def build(cls, alloc: Any, view: StateView) -> BestFitSearch | None:
        n, n_res = view.free.shape
        if (n < max(alloc.index_min_servers, 2) or n_res > 7 or view.server_up is not None
                or not isinstance(view, StateView | ClusterState)):
            return None
        return cls(alloc, view)

    def usable(self, view: StateView) -> bool:
        return self.index.usable(view)

    def serves(self, partial: Partial, view: StateView) -> bool:
        """Whether the stages are racks, pods, all (not so when no chosen server has a
        known rack: the scan then ranks same-pod servers first among all)."""
        return not partial.servers or bool(np.any(
            view.topology.server_rack[partial.servers] >= 0))

    def choose(self, partial: Partial, view: StateView) -> int:
        """The scan's choice (-1: none): the best in the chosen servers' racks, else in
        their pods, else anywhere."""
        if partial.servers:
            topo = view.topology
            gr = self.index.groups
            racks = topo.server_rack[partial.servers]
            found = self.best(partial, view, _among(gr.rack, racks))
            if found >= 0:
                return found
            pods = topo.server_pod[partial.servers]
            if np.any(pods >= 0):
                found = self.best(partial, view, _among(gr.pod, pods))
                if found >= 0:
                    return found
        return self.best(partial, view, None)

    def best(self, partial: Partial, view: StateView, allowed: np.ndarray | None) -> int:
        """The scan's choice among the eligible servers of the groups ``allowed`` (a mask;
        None: all), -1 when there is none."""
        ix = self.index
        gr = ix.groups
        ix.sync()
        self._need = ix.eligible_bits(partial)  # (for _candidates, during this call)
        rem = partial.remaining
        first = not partial.servers
        # the groups of the stage, or all (None); the masks and bounds below are per one
        ids = None if allowed is None else np.flatnonzero(allowed)
        size = gr.n_groups if ids is None else ids.size
        if first and not np.any(rem > 0):
            groups = np.ones(size, dtype=bool)
        else:
            groups = ix.may_be_eligible(rem, partial.eligibility == "any_free", ids)
        net = partial.bandwidth > 0 and not self.flat
        netok = None
        if net:
            netok = (ix.link_max if ids is None else ix.link_max[ids]) >= partial.bandwidth - EPS
        # a fitting server needs its network too after the first choice
        fit = groups & ix.may_fit(rem, ids)
        if net and not first:
            fit &= netok
        fitted = np.flatnonzero(fit) if ids is None else ids[fit]
        best, best_i = -np.inf, -1
        if fitted.size:
            found, idx, free = self._least_leftover(partial, view, fitted)
            if found >= 0:
                return found
            if idx.size:
                given = _given(partial, view, idx, free)
                best = given.max()
                best_i = int(idx[given == best].min())
        # none fits: the most given, by bound
        if net:
            groups &= netok
        if ids is None:
            ids = np.arange(gr.n_groups)
            given_max = np.minimum(ix.free_max, rem) * gr.max_inv
        else:
            given_max = np.minimum(ix.free_max[ids], rem) * gr.max_inv[ids]
        bound = bound_sum(given_max)
        bound[~groups] = -np.inf
        bound[fit] = -np.inf  # scored already
        group_first = gr.first[ids]
        take = 4  # groups per batch: any schedule gives the same choice (this one measured best)
        while True:
            if best_i < 0:
                alive = np.flatnonzero(bound > -np.inf)
            else:
                alive = np.flatnonzero((bound > best)
                                       | ((bound == best) & (group_first < best_i)))
            if not alive.size:
                return best_i
            if alive.size > take:
                pick = alive[np.lexsort((group_first[alive], -bound[alive]))[:take]]
            else:
                pick = alive
            bound[pick] = -np.inf
            idx, free, _ = self._candidates(partial, view, gr.members(ids[pick]), False)
            if idx.size:
                given = _given(partial, view, idx, free)
                top = given.max()
                if top >= best:
                    i = int(idx[given == top].min())
                    if top > best or i < best_i:
                        best, best_i = top, i
            take *= 2

    def _least_leftover(self, partial: Partial, view: StateView, fitted: np.ndarray):
        """The fitting candidate of the groups ``fitted`` with the least leftover (then the
        lowest index), or -1 with every candidate of them and its free row.

        Groups are scored by a lower bound on their fitting servers' leftover, least first:
        such a server's free amount is at least the group's smallest and at least
        ``remaining - largest tolerance``, and the bound takes it with the smallest
        ``1 / capacity`` where the difference is not negative (else the largest), in the
        leftover's own floating-point operations; monotone rounding keeps it at or below
        every leftover it bounds.
        """
        gr = self.index.groups
        rem = partial.remaining
        bound = leftover_bound(self.index, rem, fitted)
        first = gr.first[fitted]
        left = np.ones(fitted.size, dtype=bool)  # not searched yet
        best, best_i = np.inf, -1
        seen_idx: list[np.ndarray] = []
        seen_free: list[np.ndarray] = []
        take = 2  # (as in best: the schedule only sets the speed)
        while True:
            if best_i < 0:
                alive = np.flatnonzero(left)
            else:
                alive = np.flatnonzero(left & ((bound < best)
                                               | ((bound == best) & (first < best_i))))
            if not alive.size:
                break
            if alive.size > take:
                alive = alive[np.lexsort((first[alive], bound[alive]))[:take]]
            left[alive] = False
            idx, free, fits = self._candidates(partial, view, gr.members(fitted[alive]))
            seen_idx.append(idx)
            seen_free.append(free)
            if fits.any():
                idx = idx[fits]
                leftover = ((free[fits] - rem) * view.inv_capacity[idx]).sum(axis=1)
                top = leftover.min()
                if top <= best:
                    i = int(idx[leftover == top].min())
                    if top < best or i < best_i:
                        best, best_i = top, i
            take *= 2
        if best_i >= 0:
            return best_i, None, None
        return -1, np.concatenate(seen_idx), np.concatenate(seen_free)

    def _candidates(self, partial: Partial, view: StateView, idx: np.ndarray,
                    need_fits: bool = True):
        """The candidates among ``idx`` (eligible, network-capable where needed), their
        free rows and (unless ``need_fits`` is False and the network does not ask) whether
        each fits: the scan's arithmetic (``server_tol`` is its ``EPS · max(capacity, 1)``)."""
        idx = idx[self.index.eligible_at(partial, idx, self._need)]
        net = partial.bandwidth > 0 and not self.flat
        if net and partial.servers:  # every candidate needs the network
            idx = idx[self._net_ok(partial, idx)]
            net = False
        free = view.free[idx]
        fits = None
        if need_fits or net:
            fits = np.all(free >= partial.remaining - view.server_tol[idx], axis=1)
        if net:  # the first server needs no network when it holds everything
            ok = self._net_ok(partial, idx) | fits
            if not ok.all():
                idx, free, fits = idx[ok], free[ok], fits[ok]
        return idx, free, fits

    def _net_ok(self, partial: Partial, idx: np.ndarray) -> np.ndarray:
        """Whether a link of each server has the bandwidth free (the scan's test)."""
        inc = self.incident[idx]
        if self.one_link:  # the best of one link is its own
            return partial.link_free[inc[:, 0]] >= partial.bandwidth - EPS
        best = np.where(self.no_link[idx], -np.inf, partial.link_free[inc]).max(axis=1)
        return best >= partial.bandwidth - EPS


def leftover_bound(ix: RackIndex, rem: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Per group of ``groups``, at most the leftover ``Σ (free - rem) / capacity`` of any
    of its servers that fits ``rem`` (free at least ``rem - EPS · max(capacity, 1)``)."""
    gr = ix.groups
    lo = np.maximum(ix.free_min[groups], rem - gr.max_tol[groups]) - rem
    return bound_sum(lo * np.where(lo < 0, gr.max_inv[groups], gr.min_inv[groups]))


def _given(partial: Partial, view: StateView, idx: np.ndarray, free: np.ndarray) -> np.ndarray:
    """What each candidate gives, normalised: the scan's arithmetic."""
    return (np.minimum(free, partial.remaining) * view.inv_capacity[idx]).sum(axis=1)


def _among(values: np.ndarray, chosen: np.ndarray) -> np.ndarray:
    """``np.isin(values, chosen[chosen >= 0])`` for small non-negative labels (-1: none)."""
    known = chosen[chosen >= 0]
    table = np.zeros(int(max(values.max(initial=-1), known.max(initial=-1))) + 2, dtype=bool)
    table[known + 1] = True
    return table[values + 1]
