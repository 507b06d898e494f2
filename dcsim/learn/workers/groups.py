"""A PPO iteration's rollout computed where the environments are, in ``rollout_groups``
fixed groups of environments, so that the rollout scales with worker processes.

With ``rollout_groups: 1`` (the default) the trainer's process computes the policy's
forward pass for every environment at every lock-step and the workers only step theirs
(:mod:`dcsim.learn.workers.lockstep`): every shipped checkpoint was trained so. That forward and a
round trip per lock-step stay serial, which bounds the gain from more processes.

With ``rollout_groups: G`` the environments are split into ``G`` contiguous groups and
each process (the trainer's and each worker's) runs whole groups for the iteration's
``num_steps`` steps on its own: the forward pass of each group on its own (one batch per
group), the action drawn by inverse CDF from a uniform variate the trainer drew for that
environment and step, and an ended episode's environment reset with the seed the trainer
drew for that environment and step; at the end, each group's critic values (one batch per
group). The trainer sends each process the weights, the
environments' observations and those variates and seeds at the start of the iteration,
and gathers the observations, actions, log-probabilities, rewards and episode ends at its
end. A group is computed the same way whichever process runs it, so for a given
``rollout_groups`` the rollout, hence the weights, are the same, bit for bit, at any
``num_workers``; groups are assigned to processes in contiguous runs (at most one process
per group). ``rollout_groups`` is a training setting (as ``update_shards`` is): the forward
of a group is not bit-equal to its rows of a forward over all environments, and the
episodes' seeds are drawn per step, so ``G`` = 1 and ``G`` = 2 train different weights.
The workers have no GPU, so a training with ``G`` > 1 runs on the CPU (``device: auto``
picks it; ``cuda`` is refused when the config is read).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from dcsim.learn.workers.process import Local, pack, unpack


def sample(logp: np.ndarray, u: np.ndarray) -> np.ndarray:
    """One action per row from softmax(``logp``) by inverse CDF (float64), row ``i``
    drawn with the uniform variate ``u[i]`` in [0, 1)."""
    z = logp - logp.max(axis=1, keepdims=True)
    c = np.cumsum(np.exp(z), axis=1)
    a = (c < (u * c[:, -1])[:, None]).sum(axis=1)
    return np.minimum(a, logp.shape[1] - 1)


class Policy(Protocol):
    """What a process runs groups with: ``load(weights)`` sets the networks' weights,
    ``logp(obs)`` gives the policy's log-probabilities ``(len(obs), actions)`` for a list
    of observations, ``values(obs)`` the critic's values ``(len(obs),)``."""

    def load(self, weights: Any) -> None: ...

    def logp(self, obs: list[Any]) -> np.ndarray: ...

    def values(self, obs: list[Any]) -> np.ndarray: ...


@dataclasses.dataclass(frozen=True)
class Runner:
    """A process's side, picklable: ``groups`` (the process's groups, as indices into its
    environments) and ``policy()``, which builds its :class:`Policy`. Called with the
    process's environments (a worker's, when the trainer attaches it; the trainer's own)."""

    groups: list[list[int]]
    policy: Callable[[], Policy]

    def __call__(self, local: Local) -> GroupRunner:
        return GroupRunner(local, self.groups, self.policy())


