"""Paths between servers as arrays of link indices, for bandwidth checks and reservations.

On a tree the path between two servers is unique: :class:`PathService` roots the tree at a
switch of maximal tier, precomputes each server's chain of uplinks, and answers a query by
stripping the common top of two chains (the part above the lowest common ancestor), with
no graph search. It also exposes the rooted tree as numpy arrays (``parent``, ``depth``,
``uplinks``, ``server_ancestors``) for hose-model embedders.

On general graphs (Fabric, optical) paths are the first ``k`` shortest simple paths by hop
count (:func:`networkx.shortest_simple_paths`; ties in the graph's insertion order, so
deterministic), cached per unordered server pair in a bounded LRU.

A path's links are listed from the lower-indexed server to the higher, so
``links_between(a, b)`` equals ``links_between(b, a)``. A topology without links (``flat``)
does not model the network: every path there is empty.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from itertools import islice, pairwise
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
        self.server_node = _frozen(
            np.array([self._node_index[s] for s in topology.servers], dtype=np.int64))
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
        self.hits = 0
        self.misses = 0
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

        The arrays are cached and read-only. On a tree this is the single path.
        """
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        self._check(a, b)
        if a == b or self.is_flat:
            return [_EMPTY]
        if self.is_tree:
            return [self.links_between(a, b)]
        key = (min(a, b), max(a, b), k)
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            self.hits += 1
            return list(hit)
        self.misses += 1
        src = self.nodes[self.server_node[key[0]]]
        dst = self.nodes[self.server_node[key[1]]]
        li = self.topology._link_index
        hub = self._hub(src)
        if hub is not None and hub == self._hub(dst):
            # two servers whose one link goes to the same switch (a rack's servers): the
            # only simple path between them is through it (no search of the whole graph)
            paths = (_frozen(np.array([li[(src, hub)], li[(hub, dst)]], dtype=np.int64)),)
        else:
            paths = tuple(
                _frozen(np.fromiter((li[e] for e in pairwise(p)), dtype=np.int64,
                                    count=len(p) - 1))
                for p in islice(nx.shortest_simple_paths(self.topology.graph, src, dst), k)
            )
        self._cache[key] = paths
        if len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return list(paths)

    def _hub(self, node: Any) -> Any:
        """The one neighbour of graph node ``node``, or None when it has another number."""
        adj = self.topology.graph.adj[node]
        if len(adj) != 1:
            return None
        return next(iter(adj))

    def cache_info(self) -> dict[str, int]:
        """Hits, misses and size of the k-paths cache."""
        return {"hits": self.hits, "misses": self.misses, "size": len(self._cache),
                "maxsize": self.cache_size}

    def cache_clear(self) -> None:
        self._cache.clear()
        self.hits = self.misses = 0

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
        li = self.topology._link_index
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
