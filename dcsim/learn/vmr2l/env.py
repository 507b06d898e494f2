"""VMR²L's Gymnasium environments over dcsim's VM model: ``dcsim/VMR2L-v0``
(:class:`VMR2LEnv`, a migration per step) and ``dcsim/VMR2L-TwoStep-v0``
(:class:`VMR2LTwoStepEnv`, the VM then its slot).

An episode draws a mapping (:func:`dcsim.vm.synthetic.synthetic_preset`, ``preset``; the
host count drawn per episode from ``hosts`` when it is a ``[low, high]`` range, or a
mapping given through ``reset(options={"mapping": state})``) and runs ``mnl`` steps. Each
step is one action ``(vm token, slot)`` (:mod:`dcsim.reschedulers.vmr2l`: tokens are the
migratable VMs, slot ``2h + j`` is host ``h``, NUMA ``j``; the VM's own host is a no-op).
Reward: the fragment removed (``Σ free_cpu mod 16`` before − after, in cores) ÷ 128, the
authors' ``Σ (f mod 16)/32 / 4``; so the rewards of an episode sum to the fragment removed
÷ 128. The episode terminates after ``mnl`` steps (the step counter is in the observation).

Observation (padded to ``max_hosts`` hosts and ``max_vms`` VM tokens; the counts say how
many are real): ``hosts`` (max_hosts, 8), ``vms`` (max_vms, 14), ``vm_host`` (the token's
host, −1 for padding), ``vm_count``, ``host_count``, ``step`` (t / mnl). Features are
computed from the state at reset and, after each migration, recomputed for the two hosts it
touched and the VMs on them (:func:`~dcsim.reschedulers.vmr2l.update_features`; the same
arrays as a full recomputation, which a test checks after random migrations — the
authors' incremental update has index errors).

Masks: :meth:`VMR2LEnv.vm_mask` (the real tokens: every migratable VM may be chosen, since
its own host is always a legal no-op) and :meth:`VMR2LEnv.slot_mask` (for a chosen token:
the model's own feasibility plus the no-op). A masked action (what ``check_env`` and random
agents send) is not an error: the step is a no-op with reward 0 and ``info["invalid"]``;
with the masks, no action is ever invalid.

``render_mode`` (Gymnasium's keyword; :mod:`dcsim.environments`): ``"ansi"``, ``render()`` is
a few lines of text (the step and the migrations left, the fragment and the utilisation per
resource, what the last step did); ``"rgb_array"``, an image with a bar per slot (host ×
NUMA, the action's slot order) for the used cpu and memory, the last migration's source
marked red and its destination dark.

**One choice per step** (``dcsim/VMR2L-TwoStep-v0``, for masked-action libraries).
:class:`VMR2LEnv` takes a migration as one action ``(vm token, slot)`` whose legal slots
depend on the VM chosen (``vm_mask()``, then ``slot_mask(token)``). A
per-dimension ``MultiDiscrete`` mask cannot say that, so libraries that mask actions from a
flat vector (sb3-contrib's ``MaskablePPO``, through ``action_masks()``) cannot use it. This
environment splits each migration into the two decisions the paper's two-stage policy makes,
in order:

1. **VM stage** (``stage`` 0): the action is a VM token; ``action_masks()`` is
   ``vm_mask()``. The state does not change; the reward is 0.
2. **Slot stage** (``stage`` 1): the observation now names the chosen VM (``chosen``, one-hot
   over the tokens); the action is a slot (``2h + j``: host ``h``, NUMA ``j``);
   ``action_masks()`` is ``slot_mask(chosen)``. The migration is applied by the wrapped
   :class:`VMR2LEnv` exactly as its ``step((token, slot))`` does, with its reward.

So the slot is chosen knowing the VM, as in the paper (its VM actor, then its PM actor
conditioned on the VM), and an episode is ``2 mnl`` steps whose rewards sum to the fragment
removed ÷ 128, as in ``dcsim/VMR2L-v0``. The action space is ``Discrete(max(max_vms, 2
max_hosts))``; entries past a stage's own range are masked. An action a mask forbids (what
``check_env`` and random agents send) is not an error: in either stage it uses up the
migration as a no-op with reward 0 and ``info["invalid"]``, like ``VMR2LEnv``'s masked
actions. Observation: ``VMR2LEnv``'s, plus ``stage`` and ``chosen``. Options and settings are
``VMR2LEnv``'s (:class:`VMR2LEnvConfig`);
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
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from dcsim.environments import (
    RENDER_MODES,
    Rendered,
    bars_image,
    checked_render_mode,
    register_envs,
)
from dcsim.errors import ConfigError
from dcsim.reschedulers.vmr2l import (
    HOST_FEATURES,
    VM_FEATURES,
    host_mask,
    observe,
    slot_migration,
    tokens_of,
    update_features,
)
from dcsim.validation import first_error
from dcsim.vm.mapping_io import parse_mapping
from dcsim.vm.model import MappingState
from dcsim.vm.synthetic import PRESETS, synthetic_preset
from dcsim.vm.types import BOTH, MoveRecord

ENV_ID = "dcsim/VMR2L-v0"
REWARD_SCALE = 128.0


class VMR2LEnvConfig(BaseModel):
    """The environment's settings (also a training config's environment keys)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    preset: str = "production_small"
    hosts: int | tuple[int, int] | None = None   # None: the preset's; [lo, hi]: drawn
    mnl: int = Field(20, ge=1)
    max_vms: int | None = Field(None, ge=1)      # None: 16 per host (enough at 94 % cpu)

    @field_validator("preset")
    @classmethod
    def _preset(cls, v: str) -> str:
        if v not in PRESETS:
            raise ValueError(f"unknown preset {v!r}; available: {', '.join(PRESETS)}")
        return v

    @field_validator("hosts")
    @classmethod
    def _hosts(cls, v):
        if v is None:
            return v
        lo, hi = (v, v) if isinstance(v, int) else v
        if not 1 <= lo <= hi:
            raise ValueError(f"hosts must be >= 1 (a range low <= high), got {v}")
        return v

    @property
    def host_range(self) -> tuple[int, int]:
        if self.hosts is None:
            n = PRESETS[self.preset]["hosts"]
            return n, n
        return (self.hosts, self.hosts) if isinstance(self.hosts, int) else tuple(self.hosts)

    @property
    def max_hosts(self) -> int:
        return self.host_range[1]

    @property
    def vm_capacity(self) -> int:
        return self.max_vms if self.max_vms is not None else 16 * self.max_hosts