class GroupRunner:
    """One process's groups of environments, rolled out on request (:meth:`rollout`)."""

    def __init__(self, local: Local, groups: list[list[int]], policy: Policy):
        self.local, self.groups, self.policy = local, groups, policy

    def handle(self, what: str, args: tuple) -> Any:
        if what != "rollout":
            raise ValueError(f"unknown request {what!r}")
        weights, obs, u, seeds = args
        return self.rollout(weights, unpack(obs), u, seeds)

    def rollout(self, weights: Any, obs: list[Any], u: np.ndarray, seeds: np.ndarray
                ) -> dict[str, Any]:
        """``len(u)`` steps of this process's environments, starting from their
        observations ``obs``, with the networks' ``weights``; ``u``, ``seeds``: ``(steps,
        environments)`` uniform variates and episode seeds. Returns the observations
        acted on (``seen``, packed, step-major), the ``actions``, their log-probabilities
        (``logp``), the ``rewards``, the episode ends (``dones``), ``(step, environment,
        info)`` of each ended episode (``ended``), the observations the environments end
        on (``obs``, packed), and the critic's values of the observations acted on
        (``values``) and of those (``next_values``), each group's in one batch."""
        self.policy.load(weights)
        T, n = u.shape
        obs = list(obs)
        seen: list[Any] = []
        actions = np.zeros((T, n), dtype=np.int64)
        logp = np.zeros((T, n), dtype=np.float32)
        rewards = np.zeros((T, n))
        dones = np.zeros((T, n), dtype=bool)
        ended: list[tuple[int, int, dict[str, Any]]] = []
        for t in range(T):
            seen.extend(obs)
            for g in self.groups:
                lp = self.policy.logp([obs[j] for j in g])
                a = sample(lp.astype(np.float64), u[t, g])
                actions[t, g] = a
                logp[t, g] = lp[np.arange(len(g)), a]
            for j, (o, r, done, info) in enumerate(self.local.step(list(actions[t]))):
                rewards[t, j] = r
                if done:
                    dones[t, j] = True
                    ended.append((t, j, info))
                    o = self.local.reset([(j, int(seeds[t, j]))])[0]
                obs[j] = o
        values = np.zeros((T, n), dtype=np.float32)
        next_values = np.zeros(n, dtype=np.float32)
        for g in self.groups:
            values[:, g] = self.policy.values([seen[t * n + j] for t in range(T)
                                               for j in g]).reshape(T, len(g))
            next_values[g] = self.policy.values([obs[j] for j in g])
        return {"seen": pack(seen), "actions": actions, "logp": logp, "rewards": rewards,
                "dones": dones, "ended": ended, "obs": pack(obs), "values": values,
                "next_values": next_values}


@dataclasses.dataclass
class Rolled:
    """An iteration's rollout gathered from every process: the observations acted on (one
    batch, ``steps × environments`` rows, step-major), the actions, their
    log-probabilities and the critic's values ``(steps, environments)``, the values of
    the observations the environments end on, and each step as the lock-step
    environments record it (:meth:`~dcsim.learn.workers.lockstep.LockstepEnvs.recorded`: the
    last holds those observations)."""

    flat: dict[str, np.ndarray]
    actions: np.ndarray
    logp: np.ndarray
    values: np.ndarray
    next_values: np.ndarray
    steps: list[Any]


class Groups:
    """The trainer's side: ``envs``' environments (a
    :class:`~dcsim.learn.workers.lockstep.LockstepEnvs` built with ``groups``) rolled out in their
    groups, each process running its own (``policy``: builds a :class:`Policy`,
    picklable)."""

    def __init__(self, envs: Any, policy: Callable[[], Policy]):
        self.envs = envs
        runners = {w: Runner([[i - b[0] for i in g] for g in envs.groups if g[0] in b],
                             policy) for w, b in enumerate(envs.blocks)}
        self.mine = runners.pop(0)(envs.local)
        envs.attach("groups", runners)

    def run(self, weights: Any, obs: list[Any], u: np.ndarray, seeds: np.ndarray) -> Rolled:
        """Every group rolled out for ``len(u)`` steps from observations ``obs`` (``u``,
        ``seeds``: ``(steps, environments)``), the workers' meanwhile."""
        blocks = self.envs.blocks
        theirs = self.envs.post_workers("groups", "rollout", {
            w: (weights, pack([obs[i] for i in b]), u[:, b], seeds[:, b])
            for w, b in enumerate(blocks) if w})
        got = {0: self.mine.rollout(weights, [obs[i] for i in blocks[0]], u[:, blocks[0]],
                                    seeds[:, blocks[0]])}
        got.update(theirs())
        return self._joined([got[w] for w in range(len(blocks))], seeds)

    def _joined(self, parts: list[dict[str, Any]], seeds: np.ndarray) -> Rolled:
        """The processes' results (in process order) as one rollout."""
        T = len(seeds)
        blocks = self.envs.blocks
        # the observations are dicts of same-shaped arrays (pack stacks them): each key's
        # (steps x block) rows of every process, side by side
        flat = {k: np.concatenate([p["seen"][1][k].reshape(T, len(b), *v.shape[1:])
                                   for p, b in zip(parts, blocks, strict=True)],
                                  axis=1).reshape(T * self.envs.n, *v.shape[1:])
                for k, v in parts[0]["seen"][1].items()}
        actions, logp, rewards, dones, values = (
            np.concatenate([p[k] for p in parts], axis=1)
            for k in ("actions", "logp", "rewards", "dones", "values"))
        ended = [(t, blocks[w][j], info) for w, p in enumerate(parts)
                 for t, j, info in p["ended"]]
        steps = self.envs.recorded(actions, rewards, dones, ended, seeds,
                                   [o for p in parts for o in unpack(p["obs"])])
        return Rolled(flat, actions, logp, values,
                      np.concatenate([p["next_values"] for p in parts]), steps)
