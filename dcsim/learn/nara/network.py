"""Nara's GNN policy in plain PyTorch (batched, sparse scatter-mean), with a value network.

The network is the one :mod:`dcsim.allocators.multi.learned` documents and runs in numpy
(:func:`~dcsim.allocators.multi.learned.policy_logits`); both compute the same logits
(tested). Here it runs on a *batch* of padded graphs (:func:`graph_batch`): the B graphs'
nodes are flattened to one ``B·N`` node set, edges offset per graph, and messages summed
with ``index_add_`` (no dense N × N matrix, so the cost is linear in nodes + edges).
Padding edges carry weight 0 and padding nodes are never read.

The value function (:class:`NaraValue`) has its own GNN of the same shape (the paper's
RLlib setting ``vf_share_layers = False``) and reads the mean embedding of the servers, the
chosen-servers mean and the observation embedding.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from dcsim.allocators.multi.learned import Architecture, weight_shapes

__all__ = ["GraphBatch", "NaraPolicy", "NaraValue", "graph_batch", "stack_obs"]

#: logit of a masked server (finite, so entropies and log-probabilities stay finite)
MASKED = -1e9


@dataclass
class GraphBatch:
    """B padded graphs as the network reads them (see :func:`graph_batch`)."""

    x: torch.Tensor          # (B, N, F) node features
    edge_feat: torch.Tensor  # (B·E, Fe) edge features, zero on padding edges
    src: torch.Tensor        # (B·E,) flattened source node of each edge
    dst: torch.Tensor        # (B·E,) flattened destination node
    edge_w: torch.Tensor     # (B·E, 1) 1 for real edges, 0 for padding
    inv_deg: torch.Tensor    # (B·N, 1) 1 / (1 + in-degree)
    globals: torch.Tensor    # (B, G)
    mask: torch.Tensor       # (B, S) bool: eligible servers

    @property
    def shape(self) -> tuple[int, int]:
        return self.x.shape[0], self.x.shape[1]


def stack_obs(obs: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Stack a list of (same-shaped) observations into batched arrays."""
    return {k: np.stack([o[k] for o in obs]) for k in obs[0]}


def graph_batch(obs: dict[str, np.ndarray], device: torch.device | str = "cpu"
                ) -> GraphBatch:
    """A :class:`GraphBatch` from batched observation arrays (``nodes`` (B, N, F),
    ``edges`` (B, E, Fe), ``edge_index`` (B, 2, E), ``globals``, ``edge_mask``,
    ``action_mask``; ``NaraEnv``'s keys with a leading batch axis)."""
    nodes = torch.as_tensor(obs["nodes"], dtype=torch.float32, device=device)
    B, N, _ = nodes.shape
    ei = torch.as_tensor(obs["edge_index"], dtype=torch.int64, device=device)
    E = ei.shape[2]
    off = (torch.arange(B, device=device) * N)[:, None]
    src = (ei[:, 0, :] + off).reshape(-1)
    dst = (ei[:, 1, :] + off).reshape(-1)
    if "edge_mask" in obs:
        w = torch.as_tensor(obs["edge_mask"], dtype=torch.float32, device=device).reshape(-1, 1)
    else:
        w = torch.ones(B * E, 1, device=device)
    ef = torch.as_tensor(obs["edges"], dtype=torch.float32, device=device).reshape(B * E, -1)
    deg = torch.zeros(B * N, 1, device=device).index_add_(0, dst, w)
    mask = torch.as_tensor(obs["action_mask"], device=device).to(torch.bool)
    return GraphBatch(x=nodes, edge_feat=ef * w, src=src, dst=dst, edge_w=w,
                      inv_deg=1.0 / (1.0 + deg),
                      globals=torch.as_tensor(obs["globals"], dtype=torch.float32,
                                              device=device),
                      mask=mask)


