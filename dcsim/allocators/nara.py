"""The Nara papers' baselines: multi-server, network-aware allocators (Shabka et al. 2021/2023).

Each one only says which server comes next; the shared step of
:mod:`dcsim.allocators.multi` takes ``min(free, remaining)`` from it, checks paths to the
servers already chosen, and fails the request when a pair has no usable path or no server is
left. All take the options ``reservation`` (``union`` | ``per_pair_channel``) and
``k_paths`` (3).

* ``tetris`` — Grandl et al.'s alignment score: the dot product of the request's remaining
  demand and a server's free resources, both divided by that server's capacity
  (``Σ_r rem_r · free_r / cap_r²``); servers in another rack than the request's first chosen
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
:mod:`dcsim.allocators.builtin` single-server, and sort beside their siblings in
``dcsim plugins``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Literal

import numpy as np
from pydantic import Field

from dcsim.allocators.multi import MultiServerAllocator, Partial, PathWeight, path_service
from dcsim.hookspecs import hookimpl
from dcsim.model import StateView
from dcsim.model.state import EPS

_PATH_WEIGHT_DOC = ("inverse_free: capacity/free, prefers emptier links; free: the authors' "
                    "weight (prefers the fullest links); hops: hop count")


def tetris_scores(partial: Partial, view: StateView, inv_cap2: np.ndarray,
                  locality_penalty: float, anchor: str = "first") -> np.ndarray:
    """Tetris alignment of every server with ``partial``'s remaining demand (-inf: ineligible).

    ``inv_cap2`` is ``1 / capacity²`` per server and resource. Servers in another rack than
    the request's ``first`` (the paper's App. D.1) or ``previous`` chosen server are
    multiplied by ``locality_penalty``.
    """
    score = (view.free * inv_cap2) @ partial.remaining
    prev = (partial.servers[0] if partial.servers else -1) if anchor == "first" \
        else partial.previous
    if prev >= 0:
        rack = view.topology.server_rack
        if rack[prev] >= 0:
            score[rack != rack[prev]] *= locality_penalty
    score[~partial.eligible()] = -np.inf
    return score


class Tetris(MultiServerAllocator):
    """Highest Tetris alignment first, remote racks penalised (Nara's Tetris baseline)."""

    name = "tetris"
    description = "multi-server: Tetris alignment score, x0.9 off the first server's rack"

    class Options(MultiServerAllocator.Options):
        locality_penalty: float = Field(
            0.9, ge=0, le=1,
            description="score factor for servers outside the anchor server's rack")
        anchor: Literal["first", "previous"] = Field(
            "first", description="the rack that is local: the request's first chosen server's "
                                 "(the paper's App. D.1) or the previous one's")

    def setup(self, view: StateView) -> None:
        super().setup(view)
        self.inv_cap2 = view.inv_capacity ** 2

    def choose(self, partial: Partial, view: StateView) -> int | None:
        score = tetris_scores(partial, view, self.inv_cap2, self.options.locality_penalty,
                              self.options.anchor)
        i = int(score.argmax())
        return i if np.isfinite(score[i]) else None


class _BFSAllocator(MultiServerAllocator):
    """First server by Tetris score, then every server a breadth-first search meets."""

    weighted_search: bool

    def setup(self, view: StateView) -> None:
        super().setup(view)
        self.inv_cap2 = view.inv_capacity ** 2
        ps = self.path_service
        g = view.topology.graph
        li = view.topology._link_index
        nodes = ps.nodes
        self._adj = [np.array([ps.node_index(v) for v in g.adj[u]], dtype=np.int64)
                     for u in nodes]
        self._adj_links = [np.array([li[(u, v)] for v in g.adj[u]], dtype=np.int64)
                           for u in nodes]

    def choose(self, partial: Partial, view: StateView) -> int | None:
        if not partial.servers:
            score = tetris_scores(partial, view, self.inv_cap2, 1.0)
            i = int(score.argmax())
            if not np.isfinite(score[i]):
                return None
            partial.scratch["bfs"] = self._bfs(i, partial)
            return i
        eligible = partial.eligible()
        for s in partial.scratch["bfs"]:
            if eligible[s]:
                return s
        return None

    def _bfs(self, start: int, partial: Partial) -> Iterator[int]:
        """Servers in breadth-first order from server ``start`` (excluded)."""
        ps = self.path_service
        seen = np.zeros(len(ps.nodes), dtype=bool)
        first = int(ps.server_node[start])
        seen[first] = True
        queue = deque([first])
        node_server = ps.node_server
        while queue:
            u = queue.popleft()
            nbrs = self._adj[u]
            if self.weighted_search and nbrs.size > 1:
                free = partial.link_free[self._adj_links[u]]
                nbrs = nbrs[np.argsort(-free, kind="stable")]
            for v in nbrs.tolist():
                if not seen[v]:
                    seen[v] = True
                    queue.append(v)
                    s = int(node_server[v])
                    if s >= 0:
                        yield s


class NALB(_BFSAllocator):
    """Network-aware locality-based: bandwidth-ordered BFS, bandwidth-weighted paths."""

    name = "nalb"
    description = "multi-server: Tetris first server, BFS by free link bandwidth, weighted paths"
    weighted_search = True

    class Options(MultiServerAllocator.Options):
        path_weight: PathWeight = Field("inverse_free", description=_PATH_WEIGHT_DOC)


class NULB(_BFSAllocator):
    """Network-unaware locality-based: plain BFS order, bandwidth-weighted paths (both
    papers: "weighting is still used for the k-shortest paths procedure")."""

    name = "nulb"
    description = "multi-server: Tetris first server, plain BFS order, weighted paths"
    weighted_search = False

    class Options(MultiServerAllocator.Options):
        path_weight: PathWeight = Field("inverse_free", description=_PATH_WEIGHT_DOC)


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
        topo = view.topology
        ps = path_service(topo)
        li = topo._link_index
        rows = [[li[(s, v)] for v in topo.graph.adj[s]] for s in topo.servers]
        width = max((len(r) for r in rows), default=0)
        inc = np.full((topo.n_servers, max(width, 1)), -1, dtype=np.int64)
        for i, r in enumerate(rows):
            inc[i, :len(r)] = r
        self._incident = inc
        self._no_link = inc < 0
        self._flat = ps.is_flat

    def choose(self, partial: Partial, view: StateView) -> int | None:
        idx = np.flatnonzero(partial.eligible())
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
