"""VMR²L with one choice per step (``dcsim/VMR2L-TwoStep-v0``), for masked-action libraries.

:class:`~dcsim.learn.vmr2l_env.VMR2LEnv` takes a migration as one action ``(vm token, slot)``
whose legal slots depend on the VM chosen (``vm_mask()``, then ``slot_mask(token)``). A
per-dimension ``MultiDiscrete`` mask cannot say that, so libraries that mask actions from a
flat vector (sb3-contrib's ``MaskablePPO``, through ``action_masks()``) cannot use it. This
environment splits each migration into the two decisions the paper's two-stage policy makes,
in order:

1. **VM stage** (``stage`` 0): the action is a VM token; :meth:`action_masks` is
   ``vm_mask()``. The state does not change; the reward is 0.
2. **Slot stage** (``stage`` 1): the observation now names the chosen VM (``chosen``, one-hot
   over the tokens); the action is a slot (``2h + j``: host ``h``, NUMA ``j``);
   :meth:`action_masks` is ``slot_mask(chosen)``. The migration is applied by the wrapped
   :class:`VMR2LEnv` exactly as its ``step((token, slot))`` does, with its reward.

So the slot is chosen knowing the VM, as in the paper (its VM actor, then its PM actor
conditioned on the VM), and an episode is ``2 mnl`` steps whose rewards sum to the fragment
removed ÷ 128, as in ``dcsim/VMR2L-v0``. The action space is ``Discrete(max(max_vms, 2
max_hosts))``; entries past a stage's own range are masked. An action a mask forbids (what
``check_env`` and random agents send) is not an error: in either stage it uses up the
migration as a no-op with reward 0 and ``info["invalid"]``, like ``VMR2LEnv``'s masked
actions. Observation: ``VMR2LEnv``'s, plus ``stage`` and ``chosen``. Options and settings are
``VMR2LEnv``'s (:class:`~dcsim.learn.vmr2l_env.VMR2LEnvConfig`);
``reset(options={"mapping": state})`` starts from a given mapping; ``info["migration"]`` is
the :class:`~dcsim.vm.types.Migration` a slot step applied (None if it moved nothing).

``render_mode``: ``dcsim/VMR2L-v0``'s (``"ansi"``, ``"rgb_array"``), plus the stage: in the
slot stage the text names the chosen VM and how many slots it may take, and the image marks
those slots green and the VM's own red.

dcsim's own trainer and the shipped VMR²L policy use ``dcsim/VMR2L-v0`` and choose both
parts in one forward pass; this variant changes neither.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from dcsim.environments import RENDER_MODES, checked_render_mode, register_envs
from dcsim.learn.vmr2l_env import VMR2LEnv, VMR2LEnvConfig, occupied_slots, slot_text

__all__ = ["ENV_ID", "VMR2LTwoStepEnv"]

ENV_ID = "dcsim/VMR2L-TwoStep-v0"


class VMR2LTwoStepEnv(gym.Env):
    """A migration as two steps, the VM then its slot (see the module docstring)."""

    metadata = {"render_modes": list(RENDER_MODES), "render_fps": 4}

    def __init__(self, config: VMR2LEnvConfig | dict[str, Any] | None = None, *,
                 render_mode: str | None = None, **kwargs: Any):
        self.render_mode = checked_render_mode(render_mode, ENV_ID)
        #: the wrapped one-action-per-migration environment (its state, masks and reward;
        #: this one renders through it)
        self.inner = VMR2LEnv(config, **kwargs)
        self.config = self.inner.config
        H, M = self.config.max_hosts, self.config.vm_capacity
        self.n_vms, self.n_slots = M, 2 * H
        self.observation_space = spaces.Dict({
            **self.inner.observation_space.spaces,
            "stage": spaces.Discrete(2),
            "chosen": spaces.MultiBinary(M),
        })
        self.action_space = spaces.Discrete(max(M, 2 * H))
        self.token: int | None = None   # the VM chosen in the VM stage, until its slot
        self._obs: dict[str, Any] | None = None

    @property
    def state(self):
        """The current mapping (:class:`~dcsim.vm.model.MappingState`)."""
        return self.inner.state

    def _observe(self, obs: dict[str, Any]) -> dict[str, Any]:
        self._obs = obs
        chosen = np.zeros(self.n_vms, dtype=np.int8)
        if self.token is not None:
            chosen[self.token] = 1
        return {**obs, "stage": int(self.token is not None), "chosen": chosen}

    def action_masks(self) -> np.ndarray:
        """``(action_space.n,)`` bool: the legal actions of the current stage."""
        m = np.zeros(self.action_space.n, dtype=bool)
        legal = (self.inner.vm_mask() if self.token is None
                 else self.inner.slot_mask(self.token))
        m[:len(legal)] = legal
        return m

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.token = None
        obs, info = self.inner.reset(seed=seed, options=options)
        return self._observe(obs), {**info, "stage": 0}

    def step(self, action):
        if self._obs is None:
            raise RuntimeError("call reset() before step()")
        a = int(action)
        if self.token is None:
            if 0 <= a < self.n_vms and self.inner.vm_mask()[a]:
                self.token = a   # the state is unchanged: the last observation, copied
                same = {k: v.copy() if isinstance(v, np.ndarray) else v
                        for k, v in self._obs.items()}
                return (self._observe(same), 0.0, False, False,
                        {"stage": 1, "invalid": False, "moved": False, "migration": None})
            token, slot = -1, 0       # a forbidden VM: the migration is a no-op
        else:
            token, slot = self.token, a
            self.token = None
            if not 0 <= slot < self.n_slots:
                token, slot = -1, 0   # past the slots: a no-op, as a masked slot is
        obs, reward, terminated, truncated, info = self.inner.step((token, slot))
        return self._observe(obs), reward, terminated, truncated, {**info, "stage": 0}

    def render(self) -> str | np.ndarray | None:
        """``dcsim/VMR2L-v0``'s text or image of the current state, with the stage (module
        docstring); None without a render mode."""
        inner, token = self.inner, self.token
        if self.render_mode == "ansi":
            text = inner.render_text(ENV_ID)
            if inner.state is None:
                return text
            if token is None:
                return text + "pending: the VM stage (choose a VM token)\n"
            st = inner.state
            k = int(inner.tokens[token])
            return (text + f"pending: the slot stage for VM {st.vm_ids[k]} (token {token}, on "
                    f"{slot_text(st, int(st.vm_host[k]), int(st.vm_numa[k]))}): "
                    f"{int(inner.slot_mask(token).sum())} legal slots\n")
        if self.render_mode == "rgb_array":
            if token is None or inner.state is None:
                return inner.render_image()
            k = int(inner.tokens[token])
            marks = inner.slot_mask(token).astype(np.int8)
            marks[occupied_slots(int(inner.state.vm_host[k]), int(inner.state.vm_numa[k]))] = 3
            return inner.render_image(marks)
        return None


register_envs()
