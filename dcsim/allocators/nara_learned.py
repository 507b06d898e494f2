"""Nara's learned allocator: the graph observation, the GNN policy (numpy inference), the
checkpoint format and the ``nara`` allocator plugin.

This module needs numpy and scipy only; the environment (:mod:`dcsim.learn.nara_env`,
Gymnasium), the PyTorch network (:mod:`dcsim.learn.gnn`) and its training
(:mod:`dcsim.learn.ppo`) build on it, and the core never imports them.

**Observation** (:func:`observe`; Shabka & Zervas 2021, §3.2–3.3 and App. E.1), computed at
every server choice from the :class:`~dcsim.allocators.multi.Partial` allocation. Nodes are
ordered *servers first* (topology server order), then switches (graph order), so node ``i``
is server ``i`` for ``i < n_servers`` and an action is a node index. Features:

* nodes (``N × F``, ``F = 2R + 5`` for ``R`` resources, 9 for cpu/mem):
  ``free_r / remaining_r`` per resource (the paper's "scaled by the current request"; clipped
  to ``ratio_clip``; ``ratio_clip`` where the request needs no more of ``r``; 0 for
  switches), ``free_r / capacity_r`` per resource, the mean over the node's links of
  ``free / max link capacity``, the fraction of its links that can carry the request
  (``free >= bandwidth``, or already carrying it under ``union``), ``is_server``,
  ``selected`` (chosen for this request already) and ``tier / max tier``;
* edges (``E × 2``, each link in both directions): ``free / max link capacity`` and the
  "can carry the request" flag; ``edge_index`` (``2 × E``: source, destination);
* globals (``2 + 2R``): holding time ÷ (2 × the workload's mean holding time), cpu/mem
  utilisation of the cluster (used / total), bandwidth ÷ max link capacity, and the fraction
  of the demand still to place per resource.

**Feature version 2** (``features: 2``; the optical policies of the 2023 paper) appends
three columns to version 1's, which stays the default and is what the fabric policies were
trained on (so they read exactly the same arrays):

* node: the free bandwidth of the node's own links (their sum, so a server with several
  links counts them all) in units of what a newly chosen server takes on them: the
  request's bandwidth × the pairs it would add (``per_pair_channel``: one channel per link
  for each server already chosen, at least 1; ``union``: once, and a link already carrying
  the request counts as unlimited); clipped to ``ratio_clip``; 0 for switches. Version 1's
  link features are fractions of the largest link, so 8 free channels of 8 and 32 of 32
  look alike, though one holds 8 server pairs and the other 32.
* edge: ``free / bandwidth`` (pairs the link can still carry), clipped to 32, ÷ 32;
* global: the servers chosen so far ÷ 16.

Where this departs from the paper (App. E.1 gives ``[cpu, memory, bandwidth, selected]``
and globals ``[holding time, cpu util, mem util]``): the absolute free fractions, the
per-link "can carry it" flags, ``is_server``, the tier and the last three globals are added
so that one policy reads the same scales on any topology (the holding time is divided by the
workload's mean, since H grows with the topology: 30 on α, 480 on γ).

**Policy** (:func:`policy_logits`): three message-passing layers; in layer ``i`` every node
``v`` takes the mean over ``{v} ∪ N(v)`` of ``[h_u, e_uv]`` (its own entry with a zero edge
vector), then ``h_v ← ReLU(W_i · mean + b_i)`` (``W_i`` linear, so the mean of ``W_i(x)`` is
``W_i`` of the mean), 16 units. The mean embedding of the servers already chosen (zeros
before the first choice) is appended to every server's, an observation MLP (``globals → 8 →
8``, ReLU) to both, and a logits MLP (``16 + 16 + 8 → logit_hidden → 1``, ReLU; a single
linear layer, as the paper's P2, when ``logit_hidden`` is 0) scores each server. Servers
:meth:`Partial.eligible` excludes are masked. Aggregation is sparse (scipy), so the cost is
linear in nodes + links, and any topology size works.

**Checkpoint**: ``NAME.npz`` with the policy's float arrays (``np.load(...,
allow_pickle=False)``), ``NAME.json`` beside it with the format, architecture, feature
layout and how it was trained; every mismatch is a :class:`~dcsim.errors.ConfigError`
naming the file.
"""

