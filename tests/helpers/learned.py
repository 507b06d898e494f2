"""The learned Nara policy in a test: random weights, greedy rollouts, the 2023 optical setting."""

from __future__ import annotations

import numpy as np

from dcsim.allocators.multi.learned import (
    Architecture,
    greedy_server,
    policy_logits,
    weight_shapes,
)
from dcsim.tie_break import TIE_ATOL, TIE_RTOL, greedy_argmax

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
        _, _, done, _, _ = env.step(greedy_server(ck.inference_weights, ck.arch,
                                                  env.layout, o))
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


def assert_same_greedy_choice(z: np.ndarray, mask: np.ndarray, t: np.ndarray,
                              chosen_by_torch: int) -> None:
    """The numpy policy's greedy choice on logits ``z`` (masked ``-inf``) is the torch
    policy's, ``chosen_by_torch`` (by :func:`dcsim.tie_break.greedy_argmax_torch` on logits
    ``t``, the same servers first), both deciding ties by dcsim's rule.

    The two libraries sum in different orders, so their logits differ by some noise ``d``
    (measured here). The rule then gives both the same set of tied servers, hence the same
    lowest index, unless a server's gap below the maximum lies within ``2d`` of the rule's
    tolerance, where noise can put it on either side. Only then may the choices differ, and
    each must still be a tie, up to that noise, in the other library's logits."""
    i = greedy_argmax(z)
    assert mask[i] and mask[chosen_by_torch]
    S = z.size
    d = float(np.abs(z[mask] - t[:S][mask]).max())
    top = float(z[mask].max())
    tol = max(TIE_ATOL, TIE_RTOL * abs(top))
    gaps = top - z[mask].astype(np.float64)
    slack = 2 * d + TIE_RTOL * d + 4 * float(np.spacing(np.float32(abs(top) + 1)))
    if not (np.abs(gaps - tol) <= slack).any():
        assert chosen_by_torch == i, (
            f"numpy chose {i} ({z[i]!r}), torch {chosen_by_torch} ({t[chosen_by_torch]!r}); "
            f"max {top!r}, noise {d:.3g}, tolerance {tol:.3g}")
    else:  # a server on the tolerance's edge: both choices ties up to the noise
        tt = float(t[:S][mask].max())
        assert z[chosen_by_torch] >= top - tol - slack
        assert t[i] >= tt - max(TIE_ATOL, TIE_RTOL * abs(tt)) - slack
