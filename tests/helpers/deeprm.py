"""DeepRM builders shared by the scheduler's tests and the trainer's: the authors' image
spec and random policy weights of its shape."""

from __future__ import annotations

import numpy as np

from dcsim.schedulers.deeprm import ImageSpec

SPEC = ImageSpec(horizon=20, capacity=(10, 10), slots=10)  # the authors' defaults


def random_weights(seed=0, spec=SPEC, hidden=20):
    rng = np.random.default_rng(seed)
    return {"w1": rng.normal(0, 0.05, (hidden, spec.size)).astype(np.float32),
            "b1": rng.normal(0, 0.05, hidden).astype(np.float32),
            "w2": rng.normal(0, 0.5, (spec.actions, hidden)).astype(np.float32),
            "b2": rng.normal(0, 0.1, spec.actions).astype(np.float32)}
