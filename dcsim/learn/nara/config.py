"""``dcsim train nara``'s settings (:class:`TrainConfig`, every key of a training YAML), their
loading with errors naming the file and the field, and the weights ``init_from`` names."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import ConfigDict, Field
from pydantic.dataclasses import dataclass as pydantic_dataclass

from dcsim.allocators.multi.learned import (
    Architecture,
    checkpoint_path,
    load_checkpoint,
)
from dcsim.errors import ConfigError
from dcsim.learn.config import read_train_config
from dcsim.learn.nara.env import UNIFORM_WORKLOAD, NaraEnv, NaraEnvConfig


def _alpha() -> dict[str, Any]:
    return {"kind": "fabric", "preset": "alpha"}


def _uniform() -> dict[str, Any]:
    return dict(UNIFORM_WORKLOAD)


@pydantic_dataclass(config=ConfigDict(extra="forbid", allow_inf_nan=False))
class TrainConfig:
    """Hyper-parameters (a YAML training config holds any of these keys)."""

    # --- run
    seed: int = 0
    iterations: int = Field(100, ge=1)
    max_wall_s: float | None = Field(None, gt=0.0)  # stop (evaluate, save) after this long
    threads: int = Field(1, ge=1)                 # torch threads (CPU)
    device: Literal["auto", "cpu", "cuda"] = "auto"  # auto: CUDA when available
    # bit-reproducible training on a GPU where torch allows (deterministic algorithms, the
    # cuBLAS workspace setting; see dcsim.learn.trainer.make_deterministic); the CPU is
    # deterministic either way
    deterministic: bool = True
    # --- environment (NaraEnvConfig; experiment-file sections)
    topology: dict[str, Any] = Field(default_factory=_alpha)
    topologies: list[dict[str, Any]] | None = None  # one drawn per episode (replaces topology)
    features: Literal[1, 2] = 1                   # observation feature version (2: optical)
    workload: dict[str, Any] = Field(default_factory=_uniform)
    episode_requests: int = Field(32, ge=1)       # paper: 32 in training
    capacity: Literal["wait", "reject"] = "wait"
    departures: Literal["before_arrivals", "after_first_step"] = "before_arrivals"
    reservation: Literal["union", "per_pair_channel"] = "union"
    k_paths: int = Field(3, ge=1)
    # the action mask and the pair rule (the Nara allocators' options of the same names):
    # any_free / authors_sticky train under the rules the authors' baselines run with
    eligible: Literal["needed", "any_free"] = "needed"
    pair_paths: Literal["all", "cpu", "authors_sticky"] = "all"
    reward_success: float = 10.0                  # paper: x = 10
    reward_failure: float = -10.0                 # paper: y = -10
    reward_step: float = 0.0                      # paper: z = 0
    holding_scale: float | None = Field(None, gt=0.0)
    # folder that relative trace/topology paths resolve against: the config file's folder
    # when read by load_train_config (not recorded in checkpoints)
    base_dir: str | None = None
    # --- PPO
    num_envs: int = Field(8, ge=1)
    num_steps: int = Field(256, ge=1)             # per env per iteration (8 x 256 = 2048)
    # processes stepping the num_envs environments (1: this one); the same seed gives the
    # same weights whatever the number (see dcsim.learn.workers.lockstep)
    num_workers: int = Field(1, ge=1)
    minibatch_size: int = Field(256, ge=1)        # paper: sgd_minibatch_size 256
    # each minibatch's gradient as the sum of this many parts, computed in the num_workers
    # processes (see dcsim.learn.workers.shards): the update scales with cores; 1: in one pass
    update_shards: int = Field(1, ge=1)
    # the rollout in this many groups of environments, each run whole by one of the
    # num_workers processes, its policy forward there (see dcsim.learn.workers.groups): the
    # rollout scales with cores; 1: the trainer computes every forward (> 1: on the CPU,
    # device auto picks it)
    rollout_groups: int = Field(1, ge=1)
    update_epochs: int = Field(4, ge=1)
    lr: float = Field(1e-3, gt=0.0)               # paper: 5e-3 (RLlib)
    anneal_lr: bool = True
    gamma: float = Field(0.99, ge=0.0, le=1.0)
    gae_lambda: float = Field(0.95, ge=0.0, le=1.0)
    clip_coef: float = Field(0.2, gt=0.0)
    clip_vloss: bool = True
    ent_coef: float = Field(0.01, ge=0.0)
    vf_coef: float = Field(0.5, ge=0.0)
    max_grad_norm: float = Field(0.5, gt=0.0)
    norm_adv: bool = True
    target_kl: float | None = Field(None, gt=0.0)
    # --- network (App. E)
    embed: int = Field(16, ge=1)
    layers: int = Field(3, ge=1)
    obs_hidden: int = Field(8, ge=1)
    obs_out: int = Field(8, ge=1)
    logit_hidden: int = Field(16, ge=0)           # 0: one linear layer (the paper's P2)
    value_hidden: int = Field(16, ge=1)
    # --- evaluation (greedy, held-out seeds)
    eval_every: int = Field(5, ge=1)
    eval_episodes: int = Field(8, ge=1)
    eval_requests: int = Field(128, ge=1)         # paper: 128-request test episodes on alpha
    eval_seed: int = 1_000_003
    # --- starting point (fine-tuning)
    # a policy to start from: a checkpoint .npz or a shipped policy's name (optical_all);
    # its architecture and feature version must be this config's. The critic starts fresh.
    init_from: str | None = None
    # iterations at the start that train only the critic (the policy is frozen): a fresh
    # critic's advantages would otherwise push a trained policy around at random
    critic_warmup: int = Field(0, ge=0)

    def __post_init__(self):
        if self.rollout_groups > self.num_envs:
            raise ValueError(f"rollout_groups: {self.rollout_groups} groups of "
                             f"num_envs: {self.num_envs} environments; at most one group "
                             f"per environment")
        if self.rollout_groups > 1:  # the groups' forward passes run in the workers, on CPU
            if self.device == "cuda":
                raise ValueError(f"rollout_groups: {self.rollout_groups} runs the rollout's "
                                 f"forward passes in the worker processes, on the CPU; set "
                                 f"device: cpu (or auto) or rollout_groups: 1")
            self.device = "cpu"

    def env_config(self, requests: int | None = None) -> NaraEnvConfig:
        return NaraEnvConfig(topology=self.topology, topologies=self.topologies,
                             features=self.features, workload=self.workload,
                             requests=requests or self.episode_requests,
                             capacity=self.capacity, departures=self.departures,
                             reservation=self.reservation, k_paths=self.k_paths,
                             eligible=self.eligible, pair_paths=self.pair_paths,
                             reward_success=self.reward_success,
                             reward_failure=self.reward_failure, reward_step=self.reward_step,
                             holding_scale=self.holding_scale, base_dir=self.base_dir)

    def eval_configs(self) -> list[NaraEnvConfig]:
        """One environment per evaluated topology (``topologies``, or ``topology``), with
        ``eval_requests``-request episodes."""
        cfg = self.env_config(self.eval_requests)
        return [cfg.model_copy(update={"topology": t, "topologies": None})
                for t in (self.topologies or [self.topology])]

    def architecture(self, n_resources: int) -> Architecture:
        return Architecture.for_resources(n_resources, self.features, embed=self.embed,
                                          layers=self.layers,
                                          obs_hidden=self.obs_hidden, obs_out=self.obs_out,
                                          logit_hidden=self.logit_hidden)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        del d["base_dir"]  # a local folder: checkpoints stay portable
        return d


def load_train_config(path: str | Path, **overrides: Any) -> TrainConfig:
    """Read a YAML training config (keys: :class:`TrainConfig`'s fields) and validate it;
    ``overrides`` replace keys (CLI options). Errors are :class:`ConfigError` naming the
    file and the field; relative paths in ``topology``/``workload`` (a trace's ``path``)
    resolve against the config file's folder, as in an experiment file."""
    overrides.setdefault("base_dir", str(Path(path).resolve().parent))
    cfg = read_train_config(path, TrainConfig, **overrides)
    try:  # the environment sections are checked by their builders
        env = NaraEnv(cfg.env_config())
        if cfg.init_from is not None:
            initial_weights(cfg, len(env.topology.resources))
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None
    return cfg


def initial_weights(cfg: TrainConfig, n_resources: int) -> dict[str, np.ndarray]:
    """The policy weights ``init_from`` names, checked against ``cfg``'s architecture and
    feature version (a :class:`ConfigError` naming ``init_from`` otherwise)."""
    assert cfg.init_from is not None
    try:
        ck = load_checkpoint(checkpoint_path(cfg.init_from))
    except ConfigError as e:
        raise ConfigError(f"init_from: {e}") from None
    if ck.features != cfg.features:
        raise ConfigError(f"init_from: {ck.path} was trained on feature version "
                          f"{ck.features}, the config sets features: {cfg.features}")
    want = cfg.architecture(n_resources)
    if ck.arch != want:
        diff = ", ".join(f"{k} {getattr(ck.arch, k)} (config: {getattr(want, k)})"
                         for k in Architecture.__dataclass_fields__
                         if getattr(ck.arch, k) != getattr(want, k))
        raise ConfigError(f"init_from: {ck.path} has another architecture: {diff}")
    return ck.weights
