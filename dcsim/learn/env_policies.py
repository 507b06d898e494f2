"""Policies trained on dcsim's Gymnasium environments, run by ``dcsim run`` and ``dcsim
reschedule``: the two base classes a plugin subclasses to use a policy from any library
(Stable-Baselines3, CleanRL, TorchRL, ...).

A policy trained on an environment reads that environment's observations. These classes
build exactly those observations from the simulator's state, hand them with the action mask
to :meth:`act`, and turn its answer into the simulator's decision:

- :class:`NaraEnvPolicy` (an allocator, for ``dcsim/Nara-v0``): at each server choice of
  Nara's multi-server step, the observation :class:`~dcsim.learn.nara_env.NaraEnv` would
  return at that choice (:func:`~dcsim.learn.nara_env.padded_observation`); the action is a
  server.
- :class:`VMR2LTwoStepPolicy` (a rescheduler, for ``dcsim/VMR2L-TwoStep-v0``): runs
  :class:`~dcsim.learn.vmr2l_twostep.VMR2LTwoStepEnv` from the mapping to reschedule, two
  :meth:`act` calls per migration (the VM, then its slot), and returns the migrations the
  environment applied.

A subclass sets ``name`` (and ``description``), loads its model, and implements
``act(obs, mask) -> int``; ``docs/howto/train-with-sb3.md`` writes both for sb3-contrib's
``MaskablePPO``. The padded sizes must be those the policy was trained with: each class
takes them from :meth:`observation_space` (by default the options' sizes; a subclass whose
model records its space, as Stable-Baselines3's do, returns that).
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

import numpy as np
from gymnasium import spaces
from pydantic import Field

from dcsim.allocators.multi.learned import FEATURE_VERSIONS, Observer, feature_sizes
from dcsim.allocators.multi.step import MultiServerAllocator, Partial
from dcsim.errors import ConfigError, PluginError
from dcsim.learn.nara_env import observation_space, padded_observation, padded_statics
from dcsim.learn.vmr2l_env import VMR2LEnvConfig
from dcsim.learn.vmr2l_twostep import VMR2LTwoStepEnv
from dcsim.model import StateView
from dcsim.reschedulers.base import Plan, Rescheduler
from dcsim.vm.model import MappingState

__all__ = ["NaraEnvPolicy", "VMR2LTwoStepPolicy"]


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


class VMR2LTwoStepPolicy(Rescheduler):
    """A rescheduler that runs a policy trained on ``dcsim/VMR2L-TwoStep-v0``.

    Options: ``max_hosts`` and ``max_vms``, the environment's padded sizes (None: the
    mapping's own host count and 16 VMs per host, the environment's default). The
    episode is ``mnl`` migrations (``--mnl``); ``act`` gets the observation and the mask
    of the stage (the VM, then its slot) and returns an action; a forbidden one is an
    error. A migration the environment finds moves nothing (the VM's own host) is left
    out of the plan.
    """

    name = "_vmr2l_twostep_policy"
    description = "a policy trained on dcsim/VMR2L-TwoStep-v0 (subclass it)"

    class Options(Rescheduler.Options):
        max_hosts: int | None = Field(None, ge=1, description="padded host count")
        max_vms: int | None = Field(None, ge=1, description="padded VM-token count")

    @abstractmethod
    def act(self, obs: dict[str, Any], mask: np.ndarray) -> int:
        """The chosen action (an index where ``mask`` is True)."""

    def observation_space(self) -> spaces.Dict | None:
        """The observation space the policy was trained on, or None (the options' sizes)."""
        return None

    def env(self, state: MappingState, mnl: int) -> VMR2LTwoStepEnv:
        """The environment the policy runs in, sized as it was trained."""
        space = self.observation_space()
        if space is not None:
            hosts, vms = space["hosts"].shape[0], space["vms"].shape[0]
        else:
            hosts = self.options.max_hosts or state.n_hosts
            vms = self.options.max_vms
        return VMR2LTwoStepEnv(VMR2LEnvConfig(hosts=hosts, max_vms=vms, mnl=max(mnl, 1)))

    def reschedule(self, state: MappingState, mnl: int) -> Plan:
        if mnl == 0:
            return Plan([])
        env = self.env(state, mnl)
        obs, _ = env.reset(options={"mapping": state})
        plan: list = []
        done = False
        while not done:
            mask = env.action_masks()
            a = int(self.act(obs, mask))
            if not (0 <= a < mask.shape[0] and mask[a]):
                raise PluginError(f"rescheduler {self.label!r}: the policy chose action "
                                  f"{a}, which the mask of stage {obs['stage']} forbids")
            obs, _, done, _, info = env.step(a)
            if info["migration"] is not None:
                plan.append(info["migration"])
        return Plan(plan)
