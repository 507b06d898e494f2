"""A PPO minibatch's gradient as the sum of ``update_shards`` parts, computed in the trainer's
process and in the environment workers (:mod:`dcsim.learn.workers.lockstep`), so that the update
scales with cores as the rollout does.

With ``update_shards: 1`` (the default) the PPO core (:func:`dcsim.learn.ppo.update`)
differentiates the minibatch's loss in one pass, as every shipped checkpoint was trained.
With ``update_shards: K`` each minibatch is split into ``K`` contiguous parts
(``numpy.array_split`` of its indices; fewer when it has fewer than ``K`` decisions); part
``k``'s share of the loss (its terms summed, divided by the whole minibatch's size, so that
the shares add up to the minibatch's means) is differentiated on its own, and the gradient
is the sum of the parts' gradients, added in part order. Part ``k`` is computed by process
``k mod P`` of the ``P`` processes that step the environments (``num_workers``; 0 is the
trainer's own): every part is the same function of the same weights and data whichever
process computes it (the workers run PyTorch with the trainer's ``threads``), and the sum is
taken in the same order, so for a given ``update_shards`` the weights are the same, bit for
bit, at any ``num_workers``. The sum of ``K`` parts is the minibatch's gradient up to
rounding: ``update_shards`` is a training setting (as ``minibatch_size`` is), and ``K`` = 1
and ``K`` = 2 train slightly different weights.

Each iteration the trainer hands the workers its rollout (:meth:`Shards.begin`: the flat
observations, the actions, the old log-probabilities, returns and values); each minibatch it
sends the current weights and each worker's parts (indices and normalised advantages), and
gets back their gradients and statistics. On CUDA every part is computed in the trainer's
process (the workers have no GPU).

A trainer describes its networks to a worker with a :class:`Replica`: a picklable function
that builds them (``make``) and the function that re-evaluates a minibatch with them
(``evaluate``); the trainer's own update uses the same ``evaluate``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

from dcsim.learn.ppo import ppo_loss

#: re-evaluates the decisions ``mb`` (indices into the iteration's ``data``) with the
#: networks: the new log-probabilities of the actions taken, the entropies, the values
Evaluate = Callable[[dict[str, nn.Module], dict[str, np.ndarray], np.ndarray, torch.device],
                    tuple[torch.Tensor, torch.Tensor, torch.Tensor]]

#: the statistics of one minibatch, in the order of dcsim.learn.ppo.UPDATE_STATS
Stats = tuple[float, float, float, float, float]


@dataclasses.dataclass(frozen=True)
class Replica:
    """What a worker needs to compute parts: ``make()`` builds the trainer's networks (by
    name, the same names as the trainer's), ``evaluate`` re-evaluates decisions with them,
    ``threads`` is torch's thread count (the trainer's ``threads``)."""

    make: Callable[[], dict[str, nn.Module]]
    evaluate: Evaluate
    threads: int

    def __call__(self, local: Any = None) -> PartServer:
        """The worker's side (built in the worker when the trainer attaches it; its
        environments, ``local``, are not needed)."""
        torch.set_num_threads(self.threads)
        return PartServer(self)


def parameters(nets: dict[str, nn.Module]) -> list[nn.Parameter]:
    """The networks' parameters in one fixed order (by name, then as each module lists
    them): the order weights and gradients travel in."""
    return [p for name in sorted(nets) for p in nets[name].parameters()]


def part_gradient(nets: dict[str, nn.Module], params: list[nn.Parameter], evaluate: Evaluate,
                  data: dict[str, np.ndarray], old: dict[str, np.ndarray], idx: np.ndarray,
                  adv: np.ndarray, n: int, settings: Any, critic_only: bool,
                  device: torch.device) -> tuple[list[torch.Tensor | None], Stats]:
    """The gradient of one part's share of a minibatch's loss (decisions ``idx`` of ``n``
    in the minibatch, with their normalised advantages ``adv``; ``settings``: the PPO
    core's :class:`~dcsim.learn.ppo.Settings`) and its shares of the minibatch's
    statistics. Leaves the networks' ``.grad`` (``params``, :func:`parameters` of
    ``nets``) holding it."""
    new_logp, entropy, v = evaluate(nets, data, idx, device)
    t = {k: torch.as_tensor(old[k][idx], device=device) for k in ("logp", "ret", "value")}
    total, stats = ppo_loss(settings, new_logp, entropy, v, t["logp"],
                            torch.as_tensor(adv, device=device), t["ret"], t["value"],
                            lambda x: x.sum() / n, critic_only)
    for p in params:
        p.grad = None
    total.backward()
    return [p.grad for p in params], stats


class PartServer:
    """A worker's side: the trainer's networks rebuilt, the iteration's data, and parts
    computed on request (:meth:`handle`)."""

    def __init__(self, replica: Replica):
        self.replica = replica
        self.nets = replica.make()
        for net in self.nets.values():
            net.train()
        self.params = parameters(self.nets)
        self.data: dict[str, np.ndarray] = {}
        self.old: dict[str, np.ndarray] = {}

    def handle(self, what: str, args: tuple) -> Any:
        if what == "begin":
            self.data, self.old = args
            return None
        if what == "parts":
            weights, parts, n, settings, critic_only = args
            with torch.no_grad():
                for p, w in zip(self.params, weights, strict=True):
                    p.copy_(torch.from_numpy(w))
            out = []
            for idx, adv in parts:
                grads, stats = part_gradient(self.nets, self.params, self.replica.evaluate,
                                             self.data, self.old, idx, adv, n, settings,
                                             critic_only, torch.device("cpu"))
                out.append(([None if g is None else g.numpy().copy() for g in grads], stats))
            return out
        raise ValueError(f"unknown request {what!r}")


class Shards:
    """The trainer's side: ``parts`` parts per minibatch, spread over the processes of
    ``envs`` (a :class:`~dcsim.learn.workers.lockstep.LockstepEnvs`; its workers get a
    :class:`Replica` of ``nets``), or all computed here (on CUDA, or with one process)."""

    def __init__(self, parts: int, nets: dict[str, nn.Module], replica: Replica, envs: Any,
                 device: torch.device):
        self.parts, self.nets, self.device = parts, nets, device
        self.params = parameters(nets)
        self.evaluate = replica.evaluate
        self.envs = envs if device.type == "cpu" and envs.processes > 1 else None
        if self.envs is not None:
            self.envs.attach("parts", replica)
        self.data: dict[str, np.ndarray] = {}
        self.old: dict[str, np.ndarray] = {}

    def begin(self, data: dict[str, np.ndarray], logp: np.ndarray, ret: np.ndarray,
              value: np.ndarray) -> None:
        """The iteration's rollout (flat, one row per decision), here and in the workers."""
        self.data = data
        self.old = {"logp": logp.reshape(-1), "ret": ret.reshape(-1),
                    "value": value.reshape(-1)}
        if self.envs is not None:
            self.envs.each_worker("parts", "begin", (self.data, self.old))

    def gradient(self, mb: np.ndarray, adv: np.ndarray, settings: Any, critic_only: bool
                 ) -> Stats:
        """Sets the networks' ``.grad`` to minibatch ``mb``'s gradient (``adv``: its
        normalised advantages; ``settings``, ``critic_only``: the PPO core's), the sum of
        its parts'; returns its statistics."""
        splits = np.array_split(np.arange(len(mb)), min(self.parts, len(mb)))
        parts = [(mb[s], adv[s]) for s in splits]
        P = 1 if self.envs is None else self.envs.processes
        if self.envs is not None:
            weights = [p.detach().numpy() for p in self.params]
            theirs = self.envs.post_workers("parts", "parts", {
                w: (weights, parts[w::P], len(mb), settings, critic_only) for w in range(1, P)
                if parts[w::P]})
        got: dict[int, tuple[list[Any], Stats]] = {}
        for k in range(0, len(parts), P):
            grads, stats = part_gradient(self.nets, self.params, self.evaluate, self.data,
                                         self.old, *parts[k], len(mb), settings, critic_only,
                                         self.device)
            got[k] = (grads, stats)  # the next part's backward makes new .grad tensors
        if self.envs is not None:
            for w, results in theirs().items():
                for j, (grads, stats) in enumerate(results):
                    got[w + j * P] = ([None if g is None else torch.from_numpy(g)
                                       for g in grads], stats)
        total: list[torch.Tensor | None] = list(got[0][0])
        for k in range(1, len(parts)):
            for i, g in enumerate(got[k][0]):
                if g is not None:
                    total[i] = g if total[i] is None else total[i] + g
        for p, g in zip(self.params, total, strict=True):
            p.grad = g
        # each statistic summed left to right, in the parts' order
        return tuple(sum(got[k][1][j] for k in range(len(parts)))
                     for j in range(5))  # type: ignore[return-value]
