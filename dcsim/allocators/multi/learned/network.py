"""The Nara GNN in numpy: its architecture, the weight layout a checkpoint holds, node
embeddings by message passing, the per-server logits (the same computation as the
PyTorch network of :mod:`dcsim.learn.nara.network`) and the greedy choice (in float64)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from dcsim.allocators.multi.learned.observation import (
    GraphLayout,
    feature_sizes,
    selected_column,
)
from dcsim.tie_break import TIE_TOL_FLOAT64, greedy_argmax


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
    """The GNN's node embeddings (N, embed) for one graph (numpy, sparse aggregation), in
    the weights' dtype."""
    dt = w["gnn.0.weight"].dtype
    h = np.asarray(nodes, dtype=dt)
    agg_e = (layout.edge_agg @ np.asarray(edges, dtype=dt)).astype(dt)
    for i in range(arch.layers):
        W = w[f"gnn.{i}.weight"]
        k = h.shape[1]
        z = _mm((layout.agg @ h).astype(dt), W[:, :k].T)
        z += _mm(agg_e, W[:, k:].T)
        z += w[f"gnn.{i}.bias"]
        h = _relu(z)
    return h


def policy_logits(w: dict[str, np.ndarray], arch: Architecture, layout: GraphLayout,
                  obs: dict[str, np.ndarray]) -> np.ndarray:
    """Masked logits (n_servers,) of the policy for one unpadded observation (numpy),
    computed in the weights' dtype (float32 as trained; :func:`greedy_server` passes
    float64) and returned as float64. Ineligible servers get -inf."""
    S = layout.n_servers
    h = embed_nodes(w, arch, layout, obs["nodes"], obs["edges"])
    sel = obs["nodes"][:S, arch.selected_column] > 0.5
    chosen = h[:S][sel].mean(axis=0) if sel.any() else np.zeros(arch.embed, h.dtype)
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


def float64_weights(w: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The policy's weights as float64, the precision :func:`greedy_server` computes in."""
    return {k: np.asarray(v, dtype=np.float64) for k, v in w.items()}


def greedy_server(w64: dict[str, np.ndarray], arch: Architecture, layout: GraphLayout,
                  obs: dict[str, np.ndarray]) -> int:
    """The policy's greedy choice for one observation: the highest logit, ties to the
    lowest index, computed from float64 weights (:func:`float64_weights`).

    Why float64: in float32 the logits carry rounding errors of up to 7e-6 of their size
    (sums of terms much larger than the result), as large as the true gaps between
    servers (on the shipped policies many distinct logits lie 1e-7 to 1e-5 apart), so
    which server won depended on the BLAS build and the processor, and a tolerance of any
    size had true gaps on its boundary. In float64 the shipped policies' ties came out at
    most 6e-11 apart and their true gaps at least 7e-7, so the tie rule's
    :data:`~dcsim.tie_break.TIE_TOL_FLOAT64` (1e-8) separates them on any machine."""
    return int(greedy_argmax(policy_logits(w64, arch, layout, obs),
                             rtol=TIE_TOL_FLOAT64, atol=TIE_TOL_FLOAT64))
