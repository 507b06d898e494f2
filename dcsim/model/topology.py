"""A datacenter topology: servers with resource vectors, switches in tiers, links with capacity.

A :class:`Topology` is an immutable, indexed view of a :mod:`networkx` graph. Servers and links
get dense integer indices so that cluster state lives in numpy arrays (see
:mod:`dcsim.model.state`). Builders for the published topologies live in
:mod:`dcsim.model.topologies`.

Graph conventions (also the format of user topology files):

* every node has ``kind`` = ``"server"`` or ``"switch"`` and an integer ``tier``
  (servers 0, rack/ToR switches 1, aggregation/fabric 2, core/spine 3, ...);
* servers carry one numeric attribute per resource (``cpu``, ``mem``, ...), and optionally
  ``rack`` and ``pod`` group ids used for the locality level of a placement;
* every edge has a numeric ``capacity`` (bandwidth units); its tier is the higher tier of its
  two endpoints (a server-rack link is tier 1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

import networkx as nx
import numpy as np

from dcsim.errors import ConfigError

DEFAULT_RESOURCES = ("cpu", "mem")


@dataclass(eq=False)
class Topology:
    """Servers, switches and links of one datacenter, with dense indices for numpy state."""

    name: str
    graph: nx.Graph
    resources: tuple[str, ...]
    servers: list[Any]
    server_capacity: np.ndarray  # (n_servers, n_resources) float64
    links: list[tuple[Any, Any]]
    link_capacity: np.ndarray  # (n_links,) float64
    link_tier: np.ndarray  # (n_links,) int64, 1 = server-facing
    server_rack: np.ndarray  # (n_servers,) int64, -1 when unknown
    server_pod: np.ndarray  # (n_servers,) int64, -1 when unknown
    tier_names: dict[int, str] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    _server_index: dict[Any, int] = field(default_factory=dict, repr=False)
    _link_index: dict[tuple[Any, Any], int] = field(default_factory=dict, repr=False)
    #: (n_links, 2) int64: each link's two ends as positions in graph order (see link_ends)
    _link_ends: np.ndarray | None = field(default=None, repr=False)
    #: (n_servers,) int64: each server's position in graph order (see server_nodes)
    _server_nodes: np.ndarray | None = field(default=None, repr=False)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_graph(
        cls,
        graph: nx.Graph,
        name: str = "custom",
        resources: Sequence[str] | None = None,
        tier_names: dict[int, str] | None = None,
        params: dict[str, Any] | None = None,
        source: str = "topology",
        allow_disconnected: bool = False,
    ) -> Topology:
        """Index and validate ``graph``; ``source`` names the file or builder in errors.

        ``allow_disconnected`` admits a graph of several components (the ``flat`` topology:
        servers and no network); every other topology must be connected.
        """
        if graph.is_directed():
            graph = graph.to_undirected()
        if graph.number_of_nodes() == 0:
            raise ConfigError(f"{source}: the topology has no nodes")
        servers = [n for n, d in graph.nodes(data=True) if d.get("kind", "switch") == "server"]
        pos = _positions(graph)
        if not servers:
            raise ConfigError(f"{source}: no node has kind='server'")
        if resources is None:
            resources = _infer_resources(graph, servers, source)
        resources = tuple(resources)
        seen = set()
        for r in resources:
            if r in seen:
                raise ConfigError(f"{source}: resources lists {r!r} twice; each resource once")
            seen.add(r)
        cap = np.empty((len(servers), len(resources)), dtype=np.float64)
        for i, n in enumerate(servers):
            d = graph.nodes[n]
            for j, r in enumerate(resources):
                if r not in d:
                    raise ConfigError(f"{source}: server {n!r} has no resource {r!r}")
                v = _number(d[r], f"{source}: server {n!r} resource {r!r}")
                if v < 0:
                    raise ConfigError(f"{source}: server {n!r} resource {r!r} is negative ({v})")
                cap[i, j] = v
        if not allow_disconnected and graph.number_of_nodes() > 1 and not nx.is_connected(graph):
            raise ConfigError(
                f"{source}: the topology is not connected "
                f"({nx.number_connected_components(graph)} components)"
            )
        tiers = []  # in graph order
        for n, d in graph.nodes(data=True):
            default = 0 if d.get("kind", "switch") == "server" else 1
            tiers.append(int(_number(d.get("tier", default), f"{source}: node {n!r} tier")))
        links: list[tuple[Any, Any]] = []
        caps: list[float] = []
        ends: list[int] = []  # each link's two ends' positions, one after the other
        for u, v, d in graph.edges(data=True):
            if "capacity" not in d:
                raise ConfigError(f"{source}: link {u!r}-{v!r} has no 'capacity'")
            c = _number(d["capacity"], f"{source}: link {u!r}-{v!r} capacity")
            if c < 0:
                raise ConfigError(f"{source}: link {u!r}-{v!r} capacity is negative ({c})")
            links.append((u, v))
            caps.append(c)
            ends += (pos[u], pos[v])
        lcap = np.array(caps, dtype=np.float64)
        link_ends = np.array(ends, dtype=np.int64).reshape(-1, 2)
        tier_at = np.array(tiers, dtype=np.int64)
        ltier = np.maximum(tier_at[link_ends[:, 0]], tier_at[link_ends[:, 1]])
        server_nodes = np.fromiter(map(pos.__getitem__, servers), dtype=np.int64,
                                   count=len(servers))
        rack = np.array([int(graph.nodes[n].get("rack", -1)) for n in servers], dtype=np.int64)
        pod = np.array([int(graph.nodes[n].get("pod", -1)) for n in servers], dtype=np.int64)
        topo = cls(
            name=name,
            graph=graph,
            resources=resources,
            servers=servers,
            server_capacity=cap,
            links=links,
            link_capacity=lcap,
            link_tier=ltier,
            server_rack=rack,
            server_pod=pod,
            tier_names=dict(tier_names or {}),
            params=dict(params or {}),
        )
        topo._server_index = {n: i for i, n in enumerate(servers)}
        topo._link_index = {}
        for k, (u, v) in enumerate(links):
            topo._link_index[(u, v)] = k
            topo._link_index[(v, u)] = k
        topo._link_ends, topo._server_nodes = link_ends, server_nodes
        for arr in (cap, lcap, ltier, rack, pod, link_ends, server_nodes):
            arr.flags.writeable = False
        return topo

    # ------------------------------------------------------------------ lookups
    @property
    def n_servers(self) -> int:
        return len(self.servers)

    @property
    def n_links(self) -> int:
        return len(self.links)

    def server_index(self, node: Any) -> int:
        return self._server_index[node]

    def link_index(self, u: Any, v: Any) -> int:
        return self._link_index[(u, v)]

    def link_indices(self) -> Mapping[tuple[Any, Any], int]:
        """Each link's index by its two ends, in either order (``(u, v)`` and ``(v, u)``):
        the mapping :meth:`link_index` looks up, for loops over many links (read it, never
        change it)."""
        return self._link_index

    def link_ends(self) -> np.ndarray:
        """Each link's two ends (as :attr:`links` lists them) as positions in graph order
        (``list(graph)``): an (n_links, 2) int64 array, read-only."""
        if self._link_ends is None:
            pos = _positions(self.graph)
            ends = np.fromiter(map(pos.__getitem__, chain.from_iterable(self.links)),
                               dtype=np.int64, count=2 * len(self.links)).reshape(-1, 2)
            ends.flags.writeable = False
            self._link_ends = ends
        return self._link_ends

    def server_nodes(self) -> np.ndarray:
        """Each server's position in graph order (``list(graph)``): an (n_servers,) int64
        array, read-only."""
        if self._server_nodes is None:
            pos = _positions(self.graph)
            at = np.fromiter(map(pos.__getitem__, self.servers), dtype=np.int64,
                             count=len(self.servers))
            at.flags.writeable = False
            self._server_nodes = at
        return self._server_nodes

    def link_servers(self) -> np.ndarray:
        """Each link's two ends (as :attr:`links` lists them) as server indices, -1 where
        an end is a switch: an (n_links, 2) int64 array, read-only (cached)."""
        cached = self.__dict__.get("_dcsim_link_servers")
        if cached is None:
            node_server = np.full(self.graph.number_of_nodes(), -1, dtype=np.int64)
            node_server[self.server_nodes()] = np.arange(self.n_servers)
            cached = node_server[self.link_ends()]
            cached.flags.writeable = False
            self._dcsim_link_servers = cached
        return cached

    def resource_index(self, name: str) -> int:
        return self.resources.index(name)

    def tiers(self) -> list[int]:
        """Link tiers present, ascending (1 = server-facing)."""
        return sorted({int(t) for t in self.link_tier})

    def tier_name(self, tier: int) -> str:
        return self.tier_names.get(tier, f"tier{tier}")

    def tier_label(self, tier: int) -> str:
        """The tier's name as a column suffix (``util_bw_<label>``): ``-`` and spaces
        become ``_``."""
        return self.tier_name(tier).replace("-", "_").replace(" ", "_")

    def is_tree(self) -> bool:
        return nx.is_tree(self.graph)

    def total_capacity(self) -> np.ndarray:
        return self.server_capacity.sum(axis=0)

    def locality(self, servers: np.ndarray) -> int:
        """0 = one server, 1 = one rack, 2 = one pod, 3 = across pods (-1 if unknown)."""
        if len(servers) <= 1:
            return 0
        racks = self.server_rack[servers]
        if racks[0] >= 0 and np.all(racks == racks[0]):
            return 1
        pods = self.server_pod[servers]
        if pods[0] < 0:
            return -1
        return 2 if np.all(pods == pods[0]) else 3

    # ------------------------------------------------------------------ racks and pods
    # Membership comes from the servers' ``rack`` and ``pod`` ids (:attr:`server_rack`,
    # :attr:`server_pod`; -1 where a server has none); the rack's switches and uplinks from
    # the links. Each table is built once, vectorised, and cached on the topology.
    def racks(self) -> np.ndarray:
        """The rack ids that some server has, ascending (int64, read-only; empty on a
        topology without racks, e.g. ``flat``)."""
        return self._membership("rack")[0]

    def pods(self) -> np.ndarray:
        """The pod ids that some server has, ascending (int64, read-only)."""
        return self._membership("pod")[0]

    def rack_of(self, servers: Any) -> Any:
        """The rack id of a server index (an int), or of each of an index array (-1: none).
        The same as ``server_rack[servers]``."""
        return _ids_at(self.server_rack, servers)

    def pod_of(self, servers: Any) -> Any:
        """The pod id of a server index (an int), or of each of an index array (-1: none)."""
        return _ids_at(self.server_pod, servers)

    def rack_servers(self, rack: int) -> np.ndarray:
        """The servers (indices, ascending) whose rack id is ``rack``: empty when none has
        it; ``-1`` gives the servers without a rack. Read-only."""
        return _members(self._membership("rack"), rack)

    def pod_servers(self, pod: int) -> np.ndarray:
        """The servers (indices, ascending) whose pod id is ``pod``. Read-only."""
        return _members(self._membership("pod"), pod)

    def pod_racks(self, pod: int) -> np.ndarray:
        """The rack ids of the servers of pod ``pod``, ascending (no -1). Read-only."""
        table = self.__dict__.get("_dcsim_pod_racks")
        if table is None:
            keep = (self.server_rack >= 0) & (self.server_pod >= 0)
            pairs = np.unique(np.stack([self.server_pod[keep], self.server_rack[keep]]), axis=1)
            table = _table(pairs[0], pairs[1])
            self._dcsim_pod_racks = table
        keys, ptr, values = table
        at = int(np.searchsorted(keys, pod))
        if at == keys.size or keys[at] != pod:
            return _NO_IDS
        return values[ptr[at]:ptr[at + 1]]

    def rack_switches(self, rack: int) -> list[Any]:
        """The switches (graph nodes, in graph order) with a link to a server of rack
        ``rack``: its ToR on the built-in topologies (``r<rack>``)."""
        nodes = self._rack_tables()[0]
        at = self._rack_at(rack)
        if at < 0:
            return []
        graph_nodes = self.__dict__.get("_dcsim_graph_nodes")
        if graph_nodes is None:
            graph_nodes = self._dcsim_graph_nodes = list(self.graph)
        return [graph_nodes[v] for v in nodes[1][nodes[0][at]:nodes[0][at + 1]].tolist()]

    def rack_uplinks(self, rack: int) -> np.ndarray:
        """The link indices (ascending, read-only) leaving rack ``rack`` upward: every link
        between one of its :meth:`rack_switches` and a switch that is not one of them (a
        link to a server is never an uplink). On a fat tree the ToR's one link to its pod
        switch; on a Fabric or optical topology the ToR's link to each tier-2 switch of its
        pod. Empty for a rack id no server has."""
        at = self._rack_at(rack)
        if at < 0:
            return _NO_IDS
        ptr, links = self._rack_tables()[1]
        return links[ptr[at]:ptr[at + 1]]

    def rack_uplink_table(self) -> tuple[np.ndarray, np.ndarray]:
        """Every rack's uplinks at once, as CSR arrays ``(ptr, links)``: the uplinks of rack
        ``racks()[i]`` are ``links[ptr[i]:ptr[i + 1]]`` (read-only). For per-rack sums
        without a loop, e.g. the free uplink bandwidth of every rack:
        ``np.add.reduceat(np.append(link_free[links], 0), ptr[:-1])`` where no rack's list
        is empty (``np.diff(ptr) > 0``)."""
        return self._rack_tables()[1]

    def _rack_at(self, rack: int) -> int:
        """The position of rack id ``rack`` in :meth:`racks`, -1 when no server has it."""
        racks = self.racks()
        at = int(np.searchsorted(racks, rack))
        return at if at < racks.size and racks[at] == rack else -1

    def _membership(self, what: str
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(public ids, ids, ptr, servers)`` for ``rack`` or ``pod``: the servers with id
        ``ids[i]`` are ``servers[ptr[i]:ptr[i + 1]]``, ascending; ``ids`` may start with -1
        (servers without one), the public ids (:meth:`racks`, :meth:`pods`) do not."""
        key = f"_dcsim_{what}_members"
        table = self.__dict__.get(key)
        if table is None:
            ids = self.server_rack if what == "rack" else self.server_pod
            keys, ptr, servers = _table(ids, np.arange(self.n_servers, dtype=np.int64))
            public = keys[keys >= 0]
            public.flags.writeable = False
            table = (public, keys, ptr, servers)
            setattr(self, key, table)
        return table

    def _rack_tables(self) -> tuple[tuple[np.ndarray, np.ndarray],
                                    tuple[np.ndarray, np.ndarray]]:
        """CSR tables over :meth:`racks`: each rack's switches (graph positions) and its
        uplinks (link indices), built from the link ends in one vectorised pass."""
        cached = self.__dict__.get("_dcsim_rack_tables")
        if cached is not None:
            return cached
        racks = self.racks()
        n_nodes = self.graph.number_of_nodes()
        ends = self.link_ends()
        link_srv = self.link_servers()
        # (rack position, switch) for every server-switch link of a server with a rack
        sw_rack, sw_node = [], []
        for col in (0, 1):
            s, w = link_srv[:, col], link_srv[:, 1 - col]
            keep = (s >= 0) & (w < 0)
            keep[keep] = self.server_rack[s[keep]] >= 0
            sw_rack.append(np.searchsorted(racks, self.server_rack[s[keep]]))
            sw_node.append(ends[keep, 1 - col])
        pair = np.unique(np.concatenate(sw_rack) * n_nodes + np.concatenate(sw_node))
        p_rack, p_node = pair // n_nodes, pair % n_nodes
        switches = _csr(p_rack, p_node, racks.size)
        # uplinks: a switch-switch link (u, v) with u a switch of the rack and v not one
        by_node = np.argsort(p_node, kind="stable")  # the racks of each switch
        node_keys = p_node[by_node]
        up_rack, up_link = [], []
        both = np.flatnonzero((link_srv[:, 0] < 0) & (link_srv[:, 1] < 0))
        for col in (0, 1):
            u, v = ends[both, col], ends[both, 1 - col]
            lo = np.searchsorted(node_keys, u, side="left")
            hi = np.searchsorted(node_keys, u, side="right")
            count = hi - lo
            link = np.repeat(both, count)
            start = np.repeat(lo - np.cumsum(count) + count, count)
            rack = p_rack[by_node[start + np.arange(int(count.sum()))]]
            other = np.repeat(v, count)
            inside = np.isin(rack * n_nodes + other, pair)
            up_rack.append(rack[~inside])
            up_link.append(link[~inside])
        upl = np.unique(np.concatenate(up_rack) * max(self.n_links, 1)
                        + np.concatenate(up_link))
        uplinks = _csr(upl // max(self.n_links, 1), upl % max(self.n_links, 1), racks.size)
        cached = self._dcsim_rack_tables = (switches, uplinks)
        return cached

    def describe(self) -> dict[str, Any]:
        """Counts for logs and manifests."""
        return {
            "name": self.name,
            "servers": self.n_servers,
            "switches": self.graph.number_of_nodes() - self.n_servers,
            "links": self.n_links,
            "resources": list(self.resources),
            **self.params,
        }


_NO_IDS = np.zeros(0, dtype=np.int64)
_NO_IDS.flags.writeable = False


def _ids_at(ids: np.ndarray, servers: Any) -> Any:
    """``ids[servers]``: an int for one server index, an int64 array for an index array."""
    if isinstance(servers, (int, np.integer)):
        return int(ids[servers])
    return ids[np.asarray(servers, dtype=np.int64)]


def _table(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(unique keys, ptr, values)``: the values of ``keys == uniq[i]`` are
    ``values[ptr[i]:ptr[i + 1]]``, in their order in ``values``. Read-only arrays."""
    order = np.argsort(keys, kind="stable")
    uniq, counts = np.unique(keys, return_counts=True)
    ptr = np.zeros(uniq.size + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    out = (uniq.astype(np.int64), ptr, values[order].astype(np.int64))
    for a in out:
        a.flags.writeable = False
    return out


def _members(table: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], key: int
             ) -> np.ndarray:
    """The values of ``key`` in a :meth:`Topology._membership` table (empty if absent)."""
    _, keys, ptr, values = table
    at = int(np.searchsorted(keys, key))
    if at == keys.size or keys[at] != key:
        return _NO_IDS
    return values[ptr[at]:ptr[at + 1]]


def _csr(rows: np.ndarray, values: np.ndarray, n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """``(ptr, values)`` of (row, value) pairs sorted by row then value: row ``i``'s values
    are ``values[ptr[i]:ptr[i + 1]]``. Read-only arrays."""
    ptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n_rows), out=ptr[1:])
    vals = np.asarray(values, dtype=np.int64)
    for a in (ptr, vals):
        a.flags.writeable = False
    return ptr, vals


def _positions(graph: nx.Graph) -> dict[Any, int]:
    """Each node's position in graph order (``list(graph)``)."""
    return dict(zip(graph, range(graph.number_of_nodes()), strict=True))


def _number(value: Any, what: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{what} is not a number: {value!r}") from None
    if not np.isfinite(v):
        raise ConfigError(f"{what} is not finite: {value!r}")
    return v


_NODE_KEYS = {"kind", "tier", "rack", "pod", "label", "name", "id", "type"}


def _infer_resources(graph: nx.Graph, servers: list[Any], source: str) -> tuple[str, ...]:
    """The resources are the numeric attributes every server has (cpu, mem first)."""
    common: set[str] | None = None
    for n in servers:
        keys = {k for k, v in graph.nodes[n].items() if k not in _NODE_KEYS}
        common = keys if common is None else common & keys
    if not common:
        raise ConfigError(f"{source}: servers have no resource attributes (e.g. cpu, mem)")
    ordered = [r for r in DEFAULT_RESOURCES if r in common]
    ordered += sorted(common - set(DEFAULT_RESOURCES))
    return tuple(ordered)