def load_env_config(config: VMR2LEnvConfig | dict[str, Any] | None = None,
                    overrides: dict[str, Any] | None = None, where: str = "env"
                    ) -> VMR2LEnvConfig:
    """``config`` (a :class:`VMR2LEnvConfig`, a mapping of its fields or None for the
    defaults) with ``overrides`` replacing fields, validated; an invalid or unknown field is
    a :class:`~dcsim.errors.ConfigError` naming it (``env.mnl: ...``)."""
    if isinstance(config, VMR2LEnvConfig) and not overrides:
        return config
    base = config.model_dump() if isinstance(config, VMR2LEnvConfig) else dict(config or {})
    try:
        return VMR2LEnvConfig.model_validate({**base, **overrides})
    except ValidationError as e:
        raise ConfigError(first_error(e, where)) from None


class VMR2LEnv(Rendered, gym.Env):
    """VMR²L rescheduling as a Gymnasium environment (see the module docstring).

    ``VMR2LEnv(config)`` with a :class:`VMR2LEnvConfig` (or a mapping of its fields); keyword
    arguments override fields (``gymnasium.make("dcsim/VMR2L-v0", hosts=8)``), except
    ``render_mode`` (Gymnasium's: None, ``"ansi"`` or ``"rgb_array"``), which is not a
    setting.
    """

    metadata = {"render_modes": list(RENDER_MODES), "render_fps": 4}

    def __init__(self, config: VMR2LEnvConfig | dict[str, Any] | None = None, *,
                 render_mode: str | None = None, **kwargs: Any):
        self.render_mode = checked_render_mode(render_mode, ENV_ID)
        self.config = config = load_env_config(config, kwargs)
        H, M = config.max_hosts, config.vm_capacity
        self.observation_space = spaces.Dict({
            "hosts": spaces.Box(0.0, 1.0, (H, HOST_FEATURES), dtype=np.float32),
            "vms": spaces.Box(0.0, 1.0, (M, VM_FEATURES), dtype=np.float32),
            "vm_host": spaces.Box(-1, H - 1, (M,), dtype=np.int64),
            "vm_count": spaces.Discrete(M + 1),
            "host_count": spaces.Discrete(H + 1),
            "step": spaces.Box(0.0, 1.0, (1,), dtype=np.float32),
        })
        self.action_space = spaces.MultiDiscrete([M, 2 * H])
        self.state: MappingState | None = None
        self.tokens = np.zeros(0, dtype=np.int64)
        self.t = 0
        #: what the last step did, for render(): None before it, else (invalid, the move
        #: applied or None, the fragment before, after)
        self._last: tuple[bool, MoveRecord | None, int, int] | None = None

    # ------------------------------------------------------------------ helpers
    def _draw(self) -> MappingState:
        lo, hi = self.config.host_range
        hosts = int(self.np_random.integers(lo, hi + 1))
        seed = int(self.np_random.integers(2**62))
        doc = synthetic_preset(self.config.preset, seed, hosts=hosts)
        return parse_mapping(doc, f"synthetic {self.config.preset}").state

    def _load(self, state: MappingState) -> None:
        tokens = tokens_of(state)
        if state.n_hosts > self.config.max_hosts:
            raise ConfigError(f"mapping has {state.n_hosts} hosts, more than max_hosts "
                              f"{self.config.max_hosts} of the environment")
        if len(tokens) > self.config.vm_capacity:
            raise ConfigError(f"mapping has {len(tokens)} migratable VMs, more than max_vms "
                              f"{self.config.vm_capacity}: raise max_vms")
        self.state = state.copy()
        self.tokens = tokens
        self.t = 0
        self._last = None
        self._features = observe(self.state, self.tokens)
        self._fragment = self.state.fragment()
        self._total_free = self.state.total_free_cpu()   # a migration does not change it

    def features(self) -> tuple[np.ndarray, np.ndarray]:
        """Unpadded ``(hosts (H, 8), vms (M, 14))`` of the current state (the environment's
        own arrays, updated in place by each step: copy them to keep them)."""
        return self._features

    def _moved(self, src: int, dst: int) -> None:
        """A migration from host ``src`` to ``dst`` was applied: update the features."""
        update_features(self.state, self.tokens, *self._features, (src, dst))

    def _obs(self) -> dict[str, Any]:
        H, M = self.config.max_hosts, self.config.vm_capacity
        hf, vf = self.features()
        hosts = np.zeros((H, HOST_FEATURES), dtype=np.float32)
        hosts[:len(hf)] = hf
        vms = np.zeros((M, VM_FEATURES), dtype=np.float32)
        vms[:len(vf)] = vf
        vm_host = np.full(M, -1, dtype=np.int64)
        vm_host[:len(self.tokens)] = self.state.vm_host[self.tokens]
        return {"hosts": hosts, "vms": vms, "vm_host": vm_host,
                "vm_count": len(self.tokens), "host_count": self.state.n_hosts,
                "step": np.array([self.t / self.config.mnl], dtype=np.float32)}

    def vm_mask(self) -> np.ndarray:
        """``(max_vms,)`` bool: the real tokens (each may be chosen)."""
        m = np.zeros(self.config.vm_capacity, dtype=bool)
        m[:len(self.tokens)] = True
        return m

    def slot_mask(self, token: int) -> np.ndarray:
        """``(2 max_hosts,)`` bool: the legal slots for token ``token``."""
        m = np.zeros(2 * self.config.max_hosts, dtype=bool)
        if 0 <= token < len(self.tokens):
            ok = host_mask(self.state, int(self.tokens[token]))
            m[:len(ok)] = ok
        return m

    # ------------------------------------------------------------------ gymnasium API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        mapping = (options or {}).get("mapping")
        self._load(mapping if mapping is not None else self._draw())
        return self._obs(), {"fragment_rate": self.state.fragment_rate(),
                             "fragment": self.state.fragment()}

    def step(self, action):
        if self.state is None:
            raise RuntimeError("call reset() before step()")
        token, slot = int(action[0]), int(action[1])
        before = self._fragment
        invalid = not (0 <= token < len(self.tokens)) or not self.slot_mask(token)[slot]
        moved = record = None
        if not invalid:
            m = slot_migration(self.state, int(self.tokens[token]), slot)
            if m is not None:
                src = int(self.state.vm_host[m.vm])
                record = self.state.apply(m, self.t + 1)
                self._moved(src, m.host)
                moved = m
        self.t += 1
        after = self._fragment = self.state.fragment() if moved is not None else before
        self._last = (invalid, record, before, after)
        reward = (before - after) / REWARD_SCALE
        done = self.t >= self.config.mnl
        info = {"invalid": invalid, "moved": moved is not None, "migration": moved,
                "fragment": after,   # MappingState.fragment_rate(), without summing again
                "fragment_rate": after / self._total_free if self._total_free else 0.0}
        return self._obs(), float(reward), done, False, info


    # ------------------------------------------------------------------ rendering
    def render_text(self, env_id: str = ENV_ID) -> str:
        """``render()``'s text, headed by ``env_id`` (the two-step variant's own)."""
        st, cfg = self.state, self.config
        if st is None:
            return f"{env_id}: no episode yet (call reset())"
        free = st.total_free_cpu()
        lines = [
            f"{env_id}  step {self.t} of {cfg.mnl} ({cfg.mnl - self.t} to go)  "
            f"{st.n_hosts} hosts, {len(self.tokens)} migratable VMs of {st.n_vms}",
            f"fragment: {self._fragment} of {free} free cores (rate "
            f"{self._fragment / free if free else 0.0:.4f})  utilisation: cpu "
            f"{100 * st.util_cpu():.1f}%  mem {100 * st.util_mem():.1f}%"]
        if self._last is None:
            lines.append("last step: none yet")
        else:
            invalid, rec, before, after = self._last
            if rec is not None:
                what = (f"VM {st.vm_ids[rec.vm]} moved "
                        f"{slot_text(st, rec.from_host, rec.from_numa)}"
                        f" -> {slot_text(st, rec.to_host, rec.to_numa)}, fragment {before} -> "
                        f"{after} cores")
            else:
                what = ("an action the masks forbid (a no-op)" if invalid
                        else "a no-op (the VM's own host)")
            lines.append(f"last step: {what}")
        return "\n".join(lines) + "\n"

    def render_image(self, marks: np.ndarray | None = None) -> np.ndarray:
        """The slots' used cpu and memory; ``marks`` (per slot) replaces the last
        migration's."""
        H = self.config.max_hosts
        used = np.full((2 * H, 2), np.nan)
        if self.state is None:
            return bars_image(used, np.zeros(2 * H, dtype=np.int8))
        st = self.state
        for k, (cap, fr) in enumerate(((st.cap_cpu, st.free_cpu), (st.cap_mem, st.free_mem))):
            used[:2 * st.n_hosts, k] = np.divide(cap - fr, cap, out=np.zeros(cap.shape),
                                                 where=cap > 0).ravel()
        if marks is None:
            marks = np.zeros(2 * H, dtype=np.int8)
            rec = self._last[1] if self._last is not None else None
            if rec is not None:
                marks[occupied_slots(rec.from_host, rec.from_numa)] = 3
                marks[occupied_slots(rec.to_host, rec.to_numa)] = 2
        return bars_image(used, marks)


