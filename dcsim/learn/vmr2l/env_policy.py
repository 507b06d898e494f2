"""A policy trained on ``dcsim/VMR2L-TwoStep-v0`` with any library (Stable-Baselines3,
CleanRL, TorchRL, ...), run by ``dcsim reschedule`` as a rescheduler:
:class:`VMR2LTwoStepPolicy`, the base class a plugin subclasses. It runs
:class:`~dcsim.learn.vmr2l.env.VMR2LTwoStepEnv` from the mapping to reschedule, two
:meth:`~VMR2LTwoStepPolicy.act` calls per migration (the VM, then its slot, each with its
action mask), and returns the migrations the environment applied. (Nara's counterpart, an
allocator: :class:`dcsim.learn.nara.env_policy.NaraEnvPolicy`.)

A subclass sets ``name`` (and ``description``), loads its model, and implements
``act(obs, mask) -> int``; ``docs/howto/train-with-sb3.md`` writes one for sb3-contrib's
``MaskablePPO``. The padded sizes must be those the policy was trained with: the class
takes them from :meth:`VMR2LTwoStepPolicy.observation_space` (by default the options'
sizes; a subclass whose model records its space, as Stable-Baselines3's do, returns that).
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

import numpy as np
from gymnasium import spaces
from pydantic import Field

from dcsim.errors import PluginError
from dcsim.learn.vmr2l.env import VMR2LEnvConfig, VMR2LTwoStepEnv
from dcsim.reschedulers.base import Plan, Rescheduler
from dcsim.vm.model import MappingState
from dcsim.vm.view import MappingView

__all__ = ["VMR2LTwoStepPolicy"]


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

    def reschedule(self, view: MappingView, mnl: int) -> Plan:
        if mnl == 0:
            return Plan([])
        state = view.copy()  # the environment's own mapping
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
