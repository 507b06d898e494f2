"""A tiny environment for the lock-step and group-rollout machinery: observations of a few
floats that depend on the seed and the actions, episodes of 2 to 5 steps (by seed)."""

from __future__ import annotations

import numpy as np


class CountingEnv:
    """Observation ``{"x": (ACTIONS,) float32}``; reward = the action taken; the episode
    ends after ``2 + seed % 4`` steps (``info``: its seed and length)."""

    ACTIONS = 4

    def __init__(self):
        self.seed = 0
        self.t = 0
        self.x = np.zeros(self.ACTIONS, dtype=np.float32)

    def reset(self, seed: int | None = None):
        self.seed, self.t = int(seed or 0), 0
        self.x = np.random.default_rng(self.seed).random(self.ACTIONS).astype(np.float32)
        return {"x": self.x.copy()}, {}

    def step(self, action: int):
        self.t += 1
        self.x = np.roll(self.x, int(action)) + np.float32(0.25 * action)
        done = self.t >= 2 + self.seed % 4
        info = {"seed": self.seed, "length": self.t} if done else {}
        return {"x": self.x.copy()}, float(action), done, False, info


def in_a_worker() -> bool:
    """Whether this is an environment worker process (:mod:`dcsim.learn.workers.lockstep`)."""
    import multiprocessing

    return multiprocessing.current_process().name.startswith("dcsim-env-worker")


def failing_in_a_worker() -> CountingEnv:
    """A CountingEnv here; an error in a worker (its environments cannot be built)."""
    if in_a_worker():
        raise RuntimeError("no environment in a worker")
    return CountingEnv()


def waiting_in_a_worker(path: str) -> CountingEnv:
    """A CountingEnv, built in a worker only once ``path`` exists (20 s at most)."""
    import os
    import time

    end = time.monotonic() + 20
    while in_a_worker() and not os.path.exists(path):
        if time.monotonic() > end:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(0.01)
    return CountingEnv()


def broken_attachment(local) -> None:
    """An attachment that cannot be built."""
    raise RuntimeError("cannot attach this")