class _Trunk(nn.Module):
    """Message passing (``layers`` × Linear over [mean h, mean edge]) and the obs MLP."""

    def __init__(self, arch: Architecture):
        super().__init__()
        self.arch = arch
        dims = [arch.node_features] + [arch.embed] * arch.layers
        self.gnn = nn.ModuleList(nn.Linear(dims[i] + arch.edge_features, dims[i + 1])
                                 for i in range(arch.layers))
        self.obs = nn.ModuleList([nn.Linear(arch.global_features, arch.obs_hidden),
                                  nn.Linear(arch.obs_hidden, arch.obs_out)])

    def embed(self, g: GraphBatch) -> torch.Tensor:
        """Node embeddings (B, N, embed)."""
        B, N = g.shape
        h = g.x.reshape(B * N, -1)
        agg_e = torch.zeros(B * N, g.edge_feat.shape[1], device=h.device,
                            dtype=h.dtype).index_add_(0, g.dst, g.edge_feat) * g.inv_deg
        for lin in self.gnn:
            m = h.index_add(0, g.dst, h[g.src] * g.edge_w) * g.inv_deg
            h = torch.relu(lin(torch.cat([m, agg_e], dim=1)))
        return h.reshape(B, N, -1)

    def observe(self, g: GraphBatch) -> torch.Tensor:
        o = torch.relu(self.obs[0](g.globals))
        return torch.relu(self.obs[1](o))

    def chosen_mean(self, g: GraphBatch, hs: torch.Tensor) -> torch.Tensor:
        """Mean embedding of the servers already chosen (zeros before the first)."""
        S = hs.shape[1]
        sel = (g.x[:, :S, self.arch.selected_column] > 0.5).to(hs.dtype).unsqueeze(2)
        return (hs * sel).sum(1) / sel.sum(1).clamp(min=1.0)


class NaraPolicy(_Trunk):
    """The actor: masked logits (B, S) over the first S nodes (the servers)."""

    def __init__(self, arch: Architecture):
        super().__init__(arch)
        width = 2 * arch.embed + arch.obs_out
        if arch.logit_hidden:
            self.logit = nn.ModuleList([nn.Linear(width, arch.logit_hidden),
                                        nn.Linear(arch.logit_hidden, 1)])
        else:
            self.logit = nn.ModuleList([nn.Linear(width, 1)])

    def forward(self, g: GraphBatch) -> torch.Tensor:
        S = g.mask.shape[1]
        hs = self.embed(g)[:, :S]
        cm = self.chosen_mean(g, hs)
        o = self.observe(g)
        z = torch.cat([hs, cm[:, None, :].expand_as(hs),
                       o[:, None, :].expand(-1, S, -1)], dim=2)
        z = self.logit[0](z)
        if len(self.logit) > 1:
            z = self.logit[1](torch.relu(z))
        return torch.where(g.mask, z[..., 0], torch.full_like(z[..., 0], MASKED))

    def numpy_weights(self) -> dict[str, np.ndarray]:
        """Copies of the arrays in the checkpoint layout (:func:`weight_shapes`)."""
        sd = self.state_dict()
        return {k: sd[k].detach().cpu().numpy().copy() for k in weight_shapes(self.arch)}

    def load_numpy(self, w: dict[str, np.ndarray]) -> None:
        sd = {k: torch.as_tensor(np.asarray(w[k], dtype=np.float32))
              for k in weight_shapes(self.arch)}
        self.load_state_dict(sd)


class NaraValue(_Trunk):
    """The critic: its own GNN; value of [mean server embedding, chosen mean, obs]."""

    def __init__(self, arch: Architecture, hidden: int = 16):
        super().__init__(arch)
        width = 2 * arch.embed + arch.obs_out
        self.head = nn.Sequential(nn.Linear(width, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, g: GraphBatch) -> torch.Tensor:
        S = g.mask.shape[1]
        hs = self.embed(g)[:, :S]
        srv = (g.x[:, :S, self.arch.selected_column - 1] > 0.5).to(hs.dtype).unsqueeze(2)
        pooled = (hs * srv).sum(1) / srv.sum(1).clamp(min=1.0)
        z = torch.cat([pooled, self.chosen_mean(g, hs), self.observe(g)], dim=1)
        return self.head(z)[:, 0]