from __future__ import annotations

import weakref
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from pydantic import Field, field_validator, model_validator

from dcsim.allocators.multi import MultiServerAllocator, Partial, path_service
from dcsim.checkpoints import (
    float_arrays,
    read_arrays,
    read_metadata,
    resolve,
    write_checkpoint,
)
from dcsim.errors import ConfigError
from dcsim.hookspecs import hookimpl
from dcsim.model import StateView, Topology
from dcsim.model.state import EPS

__all__ = ["CHECKPOINT_FORMAT", "FEATURE_VERSION", "SHIPPED_CHECKPOINT", "Architecture",
           "Checkpoint", "GraphLayout", "NaraAllocator", "Observer", "checkpoint_path",
           "graph_layout", "load_checkpoint", "policy_logits", "save_checkpoint",
           "shipped_checkpoints", "weight_shapes"]

CHECKPOINT_FORMAT = "dcsim-nara-policy"
CHECKPOINT_VERSION = 1
#: Bumped whenever :func:`observe` changes meaning; checkpoints record the version they saw.
#: The newest; :data:`FEATURE_VERSIONS` are all that :class:`Observer` still computes.
FEATURE_VERSION = 2
FEATURE_VERSIONS = (1, 2)
SHIPPED_DIR = Path(__file__).resolve().parents[1] / "learn" / "checkpoints"
#: The default policy: trained on topology alpha with the uniform request set.
SHIPPED_CHECKPOINT = SHIPPED_DIR / "nara_alpha_uniform.npz"
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
    a = np.array([pos[ps.node_index(u)] for u, _ in topology.links], dtype=np.int64)
    b = np.array([pos[ps.node_index(v)] for _, v in topology.links], dtype=np.int64)
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
        mean = getattr(view.workload, "mean_duration", None)
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


# --------------------------------------------------------------------------- policy
@dataclass(frozen=True)
class Architecture:
    """Sizes of the GNN policy (App. E: 3 layers of 16, observation MLP 8 → 8)."""

    node_features: int
    edge_features: int
    global_features: int
    embed: int = 16
    layers: int = 3
    obs_hidden: int = 8
    obs_out: int = 8
    logit_hidden: int = 16       # 0: one linear layer, as the paper's P2
    selected_column: int = 7

    def __post_init__(self):
        for k, v in asdict(self).items():
            low = 0 if k in ("logit_hidden", "selected_column") else 1
            if not isinstance(v, int) or isinstance(v, bool) or v < low:
                raise ValueError(f"architecture.{k} must be an integer >= {low}, not {v!r}")
        if self.selected_column >= self.node_features:
            raise ValueError(f"architecture.selected_column {self.selected_column} is not a "
                             f"node feature (of {self.node_features})")

    @classmethod
    def for_resources(cls, n_resources: int, features: int = 1, **kw) -> Architecture:
        """The architecture reading feature version ``features`` of ``n_resources``."""
        f, e, g = feature_sizes(n_resources, features)
        return cls(node_features=f, edge_features=e, global_features=g,
                   selected_column=selected_column(n_resources), **kw)


def weight_shapes(arch: Architecture) -> dict[str, tuple[int, ...]]:
    """Every policy array and its shape (PyTorch ``nn.Linear`` layout: (out, in))."""
    shapes: dict[str, tuple[int, ...]] = {}
    n_in = arch.node_features
    for i in range(arch.layers):
        shapes[f"gnn.{i}.weight"] = (arch.embed, n_in + arch.edge_features)
        shapes[f"gnn.{i}.bias"] = (arch.embed,)
        n_in = arch.embed
    shapes["obs.0.weight"] = (arch.obs_hidden, arch.global_features)
    shapes["obs.0.bias"] = (arch.obs_hidden,)
    shapes["obs.1.weight"] = (arch.obs_out, arch.obs_hidden)
    shapes["obs.1.bias"] = (arch.obs_out,)
    width = 2 * arch.embed + arch.obs_out
    if arch.logit_hidden:
        shapes["logit.0.weight"] = (arch.logit_hidden, width)
        shapes["logit.0.bias"] = (arch.logit_hidden,)
        shapes["logit.1.weight"] = (1, arch.logit_hidden)
        shapes["logit.1.bias"] = (1,)
    else:
        shapes["logit.0.weight"] = (1, width)
        shapes["logit.0.bias"] = (1,)
    return shapes


