"""A PPO trainer's ``num_envs`` environments, stepped in lock-step.

:class:`LockstepEnvs` steps every environment with its action, resets one whose episode
ended with the next seed drawn from the trainer's episode generator (drawn in environment
order, so the seeds are those of a loop over the environments), and keeps what
``--resume`` rebuilds the episodes in progress from (:class:`~dcsim.learn.resume.
EpisodeLog`: each episode's seed and the actions since) and each episode's return so far.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from dcsim.learn.resume import EpisodeLog


@dataclasses.dataclass
class Step:
    """One lock-step: each environment's next observation (the first of a new episode
    where one ended), reward and whether its episode ended; ``ended``: ``(env, info,
    episode return)`` of each episode that ended, in environment order."""

    obs: list[Any]
    rewards: np.ndarray
    dones: np.ndarray
    ended: list[tuple[int, dict[str, Any], float]]


class LockstepEnvs:
    """``n`` environments made by ``make()``; ``rng`` draws their episodes' seeds;
    ``width``: integers per action in the episode log (1: a discrete action, 2: VMR²L's
    (VM, slot))."""

    def __init__(self, make: Callable[[], Any], n: int, rng: np.random.Generator, *,
                 width: int = 1):
        self.n, self.rng, self.width = n, rng, width
        self.envs = [make() for _ in range(n)]
        self.episodes = EpisodeLog(n, width)
        self.returns = np.zeros(n)

    def _new_seed(self, i: int) -> int:
        seed = int(self.rng.integers(2**62))
        self.episodes.reset(i, seed)
        return seed

    def reset_all(self) -> list[Any]:
        """Every environment reset with a new seed; their first observations."""
        return [env.reset(seed=self._new_seed(i))[0] for i, env in enumerate(self.envs)]

    def call(self, method: str, args: list[Any]) -> list[Any]:
        """``env.method(arg)`` of each environment with its ``arg``."""
        return [getattr(env, method)(a) for env, a in zip(self.envs, args, strict=True)]

    def step(self, actions: list[Any]) -> Step:
        """Each environment stepped with its action; an ended episode's environment reset
        with a new seed."""
        obs: list[Any] = []
        rewards = np.zeros(self.n)
        dones = np.zeros(self.n, dtype=bool)
        ended = []
        for i, (env, a) in enumerate(zip(self.envs, actions, strict=True)):
            o, r, done, _, info = env.step(a)
            self.episodes.step(i, a)
            rewards[i] = r
            self.returns[i] += r
            if done:
                dones[i] = True
                ended.append((i, info, self.returns[i]))
                self.returns[i] = 0.0
                o, _ = env.reset(seed=self._new_seed(i))
            obs.append(o)
        return Step(obs, rewards, dones, ended)

    def arrays(self) -> dict[str, np.ndarray]:
        """The episodes in progress, for a resume state."""
        return {**self.episodes.arrays(), "ep_return": self.returns}

    def restore(self, arrays: dict[str, np.ndarray]) -> list[Any]:
        """The episodes of a resume state rebuilt (each environment reset with its seed and
        its actions replayed); the observations they are at."""
        self.episodes = EpisodeLog.from_arrays(arrays, self.n, self.width)
        self.returns = arrays["ep_return"].copy()
        return self.episodes.replay(self.envs)

    def close(self) -> None:
        """Nothing to release for in-process environments."""
