"""A policy trained on ``dcsim/Nara-v0`` with any library (Stable-Baselines3, CleanRL,
TorchRL, ...), run by ``dcsim run`` as an allocator: :class:`NaraEnvPolicy`, the base class
a plugin subclasses. At each server choice of Nara's multi-server step it builds the
observation :class:`~dcsim.learn.nara.env.NaraEnv` would return at that choice
(:func:`~dcsim.learn.nara.env.padded_observation`), hands it with the action mask to
:meth:`~NaraEnvPolicy.act`, and takes its answer as the server. (VMR²L's counterpart, a
rescheduler: :class:`dcsim.learn.vmr2l.env_policy.VMR2LTwoStepPolicy`.)

A subclass sets ``name`` (and ``description``), loads its model, and implements
``act(obs, mask) -> int``; ``docs/howto/train-with-sb3.md`` writes one for sb3-contrib's
``MaskablePPO``. The padded sizes must be those the policy was trained with: the class
takes them from :meth:`NaraEnvPolicy.observation_space` (by default the options' sizes; a subclass
whose model records its space, as Stable-Baselines3's do, returns that).
"""

from __future__ import annotations

from abc import abstractmethod

import numpy as np
from gymnasium import spaces
from pydantic import Field

from dcsim.allocators.multi.learned import FEATURE_VERSIONS, Observer, feature_sizes
from dcsim.allocators.multi.step import MultiServerAllocator, Partial
from dcsim.errors import ConfigError, PluginError
from dcsim.learn.nara.env import observation_space, padded_observation, padded_statics
from dcsim.model import StateView

__all__ = ["NaraEnvPolicy"]


class NaraEnvPolicy(MultiServerAllocator):
    """An allocator that asks a policy trained on ``dcsim/Nara-v0`` for each server.

    Options: the multi-server step's (``reservation``, ``k_paths``, ``eligible``,
    ``pair_paths``: set them as the environment had them), ``features`` and
    ``holding_scale`` (the environment's), and the padded sizes ``max_nodes``,
    ``max_edges``, ``max_servers`` (None: the topology's own, as the environment's
    default). ``act`` gets the observation dict and the mask (bool, ``max_servers``) and
    returns a server index; one the mask forbids is an error (the environment would fail
    the request; a run would record a decision the policy did not mean).
    """

    name = "_nara_env_policy"
    description = "a policy trained on dcsim/Nara-v0 (subclass it)"

    class Options(MultiServerAllocator.Options):
        features: int = Field(1, description="observation feature version, as the "
                              f"environment's ({', '.join(map(str, FEATURE_VERSIONS))})")
        holding_scale: float | None = Field(None, gt=0, description="the environment's "
                                            "holding-time scale (default: 2 x mean)")
        max_nodes: int | None = Field(None, ge=1, description="padded node count")
        max_edges: int | None = Field(None, ge=1, description="padded edge count")
        max_servers: int | None = Field(None, ge=1, description="padded server count")

    @abstractmethod
    def act(self, obs: dict[str, np.ndarray], mask: np.ndarray) -> int:
        """The chosen server (an index where ``mask`` is True)."""

    def observation_space(self) -> spaces.Dict | None:
        """The observation space the policy was trained on, or None to build it from the
        options and the topology."""
        return None

    def setup(self, view: StateView) -> None:
        super().setup(view)
        o = self.options
        if o.features not in FEATURE_VERSIONS:
            raise ConfigError(f"{self.name}: features must be one of "
                              f"{sorted(FEATURE_VERSIONS)}, got {o.features}")
        self.observer = Observer(view.topology, o.holding_scale, features=o.features)
        lay = self.observer.layout
        space = self.observation_space()
        if space is None:  # as NaraEnv pads: to the options' sizes, else the topology's
            space = observation_space(
                o.max_nodes or lay.n_nodes,
                o.max_edges if o.max_edges is not None else lay.n_edges,
                o.max_servers or lay.n_servers, len(view.topology.resources), o.features)
        N, F = space["nodes"].shape
        E, S = space["edges"].shape[0], space["action_mask"].shape[0]
        F_here = feature_sizes(len(view.topology.resources), o.features)[0]
        if F != F_here:
            raise ConfigError(f"{self.name}: the policy reads {F} node features; features "
                              f"{o.features} on this topology gives {F_here}")
        if N < lay.n_nodes or E < lay.n_edges or S < lay.n_servers:
            raise ConfigError(
                f"{self.name}: topology {view.topology.name!r} has {lay.n_nodes} nodes, "
                f"{lay.n_edges} edges, {lay.n_servers} servers; the policy was trained "
                f"for at most {N}, {E}, {S}")
        self._space = space
        self._statics = padded_statics(lay, N, E, S)

    def choose(self, partial: Partial, view: StateView) -> int | None:
        if not hasattr(self, "observer"):
            self.setup(view)
        if not partial.eligible().any():
            return None
        o = self.observer.observe(partial, view)
        obs = padded_observation(o, self.observer.layout, self._space, self._statics)
        mask = obs["action_mask"].astype(bool)
        a = int(self.act(obs, mask))
        if not (0 <= a < mask.shape[0] and mask[a]):
            raise PluginError(f"allocator {self.label!r}: the policy chose server {a}, "
                              "which the action mask forbids")
        return a
