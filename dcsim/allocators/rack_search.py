"""Choosers that search racks before servers (issue #19): the full scan's choice, bit for bit.

Each keeps a :class:`~dcsim.allocators.index.RackIndex` of the view it serves and bounds each
rack group's best possible score from the group's maxima; groups are searched best bound
first, a few at a time, and the search stops once no group left can beat the best server
found or tie with it at a lower rank. Only servers inside searched groups are scored, with
the full scan's own floating-point operations (:mod:`dcsim.allocators.index` explains why a
bound is never below a score it bounds).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dcsim.allocators.index import (
    RackIndex,
    lexicographic_order,
    matvec,
    own_link_scores,
    server_links,
)
from dcsim.allocators.multi import Partial
from dcsim.model import StateView


class TetrisSearch:
    """The Tetris choice (:func:`dcsim.allocators.nara.tetris_scores`, then the best score,
    ties by ``ties``) of a ``tetris``, ``nalb`` or ``nulb`` allocator.

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
        resources, or ``bandwidth_term: authors_misaligned`` (its values move between
        servers with the eligible set)."""
        n, n_res = view.free.shape
        if (n < max(alloc.index_min_servers, 2) or n_res > 7 or view.server_up is not None
                or alloc.options.bandwidth_term == "authors_misaligned"
                or not hasattr(view, "server_changes")
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
        if anchor == "first":
            at = partial.servers[0] if partial.servers else -1
        elif anchor == "previous":
            at = partial.previous
        else:
            at = carried if anchor == "carried" else -1
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
            score[~partial.eligible_at(idx)] = -np.inf
            top = score.max()
            if top > -np.inf and top >= best:
                tied = idx[score == top]
                ranks = self.lex_rank[tied] if by_name else tied
                j = int(ranks.argmin())
                if top > best or ranks[j] < best_rank:
                    best, best_rank, best_i = top, int(ranks[j]), int(tied[j])
            take *= 4
