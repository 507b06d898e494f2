"""``dcsim train vmr2l``'s settings (:class:`TrainConfig`, every key of a training YAML),
their loading with errors naming the file and the field, and the checkpoint ``init_from``
names."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError
from pydantic.dataclasses import dataclass as pydantic_dataclass

from dcsim.errors import ConfigError
from dcsim.learn.config import read_train_config
from dcsim.learn.vmr2l.env import VMR2LEnvConfig
from dcsim.reschedulers.vmr2l import (
    Architecture,
    Checkpoint,
    checkpoint_path,
    load_checkpoint,
)


@pydantic_dataclass(config=ConfigDict(extra="forbid", allow_inf_nan=False))
class TrainConfig:
    """Hyper-parameters (a YAML training config holds any of these keys)."""

    # --- run
    seed: int = 0
    iterations: int = Field(200, ge=1)
    max_wall_s: float | None = Field(None, gt=0.0)
    threads: int = Field(1, ge=1)
    device: Literal["auto", "cpu", "cuda"] = "auto"
    deterministic: bool = True  # see dcsim.learn.nara.config.TrainConfig
    # --- environment
    preset: str = "production_small"
    hosts: int | tuple[int, int] | None = (16, 40)
    mnl: int = Field(20, ge=1)
    max_vms: int | None = Field(None, ge=1)
    # --- PPO (the authors' settings)
    num_envs: int = Field(8, ge=1)
    num_steps: int = Field(250, ge=1)
    num_workers: int = Field(1, ge=1)  # processes stepping the environments (1: this one)
    # decisions per minibatch (the authors: 16 minibatches of 8 x 250 = 2000, i.e. 125)
    minibatch_size: int = Field(125, ge=1)
    # each minibatch's gradient as the sum of this many parts, computed in the num_workers
    # processes (see dcsim.learn.workers.shards; needs dropout 0); 1: in one pass
    update_shards: int = Field(1, ge=1)
    update_epochs: int = Field(8, ge=1)
    lr: float = Field(2.5e-4, gt=0.0)
    anneal_lr: bool = True
    gamma: float = Field(0.99, ge=0.0, le=1.0)
    gae_lambda: float = Field(0.95, ge=0.0, le=1.0)
    clip_coef: float = Field(0.1, gt=0.0)
    clip_vloss: bool = True
    ent_coef: float = Field(0.005, ge=0.0)
    vf_coef: float = Field(0.01, ge=0.0)
    max_grad_norm: float = Field(0.5, gt=0.0)
    norm_adv: bool = True
    target_kl: float | None = Field(0.15, gt=0.0)
    # --- network (the paper's)
    d_model: int = Field(32, ge=1)
    heads: int = Field(2, ge=1)
    encoder_layers: int = Field(2, ge=1)
    decoder_layers: int = Field(2, ge=1)
    d_ff: int = Field(64, ge=1)
    attention: Literal["dense", "sparse"] = "dense"
    dropout: float = Field(0.0, ge=0.0, lt=1.0)
    # --- optional warm start: behaviour cloning of a heuristic before PPO (dcsim's, see
    # the module docstring); none: PPO from random weights, as the authors
    warmstart: Literal["none", "alpha_vbpp", "greedy"] = "none"
    warmstart_mappings: int = Field(200, ge=1)
    warmstart_epochs: int = Field(10, ge=1)
    warmstart_lr: float = Field(1e-3, gt=0.0)
    # --- fine-tuning: start from these weights (a checkpoint .npz or a shipped policy's
    # name, e.g. vmr2l_production; its architecture must be this config's). They are
    # evaluated first, as iteration 0, so the best checkpoint is never worse than them on
    # the eval mappings. Excludes the warm start.
    init_from: str | None = None
    # --- evaluation on held-out mappings
    eval_every: int = Field(5, ge=1)
    eval_mappings: int = Field(8, ge=1)
    eval_preset: str = "production_small"
    eval_hosts: int | None = Field(None, ge=1)
    eval_mnl: int | None = Field(None, ge=1)     # None: mnl
    eval_samples: int = Field(1, ge=1)           # 1: greedy (argmax)
    eval_seed: int = 1_000_003

    def __post_init__(self):
        if self.d_model % self.heads:
            raise ValueError(f"d_model: {self.d_model} is not a multiple of heads "
                             f"{self.heads}")
        if self.init_from is not None and self.warmstart != "none":
            raise ValueError(f"init_from: starts from trained weights; it cannot be "
                             f"combined with warmstart: {self.warmstart} (set "
                             f"warmstart: none)")
        if self.update_shards > 1 and self.dropout > 0:
            raise ValueError(f"update_shards: {self.update_shards} parts of a minibatch "
                             f"would draw dropout masks in different processes; set "
                             f"dropout: 0 or update_shards: 1")

    def env_config(self) -> VMR2LEnvConfig:
        return VMR2LEnvConfig(preset=self.preset, hosts=self.hosts, mnl=self.mnl,
                              max_vms=self.max_vms)

    def architecture(self) -> Architecture:
        return Architecture(d_model=self.d_model, heads=self.heads,
                            encoder_layers=self.encoder_layers,
                            decoder_layers=self.decoder_layers, d_ff=self.d_ff,
                            attention=self.attention)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _num_minibatches(raw: dict[str, Any]) -> str:
    """What replaces ``num_minibatches`` (before #36; the minibatch size is what both PPO
    trainers, and the papers, state)."""
    n = raw.get("num_envs", 8) * raw.get("num_steps", 250)
    k = raw["num_minibatches"]
    size = f"{max(1, n // k)}" if isinstance(n, int) and isinstance(k, int) and k > 0 else (
        "num_envs x num_steps / num_minibatches")
    return (f"set minibatch_size (decisions per minibatch) instead: {k} minibatches of "
            f"{n} decisions are minibatch_size: {size}")


def load_train_config(path: str | Path, **overrides: Any) -> TrainConfig:
    """Read and validate a YAML training config; errors name the file and the field."""
    cfg = read_train_config(path, TrainConfig, renamed={"num_minibatches": _num_minibatches},
                            **overrides)
    for field, check in (("preset", cfg.env_config),
                         ("eval_preset", lambda: VMR2LEnvConfig(preset=cfg.eval_preset))):
        try:
            check()
        except ValidationError as e:
            err = e.errors()[0]
            where = ".".join(str(x) for x in err["loc"]) or field
            if field == "eval_preset":
                where = field
            raise ConfigError(f"{path}: {where}: "
                              f"{err['msg'].removeprefix('Value error, ')}") from None
    if cfg.init_from is not None:
        try:
            initial_weights(cfg)
        except ConfigError as e:
            raise ConfigError(f"{path}: {e}") from None
    return cfg


def initial_weights(cfg: TrainConfig) -> Checkpoint:
    """The checkpoint ``init_from`` names, checked against ``cfg``'s architecture (a
    :class:`ConfigError` naming ``init_from`` otherwise)."""
    assert cfg.init_from is not None
    try:
        ck = load_checkpoint(checkpoint_path(cfg.init_from))
    except ConfigError as e:
        raise ConfigError(f"init_from: {e}") from None
    if ck.arch != cfg.architecture():
        have, want = dataclasses.asdict(ck.arch), dataclasses.asdict(cfg.architecture())
        diff = ", ".join(f"{k} {have[k]!r} (config: {want[k]!r})" for k in want
                         if have[k] != want[k])
        raise ConfigError(f"init_from: {ck.path} has another architecture: {diff}")
    return ck
