"""The Nara papers' baselines: multi-server, network-aware allocators (Shabka et al. 2021/2023).

Each one only says which server comes next; the shared step of
:mod:`dcsim.allocators.multi.step` takes ``min(free, remaining)`` from it, checks paths to the
servers already chosen, and fails the request when a pair has no usable path or no server is
left. All take the options ``reservation`` (``union`` | ``per_pair_channel``),
``k_paths`` (3), ``eligible`` and ``pair_paths``.

The Nara authors' code (``zawaki/nara_revision``) does several things neither paper states;
each is an option here whose default is dcsim's reading (or, for an indexing accident, the
behaviour as meant) and whose other value reproduces the authors: ``anchor: carried``,
``demand: full``, ``bandwidth_term: authors_raw`` (their arithmetic and indexing; default
``own_link``, see :mod:`dcsim.allocators.multi.tetris_score`), ``ties: name``, ``search:
authors``, ``eligible: any_free``, ``pair_paths: authors_sticky``
(``docs/reference/allocators.md``, "The Nara authors' behaviours").

* ``tetris`` — Grandl et al.'s alignment score: the dot product of the request's remaining
  demand and a server's free resources, both divided by that server's capacity
  (``Σ_r rem_r · free_r / cap_r²``, plus the link term; ``bandwidth_term`` picks the
  authors' unscaled arithmetic instead); servers in another rack than the request's first chosen
  server (the 2021 paper's App. D.1; ``anchor: previous`` for the most recent one) score ×
  ``locality_penalty`` (0.9, the value the Nara authors tuned). Highest first, ties
  to the lowest index. (The papers call the score a cosine similarity; Tetris's own
  alignment is the dot product, which also prefers servers with *more* to give.)
* ``nalb`` — the first server by the Tetris score, then breadth-first search over the
  topology graph from it, expanding each node's neighbours in descending free bandwidth of
  the connecting link (as the path check sees it when the node is expanded; ties in graph
  order) and taking resources from every server met. Paths: k shortest by link weight
  ``path_weight``. The default ``inverse_free`` (capacity / free: 1 on an empty link, so an
  idle network gives the hop-count paths; growing as a link fills; a full link is skipped)
  prefers short paths over empty links. ``free`` is the authors' weight, free capacity,
  which makes the *fullest* links the shortest (likely a bug; offered to reproduce them).
  ``hops`` ranks by hop count.
* ``nulb`` — the same search in plain graph order (bandwidth-unaware); paths weighted as
  for ``nalb`` (both papers: "weighting is still used for the k-shortest paths").
* ``random_multi`` — uniform over the eligible servers (those with some free amount of a
  resource the request still needs).
* ``best_fit_multi`` — network-aware best fit: among the eligible servers nearest to those
  already chosen (same rack, then same pod, then anywhere), a server that can hold all that
  remains with the least normalised leftover, else the one that gives the most (fewest
  servers, fewest paths). When the request needs the network (bandwidth > 0 and more than
  one server), servers none of whose links has the bandwidth free are never chosen.

Why new names rather than a ``split`` option on ``random`` and ``best_fit``: the single-server
allocators take the whole demand from one server and have no network options; folding the
Nara step into them would give them options (``reservation``, ``k_paths``) that mean
nothing unless ``split`` is set, and their results labels would hide a different algorithm
behind a familiar name. Separate names keep every option meaningful, keep
:mod:`dcsim.allocators.single` single-server, and sort beside their siblings in
``dcsim plugins``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Literal

import numpy as np
from pydantic import Field

from dcsim.allocators.multi.rack_index import lexicographic_order as _lexicographic_order
from dcsim.allocators.multi.rack_index import server_links
from dcsim.allocators.multi.rack_search import BestFitSearch, TetrisSearch
from dcsim.allocators.multi.step import MultiServerAllocator, Partial, PathWeight, path_service
from dcsim.allocators.multi.tetris_score import (  # noqa: F401 (re-exported: the allocators' score)
    AUTHORS_NODE_SCALE,
    bandwidth_scores,
    node_weights,
    tetris_scores,
)
from dcsim.hookspecs import hookimpl
from dcsim.model import StateView
from dcsim.model.state import EPS

_PATH_WEIGHT_DOC = ("inverse_free: capacity/free, prefers emptier links; free: the authors' "
                    "weight (prefers the fullest links); hops: hop count")


class TetrisScoreOptions(MultiServerAllocator.Options):
    """How the Tetris alignment score is computed (``tetris``, and the first server of
    ``nalb`` and ``nulb``)."""

    locality_penalty: float = Field(
        0.9, ge=0, le=1,
        description="score factor for servers outside the anchor server's rack")
    demand: Literal["remaining", "full"] = Field(
        "remaining", description="score against the remaining demand, or the full request "
        "(the Nara authors' code)")
    bandwidth_term: Literal["none", "own_link", "authors_misaligned", "own_raw",
                            "authors_raw"] = Field(
        "own_link", description="the link term and the scale: none; own_link (free link "
        "share x request bandwidth share, node terms / capacity^2); authors_misaligned (the "
        "same scale, link values on other servers' rows as the Nara authors' code indexes "
        "them); own_raw (raw free bandwidth x request bandwidth, node terms / 100: the "
        "authors' arithmetic, each server's own link); authors_raw (the authors' arithmetic "
        "and indexing: the 2023 paper's Tetris)")
    ties: Literal["index", "name"] = Field(
        "index", description="equal scores go to the lowest server index, or (name) to the "
        "first in the Nara authors' row order (Resource_10 before Resource_2)")


class _TetrisScoring:
    """Shared state of the allocators that score servers with Tetris.

    On a cluster of at least :attr:`index_min_servers` servers the best score is found by
    searching racks before servers (:class:`~dcsim.allocators.multi.rack_search.TetrisSearch`);
    the choice is the full scan's (:func:`tetris_scores`), which still serves small
    clusters, runs with failures, and computes the ``bandwidth_term`` values other than
    ``none`` and ``own_link``.
    """

    #: clusters smaller than this are scanned whole (an index costs more than it saves)
    index_min_servers = 1024

    def setup(self, view: StateView) -> None:
        super().setup(view)
        self.inv_cap2 = node_weights(view, self.options.bandwidth_term)
        self.last_tetris = -1  # the authors' last_action: survives between requests
        self._tetris_search: TetrisSearch | None = None

    def tetris_choice(self, partial: Partial, view: StateView, anchor: str) -> int | None:
        o = self.options
        search = self._tetris_search
        if search is None or not search.usable(view):
            search = self._tetris_search = TetrisSearch.build(self, view)
        if search is not None:
            found = search.choose(partial, view, anchor, self.last_tetris)
            if found < 0:
                return None
            self.last_tetris = found
            return found
        score = tetris_scores(partial, view, self.inv_cap2, o.locality_penalty, anchor,
                              o.demand, o.bandwidth_term, self.last_tetris)
        if o.ties == "name":
            lex = _lexicographic_order(score.shape[0])
            i = int(lex[score[lex].argmax()])
        else:
            i = int(score.argmax())
        if not np.isfinite(score[i]):
            return None
        self.last_tetris = i
        return i

class Tetris(_TetrisScoring, MultiServerAllocator):
    """Highest Tetris alignment first, remote racks penalised (Nara's Tetris baseline)."""

    name = "tetris"
    description = "multi-server: Tetris alignment score, x0.9 off the first server's rack"

    class Options(TetrisScoreOptions):
        anchor: Literal["first", "previous", "carried"] = Field(
            "first", description="the rack that is local: the request's first chosen server's "
            "(the paper's App. D.1), the previous one's within the request, or carried: "
            "the last chosen server's, across requests too (the Nara authors' code)")

    def choose(self, partial: Partial, view: StateView) -> int | None:
        return self.tetris_choice(partial, view, self.options.anchor)


class _SearchOptions(TetrisScoreOptions):
    path_weight: PathWeight = Field("inverse_free", description=_PATH_WEIGHT_DOC)
    anchor: Literal["none", "carried"] = Field(
        "none", description="first server's locality: none, or carried: x locality_penalty "
        "outside the rack of the previous request's first server (the Nara authors' code)")
    search: Literal["bfs", "authors"] = Field(
        "bfs", description="bfs: breadth-first from the first server, each server taken as "
        "met; authors: the Nara authors' plan, a depth-first stack over switches that lists "
        "every server with anything free until the request is covered, then offered last "
        "found first")


class _BFSAllocator(_TetrisScoring, MultiServerAllocator):
    """First server by Tetris score, then every server a search from it meets."""

    weighted_search: bool

    def setup(self, view: StateView) -> None:
        super().setup(view)
        # each node's neighbours (graph order) and the links to them, as CSR arrays
        ptr, self._adj, self._adj_links = self.path_service.adjacency()
        self._adj_ptr = ptr.tolist()

    def choose(self, partial: Partial, view: StateView) -> int | None:
        scratch = partial.scratch
        if not partial.servers:
            i = self.tetris_choice(partial, view, self.options.anchor)
            if i is None:
                return None
            if self.options.search == "bfs":
                scratch["bfs"] = self._bfs(i, partial)
                scratch["met"], scratch["at"] = _NO_SERVERS, 0
                return i
            scratch["plan"] = self._authors_plan(i, partial, view)
        if self.options.search == "bfs":
            # the servers met so far and not yet offered, checked together; the search goes
            # on (expanding the next node, with the link bandwidth free then) only when
            # they are used up, as when they were offered one at a time
            met, at = scratch["met"], scratch["at"]
            while True:
                if at < met.size:
                    ok = partial.eligible_at(met[at:])
                    j = int(ok.argmax())
                    if ok[j]:
                        scratch["met"], scratch["at"] = met, at + j + 1
                        return int(met[at + j])
                met, at = next(scratch["bfs"], None), 0
                if met is None:
                    scratch["met"], scratch["at"] = _NO_SERVERS, 0
                    return None
        plan = scratch["plan"]  # offered from the end: the last found comes first
        if not plan:
            return None
        ok = partial.eligible_at(np.array(plan[::-1], dtype=np.int64))
        j = int(ok.argmax())
        if not ok[j]:
            plan.clear()
            return None
        s = plan[len(plan) - 1 - j]
        del plan[len(plan) - 1 - j:]
        return s

    def _neighbours(self, u: int, partial: Partial) -> np.ndarray:
        """Node ``u``'s neighbours, by descending free link bandwidth when the search is
        weighted (ties in graph order)."""
        lo, hi = self._adj_ptr[u], self._adj_ptr[u + 1]
        nbrs = self._adj[lo:hi]
        if self.weighted_search and nbrs.size > 1:
            free = partial.link_free[self._adj_links[lo:hi]]
            nbrs = nbrs[np.argsort(-free, kind="stable")]
        return nbrs

    def _bfs(self, start: int, partial: Partial) -> Iterator[np.ndarray]:
        """Servers in breadth-first order from server ``start`` (excluded): per expanded
        node, the servers it meets first, in order (a node is expanded when asked for)."""
        ps = self.path_service
        seen = np.zeros(len(ps.nodes), dtype=bool)
        first = int(ps.server_node[start])
        seen[first] = True
        queue = deque([first])
        node_server = ps.node_server
        while queue:
            u = queue.popleft()
            nbrs = self._neighbours(u, partial)
            new = nbrs[~seen[nbrs]]
            if new.size:
                seen[new] = True
                queue.extend(new.tolist())
                servers = node_server[new]
                servers = servers[servers >= 0]
                if servers.size:
                    yield servers

    def _authors_plan(self, start: int, partial: Partial, view: StateView) -> list[int]:
        """The Nara authors' NALB/NULB plan (``scripts/rollout.py`` 358-549), servers in the
        order found; :meth:`choose` offers them from the end (their ``action_series.pop()``).

        A stack of switches, starting at server ``start``: pop a node, go through its
        neighbours (by free link bandwidth for NALB). A server with a free amount of
        anything, not yet listed, is listed and its share ``min(free, demand - listed)``
        counted; any other node not yet visited or stacked, and not a server, is pushed.
        Stops as soon as the listed shares cover the demand.
        """
        ps = self.path_service
        node_server = ps.node_server
        free = view.free
        need = np.asarray(partial.request.demand, dtype=np.float64)
        tol = EPS * np.maximum(need, 1.0)
        got = np.minimum(free[start], need)
        plan = [start]
        listed = {start}
        first = int(ps.server_node[start])
        stack = [first]
        stacked = {first}
        visited = set()
        while stack:
            u = stack.pop()
            stacked.discard(u)
            visited.add(u)
            for v in self._neighbours(u, partial).tolist():
                if np.all(got >= need - tol):
                    return plan
                s = int(node_server[v])
                if s >= 0 and s not in listed and np.any(free[s] > 0):
                    got = got + np.minimum(free[s], need - got)
                    plan.append(s)
                    listed.add(s)
                elif s < 0 and v not in visited and v not in stacked:
                    stack.append(v)
                    stacked.add(v)
        return plan


_NO_SERVERS = np.zeros(0, dtype=np.int64)


class NALB(_BFSAllocator):
    """Network-aware locality-based: bandwidth-ordered search, bandwidth-weighted paths."""

    name = "nalb"
    description = "multi-server: Tetris first server, BFS by free link bandwidth, weighted paths"
    weighted_search = True

    class Options(_SearchOptions):
        pass


class NULB(_BFSAllocator):
    """Network-unaware locality-based: plain search order, bandwidth-weighted paths (both
    papers: "weighting is still used for the k-shortest paths procedure")."""

    name = "nulb"
    description = "multi-server: Tetris first server, plain BFS order, weighted paths"
    weighted_search = False

    class Options(_SearchOptions):
        pass


class RandomMulti(MultiServerAllocator):
    """Uniformly random among servers with some free amount of what the request still needs."""

    name = "random_multi"
    description = "multi-server: uniform over servers with something the request needs"

    def choose(self, partial: Partial, view: StateView) -> int | None:
        idx = np.flatnonzero(partial.eligible())
        if idx.size == 0:
            return None
        return int(idx[self.rng.integers(idx.size)])


class BestFitMulti(MultiServerAllocator):
    """Network-aware best fit: nearest rack/pod first, then least leftover or most given."""

    name = "best_fit_multi"
    description = "multi-server: nearest servers first, best fit, then largest share"

    def setup(self, view: StateView) -> None:
        super().setup(view)
        self._incident, self._no_link = server_links(view.topology)
        self._flat = path_service(view.topology).is_flat

    #: clusters smaller than this are scanned whole (an index costs more than it saves)
    index_min_servers = 1024

    def choose(self, partial: Partial, view: StateView) -> int | None:
        search = getattr(self, "_search", None)
        if search is None or not search.usable(view):
            search = self._search = BestFitSearch.build(self, view)
        if search is not None and search.serves(partial, view):
            found = search.choose(partial, view)  # by rack groups
            return found if found >= 0 else None
        return self._best(partial, view, np.flatnonzero(partial.eligible()))

    def _best(self, partial: Partial, view: StateView, idx: np.ndarray) -> int | None:
        """The best of the eligible servers ``idx`` (ascending), or None."""
        if idx.size == 0:
            return None
        rem = partial.remaining
        free = view.free[idx]
        inv = view.inv_capacity[idx]
        fits = np.all(free >= rem - EPS * np.maximum(view.capacity[idx], 1.0), axis=1)
        if partial.bandwidth > 0 and not self._flat:
            inc = self._incident[idx]
            best = np.where(self._no_link[idx], -np.inf, partial.link_free[inc]).max(axis=1)
            needs_net = ~fits if not partial.servers else np.ones(idx.size, dtype=bool)
            ok = ~needs_net | (best >= partial.bandwidth - EPS)
            idx, free, inv, fits = idx[ok], free[ok], inv[ok], fits[ok]
            if idx.size == 0:
                return None
        near = np.zeros(idx.size, dtype=np.int64)
        if partial.servers:
            topo = view.topology
            chosen = np.array(partial.servers)
            rack, pod = topo.server_rack[idx], topo.server_pod[idx]
            same_rack = (rack >= 0) & np.isin(rack, topo.server_rack[chosen])
            same_pod = (pod >= 0) & np.isin(pod, topo.server_pod[chosen])
            near = np.where(same_rack, 0, np.where(same_pod, 1, 2))
        leftover = ((free - rem) * inv).sum(axis=1)
        given = (np.minimum(free, rem) * inv).sum(axis=1)
        key = np.where(fits, leftover, -given)
        order = np.lexsort((idx, key, ~fits, near))
        return int(idx[order[0]])


NARA_ALLOCATORS = (Tetris, NALB, NULB, RandomMulti, BestFitMulti)


@hookimpl
def register_allocators(register):
    for cls in NARA_ALLOCATORS:
        register(cls)
