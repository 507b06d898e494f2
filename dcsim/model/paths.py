"""Paths between servers as arrays of link indices, for bandwidth checks and reservations.

On a tree the path between two servers is unique: :class:`PathService` roots the tree at a
switch of maximal tier, precomputes each server's chain of uplinks, and answers a query by
stripping the common top of two chains (the part above the lowest common ancestor), with
no graph search. It also exposes the rooted tree as numpy arrays (``parent``, ``depth``,
``uplinks``, ``server_ancestors``) for hose-model embedders.

On general graphs (Fabric, optical, a file) paths are the first ``k`` shortest simple paths
by hop count, exactly as :func:`networkx.shortest_simple_paths` yields them (Yen's algorithm
over a bidirectional BFS; ties in the graph's insertion order, so deterministic). Two servers
that are leaves (one link each, to a switch: every server of a Fabric or optical topology)
are answered by rack pair: the paths are their two host links around the k shortest paths
between their switches, searched once per ordered switch pair and cached in a bounded LRU
(at most racks² searches, against servers² pairs). The search, :func:`_k_shortest_leaf_pair`,
is networkx's algorithm run on the graph without its leaves, each switch carrying the number
of leaves it hides; its docstring gives the argument that it yields networkx's paths in
networkx's order for every server of the two racks. Other pairs (a server with several links,
or attached to another server) keep the per-server-pair search with networkx and its cache;
two leaves on one switch have a single simple path, through it, found without a search.

A path's links are listed from the lower-indexed server to the higher, so
``links_between(a, b)`` equals ``links_between(b, a)``. A topology without links (``flat``)
does not model the network: every path there is empty.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from heapq import heappop, heappush
from itertools import chain, compress, islice, pairwise
from typing import Any

import networkx as nx
import numpy as np

from dcsim.model.topology import Topology


def _frozen(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


_EMPTY = _frozen(np.zeros(0, dtype=np.int64))


class PathService:
    """Server-to-server paths of one topology (link indices, int64)."""

    def __init__(self, topology: Topology, cache_size: int = 100_000):
        self.topology = topology
        g = topology.graph
        #: every graph node, in graph order; "node index" below means a position here
        self.nodes: list[Any] = list(g.nodes)
        self._node_index = {n: i for i, n in enumerate(self.nodes)}
        n = len(self.nodes)
        #: node index of each server
        self.server_node = topology.server_nodes()
        node_server = np.full(n, -1, dtype=np.int64)
        node_server[self.server_node] = np.arange(topology.n_servers)
        #: server index of each node, -1 for switches
        self.node_server = _frozen(node_server)
        self.node_tier = _frozen(np.array(
            [int(g.nodes[v].get("tier", 0 if g.nodes[v].get("kind") == "server" else 1))
             for v in self.nodes], dtype=np.int64))
        self.is_flat = topology.n_links == 0
        self.is_tree = bool(nx.is_tree(g))
        self.cache_size = int(cache_size)
        self._cache: OrderedDict[tuple[int, int, int], tuple[np.ndarray, ...]] = OrderedDict()
        self._rack_cache: OrderedDict[tuple[int, int, int], tuple[np.ndarray, ...]] = \
            OrderedDict()
        #: False only to measure the per-server-pair cache it replaced (benchmarks/)
        self._by_rack = True
        self._leaf_hub: np.ndarray | None = None
        self._core_adj: list[list[int]] | None = None
        self._leaf_servers: frozenset | None = None
        self._adjacency: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._neighbour_lists: tuple[list[list[tuple[int, int]]], list[dict[int, int]],
                                     list[bool]] | None = None
        self._leaf_mask: np.ndarray | None = None
        self.hits = self.misses = self.searches = 0
        self.root = -1
        self.height = 0
        self.parent = self.depth = self.uplinks = self.server_ancestors = None
        self.server_ancestor_nodes = None
        if self.is_tree:
            self._build_tree()

    # ------------------------------------------------------------------ queries
    def node_index(self, node: Any) -> int:
        """Position of graph node ``node`` (e.g. ``"r3"``) in :attr:`nodes`."""
        return self._node_index[node]

    def links_between(self, a: int, b: int) -> np.ndarray:
        """Link indices of the path between servers ``a`` and ``b`` (empty when a == b).

        Trees: the unique path. Other graphs: the first shortest path by hop count.
        """
        self._check(a, b)
        if a == b or self.is_flat:
            return _EMPTY
        if a > b:
            a, b = b, a
        if self.is_tree:
            la, lb = self._up[a], self._up[b]
            i, j = len(la), len(lb)
            while i and j and la[i - 1] == lb[j - 1]:
                i -= 1
                j -= 1
            return _frozen(np.array(la[:i] + lb[:j][::-1], dtype=np.int64))
        return self.k_paths(a, b, 1)[0]

    def k_paths(self, a: int, b: int, k: int = 3) -> list[np.ndarray]:
        """Up to ``k`` shortest simple paths between servers ``a`` and ``b``, fewest hops first.

        The arrays are read-only. On a tree this is the single path. The paths and their
        order are those of :func:`networkx.shortest_simple_paths` between the two servers;
        see the module docstring for how they are found and cached.
        """
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        self._check(a, b)
        if a == b or self.is_flat:
            return [_EMPTY]
        if self.is_tree:
            return [self.links_between(a, b)]
        lo, hi = (a, b) if a < b else (b, a)
        if self._by_rack:
            if self._leaf_hub is None:
                self._build_leaves()
            ha, hb = int(self._leaf_hub[lo]), int(self._leaf_hub[hi])
            if ha >= 0 and hb >= 0:
                up, down = int(self._host_link[lo]), int(self._host_link[hi])
                if ha == hb:  # one switch: the only simple path is through it
                    return [_frozen(np.array([up, down], dtype=np.int64))]
                return [_frozen(np.concatenate(((up,), mid, (down,))))
                        for mid in self._rack_paths(ha, hb, k)]
        return list(self._pair_paths(lo, hi, k))

    def free_bandwidth(self, a: int, b: int, state: Any, k: int = 1) -> float:
        """The most bandwidth one more flow between servers ``a`` and ``b`` could take now:
        over the first ``k`` paths of :meth:`k_paths`, the largest of each path's smallest
        free bandwidth (``link_free[path].min()``). ``inf`` when ``a == b`` or the topology
        has no links (no network between them).

        ``state`` is what to read the free bandwidth from: a :class:`~dcsim.model.StateView`,
        a :class:`~dcsim.model.ClusterState`, a multi-server allocator's ``Partial`` (whose
        ``link_free`` already counts the request's own earlier pairs under
        ``per_pair_channel``), or a ``link_free`` array itself. With ``k=1`` on a tree it is
        the unique path's bottleneck, ``min(link_capacity - link_used)`` over its links.
        """
        return float(self.free_bandwidths(a, np.array([b], dtype=np.int64), state, k)[0])

    def free_bandwidths(self, a: int, servers: Any, state: Any, k: int = 1) -> np.ndarray:
        """:meth:`free_bandwidth` between server ``a`` and each of ``servers`` (an index
        array), vectorised: a float64 array of ``len(servers)``.

        Trees: from the rooted tree's ancestor links (:attr:`server_ancestors`), every
        server at once. Other graphs: the servers on one switch (leaves, every server of a
        Fabric or optical topology) share their paths to ``a`` but for their own host link,
        so the paths are looked up once per switch (cached as :meth:`k_paths` caches them);
        other servers one by one. The values are :meth:`k_paths`' paths' bottlenecks,
        exactly.
        """
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        link_free = np.asarray(getattr(state, "link_free", state), dtype=np.float64)
        if link_free.shape != (self.topology.n_links,):
            raise ValueError(f"link_free has shape {link_free.shape}, expected "
                             f"({self.topology.n_links},)")
        servers = np.asarray(servers, dtype=np.int64).reshape(-1)
        n = self.topology.n_servers
        if servers.size and (servers.min() < 0 or servers.max() >= n) or not 0 <= a < n:
            raise IndexError(f"server index out of range 0..{n - 1}")
        out = np.full(servers.shape[0], np.inf)
        if self.is_flat or not servers.size:
            return out
        if self.is_tree:
            return self._tree_free(a, servers, link_free)
        rest = servers != a
        if self._by_rack:
            if self._leaf_hub is None:
                self._build_leaves()
            ha = int(self._leaf_hub[a])
            hubs = self._leaf_hub[servers]
            grouped = rest & (hubs >= 0) & (ha >= 0)
            if grouped.any():
                out[grouped] = self._leaf_free(a, ha, servers[grouped], hubs[grouped],
                                               link_free, k)
            rest &= ~grouped
        for i in np.flatnonzero(rest).tolist():
            b = int(servers[i])
            out[i] = max(link_free[p].min(initial=np.inf) for p in self.k_paths(a, b, k))
        return out

    def _tree_free(self, a: int, servers: np.ndarray, link_free: np.ndarray) -> np.ndarray:
        """Bottleneck free bandwidth of the tree paths from ``a`` to ``servers``: each
        server's chain of uplinks (:attr:`server_ancestors`) below the part it shares with
        ``a``'s, and the same part of ``a``'s chain."""
        lf = np.append(link_free, np.inf)  # index -1 (a chain's padding) reads inf
        mine = self.server_ancestors[a]
        mine = mine[mine >= 0]
        theirs = self.server_ancestors[servers]
        shared = np.isin(theirs, mine) & (theirs >= 0)
        # theirs: the links below the shared top; mine: the first len(mine) - shared ones
        their_min = np.where(shared, np.inf, lf[theirs]).min(axis=1, initial=np.inf)
        below = mine.size - shared.sum(axis=1)
        prefix = np.minimum.accumulate(np.append(np.inf, lf[mine]))  # prefix[j]: first j
        out = np.minimum(their_min, prefix[below])
        out[servers == a] = np.inf
        return out

    def _leaf_free(self, a: int, ha: int, servers: np.ndarray, hubs: np.ndarray,
                   link_free: np.ndarray, k: int) -> np.ndarray:
        """:meth:`free_bandwidths` from leaf ``a`` (on switch ``ha``) to leaves ``servers``
        (on ``hubs``), none of them ``a``: per (switch, side of ``a``) group, the best of
        ``min(a's host link, the middle of a path)`` over the paths :meth:`k_paths` gives
        (the middle is looked up from the lower-indexed server's switch, as there), then
        the minimum with each server's own host link."""
        up = float(link_free[self._host_link[a]])
        after = servers > a
        keys, inverse = np.unique(hubs * 2 + after, return_inverse=True)
        best = np.empty(keys.shape[0])
        for g, key in enumerate(keys.tolist()):
            hb, later = key >> 1, key & 1
            if hb == ha:  # one switch: the only path is the two host links
                best[g] = up
                continue
            mids = self._rack_paths(ha, hb, k) if later else self._rack_paths(hb, ha, k)
            best[g] = max(min(up, link_free[m].min(initial=np.inf)) for m in mids)
        return np.minimum(best[inverse.reshape(-1)], link_free[self._host_link[servers]])

    def _rack_paths(self, ha: int, hb: int, k: int) -> tuple[np.ndarray, ...]:
        """Links of the k shortest paths from switch ``ha`` to ``hb`` between two leaves."""
        key = (ha, hb, k)
        hit = self._rack_cache.get(key)
        if hit is not None:
            self._rack_cache.move_to_end(key)
            self.hits += 1
            return hit
        self.misses += 1
        self.searches += 1
        if self._core_adj is None:
            self._build_core()
        nodes, li = self.nodes, self.topology.link_indices()
        mids = tuple(
            np.fromiter((li[(nodes[u], nodes[v])] for u, v in pairwise(p[1:-1])),
                        dtype=np.int64, count=len(p) - 3)
            for p in _k_shortest_leaf_pair(self._core_adj, self._hidden, ha, hb, k))
        self._rack_cache[key] = mids
        if len(self._rack_cache) > self.cache_size:
            self._rack_cache.popitem(last=False)
        return mids

    def _pair_paths(self, lo: int, hi: int, k: int) -> tuple[np.ndarray, ...]:
        """networkx's k shortest paths between servers ``lo`` < ``hi``, cached per pair."""
        key = (lo, hi, k)
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            self.hits += 1
            return hit
        self.misses += 1
        src = self.nodes[self.server_node[lo]]
        dst = self.nodes[self.server_node[hi]]
        li = self.topology.link_indices()
        hub = self._hub(src)
        if hub is not None and hub == self._hub(dst):
            # two servers whose one link goes to the same switch (a rack's servers): the
            # only simple path between them is through it (no search of the whole graph)
            paths = (_frozen(np.array([li[(src, hub)], li[(hub, dst)]], dtype=np.int64)),)
        else:
            self.searches += 1
            paths = tuple(
                _frozen(np.fromiter((li[e] for e in pairwise(p)), dtype=np.int64,
                                    count=len(p) - 1))
                for p in islice(nx.shortest_simple_paths(self.topology.graph, src, dst), k)
            )
        self._cache[key] = paths
        if len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return paths

    def _build_leaves(self) -> None:
        """Each server's switch and host link where it is a leaf, from the link list.

        ``_leaf_hub[s]`` is the node index of server ``s``'s one neighbour when that is a
        switch (-1 otherwise) and ``_host_link[s]`` the link to it; ``_degree`` is each
        node's number of links.
        """
        n = len(self.nodes)
        ends = self.topology.link_ends()  # node indices: graph order is this order
        degree = np.bincount(ends.ravel(), minlength=n)
        other = np.full(n, -1, dtype=np.int64)
        link = np.full(n, -1, dtype=np.int64)
        for col in (0, 1):  # a leaf's one link: its other end and its index
            at = np.flatnonzero(degree[ends[:, col]] == 1)
            other[ends[at, col]] = ends[at, 1 - col]
            link[ends[at, col]] = at
        hub = other[self.server_node]
        hub[(hub < 0) | (self.node_server[np.maximum(hub, 0)] >= 0)] = -1
        self._degree = _frozen(degree)
        self._host_link = _frozen(np.where(hub >= 0, link[self.server_node], -1))
        self._leaf_hub = _frozen(hub)

    def _build_core(self) -> None:
        """The graph without its leaves, for :func:`_k_shortest_leaf_pair`.

        ``_core_adj[v]`` lists the neighbours of node ``v`` of degree two or more in the
        graph's adjacency order; ``_hidden[v]`` counts its neighbours of degree one (servers
        or switches), which the search keeps only as a number. Only nodes that are not
        leaves are visited.
        """
        g, idx, nodes = self.topology.graph, self._node_index, self.nodes
        leaf = (self._degree == 1).tolist()
        adj: list[list[int]] = [[] for _ in nodes]
        hidden = [0] * len(nodes)
        for v in np.flatnonzero(self._degree != 1).tolist():
            nb = [idx[w] for w in g.adj[nodes[v]]]
            adj[v] = [w for w in nb if not leaf[w]]
            hidden[v] = len(nb) - len(adj[v])
        self._core_adj, self._hidden = adj, hidden

    def leaf_servers(self) -> frozenset:
        """Graph nodes of the servers with exactly one link (computed once)."""
        if self._leaf_servers is None:
            if self._leaf_hub is None:
                self._build_leaves()
            one = self._degree[self.server_node] == 1
            self._leaf_servers = frozenset(compress(self.topology.servers, one.tolist()))
        return self._leaf_servers

    def adjacency(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every node's neighbours in the graph's adjacency order, as CSR arrays ``(ptr,
        nbr, link)``: node ``u``'s neighbours are ``nbr[ptr[u]:ptr[u + 1]]`` (node indices)
        and ``link[ptr[u]:ptr[u + 1]]`` the links to them. Read-only, made once: the
        neighbour labels are looked up in one pass, each link index found by sorting the
        link ends, not per pair."""
        if self._adjacency is None:
            g, n = self.topology.graph, len(self.nodes)
            rows = list(g.adjacency())
            if [u for u, _ in rows] != self.nodes:
                rows = [(u, g.adj[u]) for u in self.nodes]  # (the node order differs)
            deg = np.fromiter((len(d) for _, d in rows), dtype=np.int64, count=n)
            ptr = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(deg, out=ptr[1:])
            nbr = np.fromiter(map(self._node_index.__getitem__,
                                  chain.from_iterable(d for _, d in rows)),
                              dtype=np.int64, count=int(ptr[-1]))
            # the link between u and v: its ends' key u·n + v, in either direction
            ends = self.topology.link_ends()
            keys = np.concatenate([ends[:, 0] * n + ends[:, 1], ends[:, 1] * n + ends[:, 0]])
            ids = np.tile(np.arange(ends.shape[0], dtype=np.int64), 2)
            order = np.argsort(keys, kind="stable")
            at = np.searchsorted(keys[order], np.repeat(np.arange(n), deg) * n + nbr)
            link = ids[order][at] if at.size else np.zeros(0, dtype=np.int64)
            self._adjacency = (_frozen(ptr), _frozen(nbr), _frozen(link))
        return self._adjacency

    def neighbour_lists(self) -> tuple[list[list[tuple[int, int]]], list[dict[int, int]],
                                       list[bool]]:
        """Every node's ``(neighbour, link)`` pairs in the graph's adjacency order (node
        indices, as :meth:`adjacency`), the same as a ``{neighbour: link}`` mapping per
        node, and whether each node is a server with one link (:meth:`leaf_servers`): Python
        lists for a search that visits a few nodes of a large network (made once)."""
        if self._neighbour_lists is None:
            ptr, nbr, link = (a.tolist() for a in self.adjacency())
            lists = [list(zip(nbr[ptr[u]:ptr[u + 1]], link[ptr[u]:ptr[u + 1]], strict=True))
                     for u in range(len(self.nodes))]
            leaves = self.leaf_servers()
            self._neighbour_lists = (lists, [dict(x) for x in lists],
                                     [v in leaves for v in self.nodes])
        return self._neighbour_lists

    def leaf_mask(self) -> np.ndarray:
        """Whether each node is a server with one link, as a read-only bool array (the
        third list of :meth:`neighbour_lists`; made once)."""
        if self._leaf_mask is None:
            self._leaf_mask = _frozen(np.array(self.neighbour_lists()[2], dtype=np.bool_))
        return self._leaf_mask

    def _hub(self, node: Any) -> Any:
        """The one neighbour of graph node ``node``, or None when it has another number."""
        adj = self.topology.graph.adj[node]
        if len(adj) != 1:
            return None
        return next(iter(adj))

    def cache_info(self) -> dict[str, int]:
        """Hits, misses and size of the k-paths caches, and the searches run.

        A hit or a miss is a query of a rack-pair entry (two leaf servers on different
        switches) or of a per-server-pair entry (any other two servers); two leaves of one
        switch are answered without either. ``searches`` counts k-shortest-path searches.
        """
        return {"hits": self.hits, "misses": self.misses,
                "size": len(self._cache) + len(self._rack_cache), "maxsize": self.cache_size,
                "searches": self.searches}

    def cache_clear(self) -> None:
        self._cache.clear()
        self._rack_cache.clear()
        self.hits = self.misses = self.searches = 0

    # ------------------------------------------------------------------ tree structure
    def uplink(self, node: int) -> int:
        """Link index from node ``node`` (a node index) to its parent; -1 for the root."""
        self._need_tree()
        return int(self.uplinks[node])

    def children(self, node: int) -> np.ndarray:
        """Node indices of the children of ``node`` in the rooted tree."""
        self._need_tree()
        return self._children[node]

    def subtree_servers(self, node: int) -> np.ndarray:
        """Server indices (ascending) in the subtree below node ``node``, itself included."""
        self._need_tree()
        return self._subtree[node]

    def _build_tree(self) -> None:
        g = self.topology.graph
        n = len(self.nodes)
        switches = np.flatnonzero(self.node_server < 0)
        if switches.size:
            self.root = int(switches[np.argmax(self.node_tier[switches])])
        else:
            self.root = int(self.server_node[0])
        parent = np.full(n, -1, dtype=np.int64)
        depth = np.zeros(n, dtype=np.int64)
        uplinks = np.full(n, -1, dtype=np.int64)
        children: list[list[int]] = [[] for _ in range(n)]
        li = self.topology.link_indices()
        seen = np.zeros(n, dtype=bool)
        seen[self.root] = True
        queue = deque([self.root])
        while queue:
            u = queue.popleft()
            for nb in g.adj[self.nodes[u]]:
                v = self._node_index[nb]
                if not seen[v]:
                    seen[v] = True
                    parent[v], depth[v] = u, depth[u] + 1
                    uplinks[v] = li[(nb, self.nodes[u])]
                    children[u].append(v)
                    queue.append(v)
        self.parent, self.depth, self.uplinks = _frozen(parent), _frozen(depth), _frozen(uplinks)
        self._children = [_frozen(np.array(c, dtype=np.int64)) for c in children]
        n_srv = self.topology.n_servers
        self.height = int(depth[self.server_node].max()) if n_srv else 0
        anc = np.full((n_srv, self.height), -1, dtype=np.int64)
        anc_nodes = np.full((n_srv, self.height), -1, dtype=np.int64)
        self._up: list[tuple[int, ...]] = []
        below: list[list[int]] = [[] for _ in range(n)]
        for s, v in enumerate(self.server_node.tolist()):
            below[v].append(s)
            chain = []
            j = 0
            while parent[v] >= 0:
                anc[s, j], anc_nodes[s, j] = uplinks[v], parent[v]
                chain.append(int(uplinks[v]))
                v = int(parent[v])
                below[v].append(s)
                j += 1
            self._up.append(tuple(chain))
        #: (n_servers, height): link from each server up to its rack, rack to pod, ...; -1 pad
        self.server_ancestors = _frozen(anc)
        #: (n_servers, height): the upper node of each link in :attr:`server_ancestors`
        self.server_ancestor_nodes = _frozen(anc_nodes)
        self._subtree = [_frozen(np.array(sorted(b), dtype=np.int64)) for b in below]

    # ------------------------------------------------------------------ checks
    def _need_tree(self) -> None:
        if not self.is_tree:
            raise ValueError(f"topology {self.topology.name!r} is not a tree")

    def _check(self, a: int, b: int) -> None:
        n = self.topology.n_servers
        if not (0 <= a < n and 0 <= b < n):
            raise IndexError(f"server index out of range 0..{n - 1}: ({a}, {b})")


# ---------------------------------------------------------------------------- search
_SRC, _DST = -1, -2  # the two leaf servers of a search, as nodes of the leafless graph


def _k_shortest_leaf_pair(adj: list[list[int]], hidden: list[int], ha: int, hb: int,
                          k: int) -> list[list[int]]:
    """The first ``k`` paths of :func:`networkx.shortest_simple_paths` between two leaves.

    The leaves are servers ``_SRC`` on switch ``ha`` and ``_DST`` on switch ``hb`` (ha !=
    hb); ``adj``/``hidden`` are the graph without its leaves (degree-one nodes) and the
    number of leaves each node had. Paths are node lists ``[_SRC, ha, ..., hb, _DST]``.

    This is networkx's code (Yen's algorithm over its ``_bidirectional_pred_succ``, the
    same from networkx 3.2 to 3.6) with the leaves counted instead of listed. Why that
    yields networkx's paths in networkx's order, for any two servers s on ``ha`` and t on
    ``hb``:

    * Every path Yen keeps runs from s to t, so no other leaf x is on one: x is never a
      spur root, never in ``ignore_nodes``, and its one edge never in ``ignore_edges``.
    * In a BFS, x is found only from its neighbour v. v is expanded by one side only (a
      node in both ``pred`` and ``succ`` ends the search when the second side reaches it),
      so x is then in neither dictionary: it is appended to the new fringe and ends
      nothing. When x's own turn comes its one neighbour v is already on x's side, and not
      on the other (as before): nothing is appended and nothing ends. So x changes the
      search only through the fringe lengths the BFS compares to choose a side, which
      ``hidden`` supplies (a fringe of leaves only is still non-empty, as in networkx).
    * s is in ``pred`` from the first step (or, in a spur search, in ``ignore_nodes``, or
      its edge ignored when it is the spur root), so expanding ``ha`` never appends it,
      whatever its place among ``ha``'s neighbours: ``ha`` hides ``hidden[ha] - 1`` others.
      The reverse side never expands ``ha``: it is in ``pred`` (or ignored) from the first
      step. t ends the search when the forward side reaches it from ``hb``; until then
      ``succ`` is ``{t}`` (had the reverse side expanded t, reaching ``hb`` would have
      ended the search first), so t's place among ``hb``'s neighbours does not matter
      either; appending it last is exact. ``hb`` hides ``hidden[hb] - 1`` others.

    So s and t are interchangeable with any other leaf of their switch: the middle of each
    path, ``ha .. hb``, is the same for every server of the two racks (the rack-pair key).
    ``tests/test_paths.py`` checks the result against networkx on every shipped topology
    and on random graphs with tied paths.
    """
    def expand_count(v: int) -> int:
        return hidden[v] - (v == ha) - (v == hb)

    def neighbours(v: int) -> list[int]:
        if v == _SRC:
            return [ha]
        if v == _DST:
            return [hb]
        if v == hb:
            return adj[v] + [_DST]
        return adj[v]

    def bfs(source: int, ignore_nodes: set, ignore_edges: set) -> list[int] | None:
        """networkx's ``_bidirectional_shortest_path`` from ``source`` to ``_DST``."""
        target = _DST
        if ignore_nodes and (source in ignore_nodes or target in ignore_nodes):
            return None
        pred: dict[int, int | None] = {source: None}
        succ: dict[int, int | None] = {target: None}
        forward, n_forward = [source], 0  # listed nodes, hidden leaves
        reverse, n_reverse = [target], 0
        meet = None
        while (forward or n_forward) and (reverse or n_reverse):
            if len(forward) + n_forward <= len(reverse) + n_reverse:
                level, forward, n_forward = forward, [], 0
                mine, other, fringe = pred, succ, forward
            else:
                level, reverse, n_reverse = reverse, [], 0
                mine, other, fringe = succ, pred, reverse
            hid = 0
            for v in level:
                hid += expand_count(v) if v >= 0 else 0
                for w in neighbours(v):
                    if w in ignore_nodes or (v, w) in ignore_edges or (w, v) in ignore_edges:
                        continue
                    if w not in mine:
                        fringe.append(w)
                        mine[w] = v
                    if w in other:
                        meet = w
                        break
                if meet is not None:
                    break
            if meet is not None:
                break
            if fringe is forward:
                n_forward = hid
            else:
                n_reverse = hid
        if meet is None:
            return None
        path = []
        w = meet
        while w is not None:
            path.append(w)
            w = succ[w]
        w = pred[path[0]]
        while w is not None:
            path.insert(0, w)
            w = pred[w]
        return path

    found: list[list[int]] = []
    heap: list[tuple[int, int, list[int]]] = []
    queued: set[tuple[int, ...]] = set()
    counter = 0

    def push(cost: int, path: list[int]) -> None:
        nonlocal counter
        key = tuple(path)
        if key not in queued:
            heappush(heap, (cost, counter, path))
            counter += 1
            queued.add(key)

    prev: list[int] | None = None
    while len(found) < k:
        if prev is None:
            path = bfs(_SRC, set(), set())
            if path is None:
                raise nx.NetworkXNoPath("no path between the two servers")
            push(len(path), path)
        else:
            ignore_nodes: set[int] = set()
            ignore_edges: set[tuple[int, int]] = set()
            for i in range(1, len(prev)):
                root = prev[:i]
                for p in found:
                    if p[:i] == root:
                        ignore_edges.add((p[i - 1], p[i]))
                spur = bfs(root[-1], ignore_nodes, ignore_edges)
                if spur is not None:
                    push(i + len(spur), root[:-1] + spur)
                ignore_nodes.add(root[-1])
        if not heap:
            break
        path = heappop(heap)[2]
        queued.discard(tuple(path))
        found.append(path)
        prev = path
    return found