def _relu(a: np.ndarray) -> np.ndarray:
    return np.maximum(a, 0.0, out=a)


#: products larger than this (rows x inner x outer) are split into row blocks: OpenBLAS
#: multi-threads larger ones, which on a busy machine costs far more than it saves
#: (measured on delta: 0.8 ms vs 0.05 ms for one 2672 x 16 x 16 product)
_BLOCK = 131_072


def _mm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` for a tall ``a``, in row blocks small enough to stay single-threaded."""
    n, k = a.shape
    m = b.shape[1]
    rows = max(1, _BLOCK // max(k * m, 1))
    if n <= rows:
        return a @ b
    out = np.empty((n, m), dtype=np.result_type(a, b))
    for i in range(0, n, rows):
        np.matmul(a[i:i + rows], b, out=out[i:i + rows])
    return out


def embed_nodes(w: dict[str, np.ndarray], arch: Architecture, layout: GraphLayout,
                nodes: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """The GNN's node embeddings (N, embed) for one graph (numpy, sparse aggregation)."""
    h = np.asarray(nodes, dtype=np.float32)
    agg_e = (layout.edge_agg @ np.asarray(edges, dtype=np.float32)).astype(np.float32)
    for i in range(arch.layers):
        W = w[f"gnn.{i}.weight"]
        k = h.shape[1]
        z = _mm((layout.agg @ h).astype(np.float32), W[:, :k].T)
        z += _mm(agg_e, W[:, k:].T)
        z += w[f"gnn.{i}.bias"]
        h = _relu(z)
    return h


def policy_logits(w: dict[str, np.ndarray], arch: Architecture, layout: GraphLayout,
                  obs: dict[str, np.ndarray]) -> np.ndarray:
    """Masked logits (n_servers,) of the policy for one unpadded observation (numpy).
    Ineligible servers get -inf."""
    S = layout.n_servers
    h = embed_nodes(w, arch, layout, obs["nodes"], obs["edges"])
    sel = obs["nodes"][:S, arch.selected_column] > 0.5
    chosen = h[:S][sel].mean(axis=0) if sel.any() else np.zeros(arch.embed, np.float32)
    o = _relu(w["obs.0.weight"] @ obs["globals"] + w["obs.0.bias"])
    o = _relu(w["obs.1.weight"] @ o + w["obs.1.bias"])
    E = arch.embed
    W0 = w["logit.0.weight"]
    z = _mm(h[:S], W0[:, :E].T)
    z += W0[:, E:2 * E] @ chosen + W0[:, 2 * E:] @ o + w["logit.0.bias"]
    if arch.logit_hidden:
        z = _mm(_relu(z), w["logit.1.weight"].T) + w["logit.1.bias"]
    logits = z[:, 0].astype(np.float64)
    logits[~np.asarray(obs["action_mask"], dtype=bool)] = -np.inf
    return logits


# --------------------------------------------------------------------------- checkpoint
@dataclass(frozen=True)
class Checkpoint:
    """A loaded policy: its arrays, architecture and JSON metadata."""

    path: Path
    weights: dict[str, np.ndarray]
    arch: Architecture
    meta: dict[str, Any] = field(default_factory=dict)
    features: int = 1            # the feature version the policy was trained on

    def check_topology(self, topology: Topology) -> None:
        """ConfigError naming the file if ``topology``'s resources do not fit the policy."""
        f, e, g = feature_sizes(len(topology.resources), self.features)
        if (f, e, g) != (self.arch.node_features, self.arch.edge_features,
                         self.arch.global_features):
            raise ConfigError(
                f"{self.path}: checkpoint expects {self.arch.node_features} node / "
                f"{self.arch.global_features} global features, but topology "
                f"{topology.name!r} with resources {list(topology.resources)} gives {f} / {g}")


def save_checkpoint(path: str | Path, weights: dict[str, np.ndarray], arch: Architecture,
                    meta: dict[str, Any] | None = None,
                    resources: tuple[str, ...] = ("cpu", "mem"), features: int = 1) -> Path:
    """Write ``path`` (.npz, the policy arrays as float32) and the .json beside it, each
    atomically. ``meta`` adds fields (training record, …); ``features`` is the feature
    version the policy reads. Returns the .npz path."""
    sizes = feature_sizes(len(resources), features)
    if sizes != (arch.node_features, arch.edge_features, arch.global_features):
        raise ValueError(f"architecture {arch} does not read feature version {features} of "
                         f"{len(resources)} resources {sizes}")
    path = Path(path)
    if path.suffix != ".npz":
        raise ValueError(f"checkpoint path must end in .npz, not {path}")
    arrays = float_arrays(weights, weight_shapes(arch))
    doc = {
        "format": CHECKPOINT_FORMAT,
        "format_version": CHECKPOINT_VERSION,
        "architecture": {**asdict(arch),
                         "aggregation": "mean over {self} U neighbours of [h, edge]",
                         "activation": "relu",
                         "layout": "nn.Linear (out, in); gnn.i, obs.0-1, logit.0-1"},
        "features": {"version": features, "ratio_clip": RATIO_CLIP,
                     "node_order": "servers first (topology order), then switches",
                     "resources": list(resources),
                     **feature_names(tuple(resources), features)},
        **(meta or {}),
    }
    return write_checkpoint(path, arrays, doc)


def shipped_checkpoints() -> dict[str, Path]:
    """The policies shipped in the package, by name (``nara_<name>.npz``): ``alpha_uniform``,
    ``alpha_azure``, ``alpha_alibaba`` (topology alpha, one per Table 1 request set) and
    ``optical_all`` (one policy for the nine 64-server optical topologies of the 2023
    paper, feature version 2)."""
    return {p.stem.removeprefix("nara_"): p for p in sorted(SHIPPED_DIR.glob("nara_*.npz"))}


def checkpoint_path(value: str | None) -> Path:
    """The ``.npz`` a ``checkpoint`` option names: ``None`` is the shipped alpha-uniform
    policy, a shipped policy's name (:func:`shipped_checkpoints`) that policy, anything else
    a file path (``~`` expanded, relative to the working directory)."""
    if value is None:
        return SHIPPED_CHECKPOINT
    return resolve(value, shipped_checkpoints())


def _check_exists(value: str | None) -> None:
    """A ``checkpoint`` value that names no file, or a file that is not a valid policy, is a
    ``ValueError`` (for validators: ``dcsim validate`` reads the checkpoint's contents)."""
    try:
        path = checkpoint_path(value)
    except ConfigError as e:
        raise ValueError(str(e).removeprefix("checkpoint: ")) from None
    if not path.exists():
        raise ValueError(f"{path} does not exist")
    try:
        load_checkpoint(path)
    except ConfigError as e:
        raise ValueError(str(e)) from None


def load_checkpoint(path: str | Path) -> Checkpoint:
    """Load and validate a checkpoint (``.npz`` + ``.json`` beside it); any problem is a
    :class:`ConfigError` naming the file. Arrays are read with ``allow_pickle=False``."""
    path = Path(path)
    jpath = path.with_suffix(".json")
    meta = read_metadata(path, CHECKPOINT_FORMAT, "Nara")
    try:
        a = meta["architecture"]
        arch = Architecture(**{k: a[k] for k in Architecture.__dataclass_fields__})
        version = meta["features"]["version"]
    except (KeyError, TypeError, ValueError) as e:
        raise ConfigError(f"{jpath}: bad or missing architecture/features field: {e}") from None
    if version not in FEATURE_VERSIONS:
        raise ConfigError(f"{jpath}: features version {version} is not one of "
                          f"{FEATURE_VERSIONS} (the policy was trained on other observations)")
    weights = read_arrays(path, weight_shapes(arch))
    return Checkpoint(path=path, weights=weights, arch=arch, meta=meta, features=version)


# --------------------------------------------------------------------------- allocator
class NaraAllocator(MultiServerAllocator):
    """Nara's learned GNN policy (numpy inference; torch is not needed).

    ``checkpoint``: the ``.npz`` to load (its ``.json`` beside it), or the name of a policy
    shipped in the package (``alpha_uniform``, ``alpha_azure``, ``alpha_alibaba``: trained on
    α with Table 1's uniform, Azure- or Alibaba-derived request set; ``optical_all``:
    trained across the 2023 paper's nine optical topologies, to be run with ``reservation:
    per_pair_channel``; ``optical_<c>_<1xo>``: optical_all fine-tuned on one of them);
    default ``alpha_uniform``. ``per_topology`` instead maps topology names
    (``optical-8-1:16``) to checkpoints, each topology running its own policy, as the
    2023 paper trains one per topology. The observation is the feature version
    the checkpoint records. ``greedy: true`` (default, the paper's test-time rule)
    takes the highest-scoring eligible server, ties to the lowest index; ``greedy: false``
    samples from the masked softmax with the run's generator. ``holding_scale``: the
    holding-time normaliser (default: 2 × the workload's mean holding time).
    """

    name = "nara"
    description = "multi-server: Nara's learned GNN policy (PPO-trained checkpoint)"

    class Options(MultiServerAllocator.Options):
        checkpoint: str | None = Field(None, description="policy .npz, or a shipped "
                                       "policy: alpha_uniform (default), alpha_azure, "
                                       "alpha_alibaba, optical_all")
        per_topology: dict[str, str] | None = Field(
            None, description="a policy per topology: topology name (optical-8-1:16) -> "
            "policy .npz or shipped name; instead of checkpoint")
        greedy: bool = Field(True, description="argmax (true) or sample the policy")
        holding_scale: float | None = Field(None, gt=0, description="holding-time scale "
                                            "(default: 2 x the workload's mean)")

        @field_validator("checkpoint")
        @classmethod
        def _exists(cls, v: str | None) -> str | None:  # caught by `dcsim validate`
            _check_exists(v)
            return v

        @field_validator("per_topology")
        @classmethod
        def _all_exist(cls, v: dict[str, str] | None) -> dict[str, str] | None:
            if v is not None:
                if not v:
                    raise ValueError("needs at least one topology name -> policy entry")
                for name, ck in v.items():
                    try:
                        _check_exists(ck)
                    except ValueError as e:
                        raise ValueError(f"{name}: {e}") from None
            return v

        @model_validator(mode="after")
        def _one_source(self):
            if self.per_topology is not None and self.checkpoint is not None:
                raise ValueError("set checkpoint or per_topology, not both")
            return self

    def __init__(self, options=None, *, rng=None, topology=None):
        super().__init__(options, rng=rng, topology=topology)
        self.checkpoint: Checkpoint | None = None
        self._for: str | None = None  # the topology per_topology's policy was loaded for
        if self.options.per_topology is None:
            self.checkpoint = load_checkpoint(checkpoint_path(self.options.checkpoint))
        if topology is not None:
            self._load_for(topology)

    def _load_for(self, topology) -> None:
        """Load the topology's policy (``per_topology``) and check that it fits."""
        per = self.options.per_topology
        if per is not None and (self.checkpoint is None or self._for != topology.name):
            if topology.name not in per:
                raise ConfigError(f"per_topology: no policy for topology {topology.name!r} "
                                  f"(listed: {', '.join(sorted(per))})")
            self.checkpoint = load_checkpoint(checkpoint_path(per[topology.name]))
            self._for = topology.name
        assert self.checkpoint is not None
        self.checkpoint.check_topology(topology)

    def setup(self, view: StateView) -> None:
        super().setup(view)
        self._load_for(view.topology)
        assert self.checkpoint is not None
        self.observer = Observer(view.topology, self.options.holding_scale,
                                 features=self.checkpoint.features)

    def choose(self, partial: Partial, view: StateView) -> int | None:
        if not hasattr(self, "observer"):
            self.setup(view)
        mask = partial.eligible()
        if not mask.any():
            return None
        obs = self.observer.observe(partial, view)
        ck = self.checkpoint
        assert ck is not None  # loaded by setup
        z = policy_logits(ck.weights, ck.arch,
                          self.observer.layout, obs)
        if self.options.greedy:
            return int(np.argmax(z))
        p = np.exp(z - z[mask].max())
        c = np.cumsum(p)
        i = int(np.searchsorted(c, self.rng.random() * c[-1], side="right"))
        i = min(i, p.shape[0] - 1)
        while not mask[i]:  # float edge: land on the last eligible server
            i -= 1
        return i


@hookimpl
def register_allocators(register):
    register(NaraAllocator)
