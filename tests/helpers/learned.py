"""The learned Nara policy in a test: random weights, greedy rollouts, the 2023 optical setting."""

from __future__ import annotations

import numpy as np

from dcsim.allocators.multi.learned import Architecture, policy_logits, weight_shapes
from dcsim.greedy import greedy_argmax

NINE = [{"kind": "optical", "channels": n, "oversubscription": o}
        for n in (8, 16, 32) for o in ("1:16", "1:8", "1:4")]
WORKLOAD_2023 = {
    "name": "uniform-2023",
    "arrival": {"process": "tick"},
    "demand": {"cpu": {"dist": "uniform_int", "low": 1, "high": 128},
               "mem": {"dist": "uniform_int", "low": 1, "high": 128}},
    "duration": {"dist": "uniform_int", "low": 1, "high": 29},
    "bandwidth": 1,
}


def random_weights(arch: Architecture, seed: int = 0, std: float = 0.5):
    rng = np.random.default_rng(seed)
    return {k: rng.normal(0, std, s).astype(np.float32) for k, s in weight_shapes(arch).items()}


def greedy_env_servers(ck, env, seed):
    """Drive ``env`` for one episode with checkpoint ``ck``'s greedy numpy choice: the servers
    of each request ([] when it failed), to compare with the ``nara`` allocator's run."""
    env.reset(seed=seed)
    done = False
    while not done:
        o = env.observer.observe(env.partial, env.view)
        _, _, done, _, _ = env.step(greedy_argmax(policy_logits(ck.weights, ck.arch,
                                                                 env.layout, o)))
    return [[] if p is None else p.servers.tolist() for _, p in env.results]


def greedy_numpy_rollout(env, w, arch, seeds, steps):
    """Step ``env`` greedily under the numpy policy ``w`` for up to ``steps`` decisions per
    seed: (the observations, for a torch batch; each step's numpy logits and action mask)."""
    batch, numpy_logits = [], []
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        for _ in range(steps):
            o = env.observer.observe(env.partial, env.view)
            z = policy_logits(w, arch, env.layout, o)
            batch.append(obs)
            numpy_logits.append((z, o["action_mask"]))
            obs, _, done, _, _ = env.step(greedy_argmax(z))
            if done:
                break
    return batch, numpy_logits
