"""Nara's learned allocator: the graph observation (:mod:`.observation`), the GNN policy in
numpy (:mod:`.network`), the checkpoint format (:mod:`.checkpoint`) and, here, the ``nara``
allocator plugin.

This package needs numpy and scipy only; the environment (:mod:`dcsim.learn.nara.env`,
Gymnasium), the PyTorch network (:mod:`dcsim.learn.nara.network`) and its training
(:mod:`dcsim.learn.nara.train`) build on it, and the core never imports them.

**Observation** (:func:`observe`; Shabka & Zervas 2021, §3.2–3.3 and App. E.1), computed at
every server choice from the :class:`~dcsim.allocators.multi.step.Partial` allocation. Nodes are
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

import numpy as np
from pydantic import Field, field_validator, model_validator

from dcsim.allocators.multi.learned.checkpoint import (
    CHECKPOINT_FORMAT,
    CHECKPOINT_VERSION,
    SHIPPED_CHECKPOINT,
    SHIPPED_DIR,
    Checkpoint,
    check_exists,
    checkpoint_path,
    load_checkpoint,
    save_checkpoint,
    shipped_checkpoints,
)
from dcsim.allocators.multi.learned.network import (
    Architecture,
    embed_nodes,
    float64_weights,
    greedy_server,
    policy_logits,
    weight_shapes,
)
from dcsim.allocators.multi.learned.observation import (
    FEATURE_VERSION,
    FEATURE_VERSIONS,
    GraphLayout,
    Observer,
    feature_names,
    feature_sizes,
    graph_layout,
    selected_column,
)
from dcsim.allocators.multi.step import MultiServerAllocator, Partial
from dcsim.errors import ConfigError
from dcsim.hookspecs import hookimpl
from dcsim.model import StateView

__all__ = ["CHECKPOINT_FORMAT", "CHECKPOINT_VERSION", "FEATURE_VERSION", "FEATURE_VERSIONS",
           "SHIPPED_CHECKPOINT", "SHIPPED_DIR", "Architecture", "Checkpoint", "GraphLayout",
           "NaraAllocator", "Observer", "checkpoint_path", "embed_nodes", "feature_names",
           "feature_sizes", "float64_weights", "graph_layout", "greedy_server",
           "load_checkpoint", "policy_logits",
           "save_checkpoint", "selected_column", "shipped_checkpoints", "weight_shapes",
           "register_allocators"]


# --------------------------------------------------------------------------- allocator
class NaraAllocator(MultiServerAllocator):
    """Nara's learned GNN policy (numpy inference; torch is not needed).

    ``checkpoint``: the ``.npz`` to load (its ``.json`` beside it), or the name of a policy
    shipped in the package (``alpha_uniform``, ``alpha_azure``, ``alpha_alibaba``: trained on
    α with Table 1's uniform, Azure- or Alibaba-derived request set; ``optical_all``:
    trained across the 2023 paper's nine optical topologies, to be run with ``reservation:
    per_pair_channel``; ``optical_<c>_<1xo>``: trained from scratch on one of them);
    default ``alpha_uniform``. ``per_topology`` instead maps topology names
    (``optical-8-1:16``) to checkpoints, each topology running its own policy, as the
    2023 paper trains one per topology. The observation is the feature version
    the checkpoint records. ``greedy: true`` (default, the paper's test-time rule)
    takes the highest-scoring eligible server, computed in float64, ties (logits equal up
    to rounding: :func:`greedy_server`) to the lowest index; ``greedy: false``
    samples (in float32, as in training) from the masked softmax with the run's generator.
    ``holding_scale``: the holding-time normaliser (default: 2 × the workload's mean
    holding time).
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
            check_exists(v)
            return v

        @field_validator("per_topology")
        @classmethod
        def _all_exist(cls, v: dict[str, str] | None) -> dict[str, str] | None:
            if v is not None:
                if not v:
                    raise ValueError("needs at least one topology name -> policy entry")
                for name, ck in v.items():
                    try:
                        check_exists(ck)
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
        if self.options.greedy:
            return greedy_server(ck.inference_weights, ck.arch, self.observer.layout, obs)
        z = policy_logits(ck.weights, ck.arch, self.observer.layout, obs)
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