def occupied_slots(host: int, numa: int) -> list[int]:
    """The action slots (``2h + j``) a VM on ``host``, NUMA ``numa`` occupies."""
    return [2 * host, 2 * host + 1] if numa == BOTH else [2 * host + numa]


def slot_text(state: MappingState, host: int, numa: int) -> str:
    """``host/numa`` as text (``host/both`` for a double-NUMA VM)."""
    return f"{state.host_ids[host]}/{'both' if numa == BOTH else numa}"


# --------------------------------------------------------------------------- two steps
TWOSTEP_ENV_ID = "dcsim/VMR2L-TwoStep-v0"


class VMR2LTwoStepEnv(gym.Env):
    """A migration as two steps, the VM then its slot (the module docstring's second part)."""

    metadata = {"render_modes": list(RENDER_MODES), "render_fps": 4}

    def __init__(self, config: VMR2LEnvConfig | dict[str, Any] | None = None, *,
                 render_mode: str | None = None, **kwargs: Any):
        self.render_mode = checked_render_mode(render_mode, TWOSTEP_ENV_ID)
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
            text = inner.render_text(TWOSTEP_ENV_ID)
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


def register() -> None:
    """Register dcsim's Gymnasium environments (idempotent; see
    :func:`dcsim.environments.register_envs`)."""
    register_envs()


register()
