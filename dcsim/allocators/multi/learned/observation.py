"""The Nara policy's observation: the topology as a graph layout (nodes, edges, the
server rows), and :class:`Observer`, which computes node, edge and global features from the
live state during a multi-server allocation (feature versions 1 and 2)."""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from dcsim.allocators.multi.step import Partial, path_service
from dcsim.model import StateView, Topology
from dcsim.model.state import EPS

#: Bumped whenever :func:`observe` changes meaning; checkpoints record the version they saw.
#: The newest; :data:`FEATURE_VERSIONS` are all that :class:`Observer` still computes.
FEATURE_VERSION = 2
FEATURE_VERSIONS = (1, 2)
RATIO_CLIP = 10.0
#: feature version 2's edge column: free / bandwidth is clipped to this many pairs
PAIR_CLIP = 32.0
#: feature version 2's global column: servers chosen / this
CHOSEN_SCALE = 16.0


# --------------------------------------------------------------------------- graph layout
@dataclass(eq=False)
class GraphLayout:
    """The static graph of a topology as the policy sees it (servers first)."""

    n_servers: int
    n_nodes: int
    edge_index: np.ndarray      # (2, E) int64: source, destination (node indices)
    edge_link: np.ndarray       # (E,) int64: the link of each directed edge
    node_tier: np.ndarray       # (N,) float64: tier / max tier
    incidence: sp.csr_matrix    # (N, L): 1 / degree for each link of a node
    agg: sp.csr_matrix          # (N, N): (I + A) / (1 + degree), the mean over {v} ∪ N(v)
    edge_agg: sp.csr_matrix     # (N, E): 1 / (1 + degree) for each edge into a node
    max_link_capacity: float
    server_links: sp.csr_matrix | None = None  # (S, L): 1 for each link of a server

    @property
    def n_edges(self) -> int:
        return int(self.edge_index.shape[1])


_LAYOUTS: weakref.WeakKeyDictionary[Topology, GraphLayout] = weakref.WeakKeyDictionary()


def graph_layout(topology: Topology) -> GraphLayout:
    """The :class:`GraphLayout` of ``topology`` (cached per topology)."""
    lay = _LAYOUTS.get(topology)
    if lay is not None:
        return lay
    ps = path_service(topology)
    S = topology.n_servers
    switches = [i for i, s in enumerate(ps.node_server.tolist()) if s < 0]
    order = np.concatenate([ps.server_node, np.array(switches, dtype=np.int64)])
    pos = np.empty(len(ps.nodes), dtype=np.int64)  # graph node index -> policy node index
    pos[order] = np.arange(len(order))
    N = len(order)
    L = topology.n_links
    ends = topology.link_ends()  # graph node indices, as ps numbers them
    a, b = pos[ends[:, 0]], pos[ends[:, 1]]
    src = np.concatenate([a, b])
    dst = np.concatenate([b, a])
    links = np.concatenate([np.arange(L), np.arange(L)]).astype(np.int64)
    deg = np.bincount(dst, minlength=N).astype(np.float64)
    tier = ps.node_tier[order].astype(np.float64)
    tier = tier / max(float(tier.max(initial=0.0)), 1.0)
    inc = sp.csr_matrix((1.0 / np.maximum(deg[dst], 1.0), (dst, links)), shape=(N, max(L, 0)))
    w = 1.0 / (1.0 + deg)
    adj = sp.csr_matrix((w[dst], (dst, src)), shape=(N, N))
    agg = (adj + sp.diags(w)).tocsr()
    edge_agg = sp.csr_matrix((w[dst], (dst, np.arange(2 * L))), shape=(N, 2 * L))
    maxcap = float(topology.link_capacity.max(initial=0.0)) or 1.0
    srv = dst < S
    server_links = sp.csr_matrix((np.ones(int(srv.sum())), (dst[srv], links[srv])),
                                 shape=(S, max(L, 0)))
    lay = GraphLayout(n_servers=S, n_nodes=N, edge_index=np.stack([src, dst]),
                      edge_link=links, node_tier=tier, incidence=inc, agg=agg,
                      edge_agg=edge_agg, max_link_capacity=maxcap,
                      server_links=server_links)
    for arr in (lay.edge_index, lay.edge_link, lay.node_tier):
        arr.flags.writeable = False
    _LAYOUTS[topology] = lay
    return lay


def _check_version(features: int) -> int:
    if features not in FEATURE_VERSIONS:
        raise ValueError(f"features version {features!r} is not one of {FEATURE_VERSIONS}")
    return features


def feature_sizes(n_resources: int, features: int = 1) -> tuple[int, int, int]:
    """(node, edge, global) feature counts for ``n_resources`` resources (feature version
    ``features``; version 2 adds one of each)."""
    extra = _check_version(features) - 1
    return 2 * n_resources + 5 + extra, 2 + extra, 2 + 2 * n_resources + extra


def feature_names(resources: tuple[str, ...], features: int = 1) -> dict[str, list[str]]:
    """The feature layout, for the checkpoint JSON."""
    names = _names_v1(resources)
    if _check_version(features) >= 2:
        names["nodes"].append("own links' free / (bandwidth x pairs a new server adds), "
                              f"clipped to {RATIO_CLIP:g}")
        names["edges"].append(f"free / bandwidth, clipped to {PAIR_CLIP:g}, / {PAIR_CLIP:g}")
        names["globals"].append(f"servers chosen / {CHOSEN_SCALE:g}")
    return names


