"""Tiny trainings for the tests of worker processes, update parts and rollout groups: the
weights and progress of a run, and whether two runs agree bit for bit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from dcsim.learn import resume as rs

NARA = {"iterations": 3, "num_envs": 3, "num_steps": 12, "minibatch_size": 12,
        "update_epochs": 1, "eval_every": 2, "eval_episodes": 1, "eval_requests": 8,
        "episode_requests": 5}
VMR2L = {"iterations": 3, "hosts": [6, 8], "mnl": 3, "num_envs": 3, "num_steps": 5,
         "minibatch_size": 5, "update_epochs": 2, "eval_every": 2, "eval_mappings": 2,
         "eval_hosts": 8, "attention": "sparse", "dropout": 0.1}


def trained(kind: str, out: Path, **kw):
    """A tiny ``kind`` training (``nara`` or ``vmr2l``) in ``out`` with the settings ``kw``
    (``stop_after``, ``resume`` passed to ``train``): its last weights and progress rows
    without the timings, or None when it stopped to be resumed."""
    if kind == "nara":
        from dcsim.allocators.multi.learned import load_checkpoint
        from dcsim.learn.nara import train as mod
        tiny = NARA
    else:
        from dcsim.learn.vmr2l import train as mod
        from dcsim.reschedulers.vmr2l import load_checkpoint
        tiny = VMR2L
    stop_after = kw.pop("stop_after", None)
    resume = kw.pop("resume", False)
    try:
        mod.train(mod.TrainConfig(**{**tiny, **kw}), out, log=None, stop_after=stop_after,
                  resume=resume)
    except rs.TrainingInterrupted:
        return None
    progress = pd.read_parquet(out / "progress.parquet").drop(columns=["wall_s",
                                                                      "steps_per_s"])
    return load_checkpoint(out / "last.npz").weights, progress


def same_weights(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    """Whether two checkpoints' weights are equal, bit for bit."""
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def same(a, b) -> bool:
    """Whether two :func:`trained` results are equal, bit for bit."""
    return same_weights(a[0], b[0]) and a[1].equals(b[1])
