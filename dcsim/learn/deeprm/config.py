"""``dcsim train deeprm``'s settings (:class:`TrainConfig`, every key of a training YAML) and
their loading with errors naming the file and the field."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import ConfigDict, Field
from pydantic.dataclasses import dataclass as pydantic_dataclass

from dcsim.learn.config import read_train_config
from dcsim.queue.env import QueueConfig
from dcsim.queue.jobs import JobSet, deeprm_jobset
from dcsim.schedulers.deeprm import (
    ImageSpec,
)


@pydantic_dataclass(config=ConfigDict(extra="forbid", allow_inf_nan=False))
class TrainConfig:
    """Hyper-parameters (a YAML training config holds any of these keys)."""

    # --- run
    seed: int = 0
    iterations: int = Field(300, ge=1)
    max_wall_s: float | None = Field(None, gt=0.0)  # stop (evaluate, save) after this long
    threads: int = Field(1, ge=1)                 # torch threads (CPU)
    # --- REINFORCE
    jobsets_per_iter: int = Field(10, ge=1)       # N (authors: 100 job sets)
    rollouts: int = Field(20, ge=1)               # R per job set (paper: 20)
    discount: float = Field(1.0, ge=0.0, le=1.0)  # γ (paper: 1)
    optimizer: Literal["adam", "rmsprop"] = "adam"  # paper: Adam; Mao et al.: RMSProp
    lr: float = Field(1e-3, gt=0.0)               # paper: 0.001
    rms_rho: float = Field(0.9, gt=0.0, lt=1.0)   # RMSProp only (authors' values)
    rms_eps: float = Field(1e-9, gt=0.0)
    hidden: int = Field(20, ge=1)                 # paper: one hidden layer of 20
    init_std: float = Field(0.01, gt=0.0)         # authors: Normal(0.01) weights, 0 biases
    episode_max_length: int = Field(1000, ge=1)   # decisions per training rollout
    train_pool: int = Field(0, ge=0)              # 0: fresh job sets each iteration
    # --- evaluation (greedy, held-out job sets)
    eval_every: int = Field(10, ge=1)
    eval_jobsets: int = Field(50, ge=1)
    eval_seed: int = 1_000_003
    # --- environment (QueueConfig) and image
    capacity: float = Field(10.0, gt=0.0)
    horizon: int = Field(20, ge=1)
    slots: int = Field(10, ge=1)
    backlog: int = Field(60, ge=0)
    max_steps: int = Field(500, ge=1)             # time steps before an episode is cut off
    penalty_running: float = -1.0
    penalty_slots: float = -1.0
    penalty_backlog: float = -1.0
    max_job_size: int = Field(10, ge=1)
    max_track: int = Field(10, ge=1)
    # --- job distribution (deeprm_jobset)
    resources: tuple[str, ...] = ("cpu", "mem")
    steps: int = Field(50, ge=1)
    new_job_rate: float = Field(0.7, ge=0.0, le=1.0)
    short_prob: float = Field(0.8, ge=0.0, le=1.0)
    short_len: tuple[int, int] = (1, 3)
    long_len: tuple[int, int] = (10, 15)
    dominant: tuple[int, int] = (5, 10)
    other: tuple[int, int] = (1, 2)

    def __post_init__(self):
        for name in ("short_len", "long_len", "dominant", "other"):
            lo, hi = getattr(self, name)
            if lo > hi:
                raise ValueError(f"{name}: lower bound {lo} exceeds upper bound {hi}")
        if min(self.short_len[0], self.long_len[0]) < 1:
            raise ValueError("short_len/long_len: job lengths must be >= 1")
        if self.capacity != round(self.capacity):
            raise ValueError(f"capacity: the image needs a whole number of slots, not "
                             f"{self.capacity}")
        if not self.resources:
            raise ValueError("resources: name at least one resource")

    def queue_config(self) -> QueueConfig:
        return QueueConfig(capacity=self.capacity, horizon=self.horizon, slots=self.slots,
                           backlog=self.backlog, max_steps=self.max_steps,
                           penalty_running=self.penalty_running,
                           penalty_slots=self.penalty_slots,
                           penalty_backlog=self.penalty_backlog)

    def image_spec(self) -> ImageSpec:
        return ImageSpec.for_queue(self.queue_config(), len(self.resources),
                                   max_job_size=self.max_job_size, max_track=self.max_track)

    def job_params(self) -> dict[str, Any]:
        return {"steps": self.steps, "new_job_rate": self.new_job_rate,
                "resources": list(self.resources), "short_prob": self.short_prob,
                "short_len": list(self.short_len), "long_len": list(self.long_len),
                "dominant": list(self.dominant), "other": list(self.other)}

    def jobset(self, rng: np.random.Generator) -> JobSet:
        p = self.job_params()
        return deeprm_jobset(rng, **{**p, "resources": tuple(p["resources"])})

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}


def load_train_config(path: str | Path, **overrides: Any) -> TrainConfig:
    """Read a YAML training config (keys: :class:`TrainConfig`'s fields) and validate it;
    ``overrides`` replace keys (CLI options). Errors are :class:`ConfigError` naming the
    file and the field."""
    return read_train_config(path, TrainConfig, **overrides)