def _names_v1(resources: tuple[str, ...]) -> dict[str, list[str]]:
    return {
        "nodes": [f"{r}_free/remaining" for r in resources]
        + [f"{r}_free/capacity" for r in resources]
        + ["mean link free/max link capacity", "fraction of links that can carry the request",
           "is_server", "selected", "tier/max tier"],
        "edges": ["free/max link capacity", "can carry the request"],
        "globals": ["holding/(2 x mean holding)"] + [f"{r} utilisation" for r in resources]
        + ["bandwidth/max link capacity"] + [f"{r} remaining/demand" for r in resources],
    }


def selected_column(n_resources: int) -> int:
    """The node feature column of the ``selected`` flag."""
    return 2 * n_resources + 3


class Observer:
    """Builds :func:`observe`'s arrays for one topology, with the holding-time scale, in
    feature version ``features`` (module docstring)."""

    def __init__(self, topology: Topology, holding_scale: float | None = None,
                 ratio_clip: float = RATIO_CLIP, features: int = 1):
        self.features = _check_version(features)
        self.topology = topology
        self.layout = graph_layout(topology)
        self.ratio_clip = float(ratio_clip)
        self.holding_scale = holding_scale
        self._dur_sum = 0.0
        self._dur_n = 0
        self._last_request = -1
        R = len(topology.resources)
        self.n_resources = R
        self.sizes = feature_sizes(R, features)
        lay = self.layout
        F = self.sizes[0]
        # the static columns, copied into every observation
        self._base = np.zeros((lay.n_nodes, F), dtype=np.float64)
        self._base[:lay.n_servers, 2 * R + 2] = 1.0
        self._base[:, 2 * R + 4] = lay.node_tier
        self._total_cap = topology.server_capacity.sum(axis=0)
        self._inv_total = np.divide(1.0, self._total_cap, out=np.zeros_like(self._total_cap),
                                    where=self._total_cap > 0)

    def scale_for(self, view: StateView, partial: Partial) -> float:
        """2 × the workload's mean holding time (``holding_scale`` when given; the running
        mean of the holding times seen so far when the workload does not say)."""
        if self.holding_scale is not None:
            return float(self.holding_scale)
        mean = view.workload.mean_duration if view.workload is not None else None
        if mean is not None and np.isfinite(mean) and mean > 0:
            return 2.0 * float(mean)
        rid = partial.request.id
        if rid != self._last_request:
            self._last_request = rid
            self._dur_sum += float(partial.request.duration)
            self._dur_n += 1
        m = self._dur_sum / self._dur_n
        return 2.0 * m if m > 0 else 1.0

    def observe(self, partial: Partial, view: StateView) -> dict[str, np.ndarray]:
        """The unpadded observation arrays (float32 features, int64 edge index, bool mask)."""
        lay = self.layout
        R = self.n_resources
        S = lay.n_servers
        req = partial.request
        rem = partial.remaining
        free = view.free
        x = self._base.copy()
        need = rem > EPS * np.maximum(req.demand, 1.0)
        clip = self.ratio_clip
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(need, free / np.where(need, rem, 1.0), clip)
        np.clip(ratio, 0.0, clip, out=ratio)
        x[:S, :R] = ratio
        x[:S, R:2 * R] = free * view.inv_capacity
        maxcap = lay.max_link_capacity
        if lay.n_edges:
            lf = partial.link_free
            bw = partial.bandwidth
            if partial.reserved is None or bw <= 0:
                ok = np.ones(lf.shape[0], dtype=np.float64)
            else:
                okb = lf >= bw - 0.5 * EPS * np.maximum(view.link_capacity, 1.0)
                if partial.reservation == "union":
                    okb |= partial.reserved > 0
                ok = okb.astype(np.float64)
            lfs = lf / maxcap
            x[:, 2 * R] = lay.incidence @ lfs
            x[:, 2 * R + 1] = lay.incidence @ ok
            e = np.empty((lay.n_edges, self.sizes[1]), dtype=np.float32)
            e[:, 0] = lfs[lay.edge_link]
            e[:, 1] = ok[lay.edge_link]
            if self.features >= 2:
                self._link_pairs(partial, x, e)
        else:
            e = np.zeros((0, self.sizes[1]), dtype=np.float32)
        x[:S, 2 * R + 3] = partial.chosen
        g = np.empty(self.sizes[2], dtype=np.float32)
        g[0] = req.duration / self.scale_for(view, partial)
        g[1:1 + R] = 1.0 - free.sum(axis=0) * self._inv_total
        g[1 + R] = partial.bandwidth / maxcap
        dem = req.demand
        g[2 + R:2 + 2 * R] = np.divide(rem, dem, out=np.zeros(R), where=dem > 0)
        if self.features >= 2:
            g[2 + 2 * R] = len(partial.servers) / CHOSEN_SCALE
        return {"nodes": x.astype(np.float32), "edges": e, "edge_index": lay.edge_index,
                "globals": g, "action_mask": partial.eligible()}


    def _link_pairs(self, partial: Partial, x: np.ndarray, e: np.ndarray) -> None:
        """Version 2's node and edge columns (in place; see the module docstring)."""
        lay = self.layout
        S = lay.n_servers
        col = 2 * self.n_resources + 5
        bw = partial.bandwidth
        if partial.reserved is None or bw <= 0:
            x[:S, col] = self.ratio_clip
            e[:, 2] = 1.0
            return
        lf = np.maximum(partial.link_free, 0.0)
        e[:, 2] = np.minimum(lf / bw, PAIR_CLIP)[lay.edge_link] / PAIR_CLIP
        if partial.reservation == "union":
            units = np.where(partial.reserved > 0, np.inf, lf / bw)
        else:
            units = lf / (bw * max(len(partial.servers), 1))
        units = np.minimum(units, self.ratio_clip)  # no inf in the product
        x[:S, col] = np.minimum(lay.server_links @ units, self.ratio_clip)
