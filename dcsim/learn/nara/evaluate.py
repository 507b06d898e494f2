"""Evaluating a Nara policy on held-out episodes, and Tetris on the same episodes for
reference: what :mod:`dcsim.learn.nara.train` reports at each evaluation and records in a
checkpoint's sidecar (``eval_acceptance``, ``eval_tetris``, ``eval_per_topology``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from dcsim.allocators.multi.baselines import tetris_scores
from dcsim.learn.nara.env import NaraEnv, NaraEnvConfig
from dcsim.learn.nara.network import stack_obs
from dcsim.modes.loss.metrics import acceptance_last20

__all__ = ["evaluate", "evaluate_tetris", "per_topology", "summary"]


def summary(envs: list[NaraEnv]) -> dict[str, float]:
    """Mean acceptance_last20 and mean acceptance ratio over finished episodes."""
    last20, ratio = [], []
    for env in envs:
        flags = np.array([p is not None for _, p in env.results], dtype=bool)
        last20.append(acceptance_last20(flags))
        ratio.append(float(flags.mean()))
    return {"acceptance": float(np.mean(last20)), "acceptance_ratio": float(np.mean(ratio))}


def per_topology(cfgs: list[NaraEnvConfig], envs: list[NaraEnv], n: int
                  ) -> dict[str, Any]:
    """Means over the topologies of each one's means over its ``n`` episodes (envs in
    config-major order), and each topology's (by topology name) when there are several."""
    parts = [summary(envs[i * n:(i + 1) * n]) for i in range(len(cfgs))]
    out: dict[str, Any] = {k: float(np.mean([p[k] for p in parts])) for k in parts[0]}
    if len(cfgs) > 1:
        out["per_topology"] = {envs[i * n].topology.name: parts[i]["acceptance"]
                               for i in range(len(cfgs))}
    return out


def evaluate(act: Callable[[dict[str, np.ndarray]], np.ndarray],
             env_cfg: NaraEnvConfig | list[NaraEnvConfig], seeds: list[int]
             ) -> dict[str, Any]:
    """Run one episode per seed (and per config, when given a list; all in lock-step)
    choosing ``act(batched obs) -> actions``; returns mean acceptance_last20 and mean
    acceptance ratio over the episodes (over the configs of each one's mean; with several
    configs also ``per_topology``, each one's acceptance_last20)."""
    cfgs = env_cfg if isinstance(env_cfg, list) else [env_cfg]
    envs = [NaraEnv(c) for c in cfgs for _ in seeds]
    obs = [env.reset(seed=s)[0] for env, s in zip(envs, seeds * len(cfgs), strict=True)]
    active = list(range(len(envs)))
    while active:
        acts = act(stack_obs([obs[i] for i in active]))
        still = []
        for i, a in zip(active, acts, strict=True):
            obs[i], _, done, _, _ = envs[i].step(int(a))
            if not done:
                still.append(i)
        active = still
    return per_topology(cfgs, envs, len(seeds))


def evaluate_tetris(env_cfg: NaraEnvConfig | list[NaraEnvConfig], seeds: list[int]
                    ) -> dict[str, Any]:
    """The ``tetris`` choice (App. D.1, penalty 0.9, the allocator's defaults) on the same
    episodes, for reference; the same summary as :func:`evaluate`."""
    cfgs = env_cfg if isinstance(env_cfg, list) else [env_cfg]
    envs = []
    for c in cfgs:
        for s in seeds:
            env = NaraEnv(c)
            env.reset(seed=s)
            inv = env.view.inv_capacity ** 2
            done = False
            while not done:
                a = int(tetris_scores(env.partial, env.view, inv, 0.9).argmax())
                _, _, done, _, _ = env.step(a)
            envs.append(env)
    return per_topology(cfgs, envs, len(seeds))
