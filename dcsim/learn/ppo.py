"""PPO, once for dcsim's two PPO trainers (Nara's GNN policy, :mod:`dcsim.learn.nara.train`,
and VMR²L's two-stage transformer, :mod:`dcsim.learn.vmr2l.train`): each keeps only its
rollout (how its network turns observations into actions), its re-evaluation of a minibatch
and its network.

* :func:`ppo_loss` — the clipped policy loss, the (clipped) value loss × ``vf_coef`` and the
  entropy bonus × ``ent_coef`` of a set of decisions, written once for the one-pass update
  (each term a mean over the minibatch) and for the parts of
  :mod:`dcsim.learn.workers.shards` (each term a part's sum over the whole minibatch's
  size, so that the parts add up to the minibatch's means).
* :func:`gae` — generalized advantage estimation over a ``(steps, envs)`` rollout, cut at
  episode ends.
* :func:`update` — the PPO update: ``update_epochs`` passes over shuffled minibatches of
  ``minibatch_size``, one Adam step per minibatch with gradient-norm clipping, and the
  early stop on the approximate KL. A trainer gives it a function that re-evaluates a
  minibatch (new log-probabilities, entropies, values).
* :class:`Rollout` — one iteration's rollout record (observations, log-probabilities,
  rewards, episode ends, the ended episodes' statistics) and its progress row.
* :class:`PPOTrainer` — the algorithm on the trainer base (:class:`~dcsim.learn.trainer.
  Trainer`): its :meth:`~PPOTrainer.train_step` is the learning rate annealed linearly to
  0, the family's :meth:`~PPOTrainer.rollout`, GAE and :func:`update`.

The trainers differ in a few settings, each a parameter here rather than a second copy:
the value clip range (Nara ``10 × clip_coef``, VMR²L ``clip_coef``), where the KL early stop
looks (Nara after each minibatch, VMR²L at the end of an epoch on the epoch's mean), and
whether the policy is frozen for the first iterations (Nara's ``critic_warmup``). The
gradient norms are clipped per network (each of the trainer's ``modules``): Nara's
critic (returns of ±10s) would otherwise dominate a shared norm and freeze the actor.

Every number is computed in the same order as in the trainers this replaced, so a training
gives the same weights, bit for bit, as before the core was shared.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any, ClassVar, Literal, Protocol

import numpy as np
import torch

from dcsim.learn.trainer import Trainer, checkpoint_meta

#: the statistics of an update, each the mean over its minibatches (progress columns)
UPDATE_STATS = ("pg_loss", "v_loss", "entropy", "approx_kl", "clipfrac")


class Shards(Protocol):
    """Each minibatch's gradient as a sum of parts (``update_shards`` > 1): what
    :class:`dcsim.learn.workers.shards.Shards` is to :func:`update` (that module imports
    :func:`ppo_loss` from here, so this one names it by its methods)."""

    def begin(self, data: dict[str, np.ndarray], logp: np.ndarray, ret: np.ndarray,
              value: np.ndarray) -> None: ...

    def gradient(self, mb: np.ndarray, adv: np.ndarray, settings: Any, critic_only: bool
                 ) -> tuple[float, ...]: ...


# --------------------------------------------------------------------------- the loss
#: how a term's per-decision values become one number (a mean, or a part's share)
Reduce = Callable[[torch.Tensor], torch.Tensor]


def ppo_loss(s: Any, new_logp: torch.Tensor, entropy: torch.Tensor, v: torch.Tensor,
             old_logp: torch.Tensor, adv: torch.Tensor, ret: torch.Tensor,
             old_v: torch.Tensor, reduce: Reduce, critic_only: bool
             ) -> tuple[torch.Tensor, tuple[float, float, float, float, float]]:
    """The loss to differentiate and its statistics (``pg_loss, v_loss, entropy,
    approx_kl, clipfrac``): the clipped policy loss, the (clipped) value loss ×
    ``vf_coef`` and the entropy bonus × ``ent_coef`` (the value loss alone when
    ``critic_only``); ``s`` has :class:`Settings`' fields."""
    logratio = new_logp - old_logp
    ratio = logratio.exp()
    with torch.no_grad():
        kl = float(reduce((ratio - 1) - logratio))
        clipfrac = float(reduce(((ratio - 1.0).abs() > s.clip_coef).float()))
    pg = reduce(torch.max(-adv * ratio, -adv * ratio.clamp(1 - s.clip_coef, 1 + s.clip_coef)))
    if s.clip_vloss:
        v_clip = old_v + (v - old_v).clamp(-s.value_clip, s.value_clip)
        v_loss = 0.5 * reduce(torch.max((v - ret) ** 2, (v_clip - ret) ** 2))
    else:
        v_loss = 0.5 * reduce((v - ret) ** 2)
    ent = reduce(entropy)
    total = s.vf_coef * v_loss if critic_only else pg - s.ent_coef * ent + s.vf_coef * v_loss
    return total, (float(pg.detach()), float(v_loss.detach()), float(ent.detach()), kl,
                   clipfrac)


# --------------------------------------------------------------------------- the update
def gae(rewards: np.ndarray, values: np.ndarray, dones: np.ndarray, next_value: np.ndarray,
        gamma: float, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """Advantages and returns (float32, ``(steps, envs)``) by GAE(γ, λ): ``values`` of the
    stored states, ``next_value`` of the states after the last step, an episode end
    (``dones``) cutting the sums."""
    T, B = rewards.shape
    adv = np.zeros((T, B), dtype=np.float32)
    last = np.zeros(B, dtype=np.float32)
    for t in reversed(range(T)):
        nv = next_value if t == T - 1 else values[t + 1]
        nonterm = 1.0 - dones[t]
        delta = rewards[t] + gamma * nv * nonterm - values[t]
        last = delta + gamma * lam * nonterm * last
        adv[t] = last
    return adv, adv + values


@dataclasses.dataclass(frozen=True)
class Settings:
    """The update's hyper-parameters (a trainer's config fields of the same names, and
    the two that differ between the trainers: ``value_clip``, the value clip range, and
    ``kl_stop``, where the early stop on ``target_kl`` looks)."""

    update_epochs: int
    minibatch_size: int
    clip_coef: float
    value_clip: float
    ent_coef: float
    vf_coef: float
    max_grad_norm: float
    norm_adv: bool
    clip_vloss: bool
    target_kl: float | None
    #: minibatch: stop the update when one minibatch's approximate KL exceeds target_kl;
    #: epoch: after an epoch whose mean approximate KL exceeds it
    kl_stop: Literal["minibatch", "epoch"]

    @classmethod
    def of(cls, cfg: Any, *, value_clip: float, kl_stop: Literal["minibatch", "epoch"]
           ) -> Settings:
        names = [f.name for f in dataclasses.fields(cls) if f.name not in
                 ("value_clip", "kl_stop")]
        return cls(**{n: getattr(cfg, n) for n in names}, value_clip=value_clip,
                   kl_stop=kl_stop)


@dataclasses.dataclass
class Batch:
    """A rollout's per-decision tensors, flattened (``steps × envs``): the log-probability
    of the action taken, its advantage, the return and the value estimate."""

    logp: torch.Tensor
    adv: torch.Tensor
    ret: torch.Tensor
    value: torch.Tensor

    @classmethod
    def of(cls, logp: np.ndarray, adv: np.ndarray, ret: np.ndarray, value: np.ndarray,
           device: torch.device) -> Batch:
        return cls(*(torch.as_tensor(a.reshape(-1), device=device)
                     for a in (logp, adv, ret, value)))


#: re-evaluates minibatch ``mb`` (its indices, as numpy and as a tensor): the new
#: log-probabilities of the actions taken, the entropies and the values, each per decision
Evaluate = Callable[[np.ndarray, torch.Tensor], tuple[torch.Tensor, torch.Tensor, torch.Tensor]]


def update(s: Settings, batch: Batch, evaluate: Evaluate, opt: torch.optim.Optimizer,
           rng: np.random.Generator, clip: list[list[torch.nn.Parameter]], *,
           critic_only: bool = False, shards: Shards | None = None) -> dict[str, float]:
    """One PPO update on ``batch``; returns the means of :data:`UPDATE_STATS` over the
    minibatches. ``clip``: the parameter groups whose gradient norms are clipped (each to
    ``max_grad_norm``); ``critic_only``: the loss is the value loss alone (a frozen
    policy gets no gradient); ``shards``: each minibatch's gradient summed over parts
    (``update_shards`` > 1, :mod:`dcsim.learn.workers.shards`; ``evaluate`` is then unused)."""
    n = len(batch.logp)
    device = batch.logp.device
    stats: dict[str, list[float]] = {k: [] for k in UPDATE_STATS}
    for _epoch in range(s.update_epochs):
        perm = rng.permutation(n)
        kls: list[float] = []
        for start in range(0, n, s.minibatch_size):
            mb = perm[start:start + s.minibatch_size]
            mbt = torch.as_tensor(mb, device=device)
            mb_adv = batch.adv[mbt]
            if s.norm_adv and len(mb) > 1:
                mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
            if shards is None:
                opt.zero_grad(set_to_none=True)
                mb_stats = _backward(s, batch, evaluate(mb, mbt), mbt, mb_adv, critic_only)
            else:
                mb_stats = shards.gradient(mb, mb_adv.cpu().numpy(), s, critic_only)
            for params in clip:
                torch.nn.utils.clip_grad_norm_(params, s.max_grad_norm)
            opt.step()
            for k, x in zip(UPDATE_STATS, mb_stats, strict=True):
                stats[k].append(x)
            kl = mb_stats[3]
            kls.append(kl)
            if s.kl_stop == "minibatch" and s.target_kl is not None and kl > s.target_kl:
                return _means(stats)
        if s.kl_stop == "epoch" and s.target_kl is not None and np.mean(kls) > s.target_kl:
            break
    return _means(stats)


def _backward(s: Settings, batch: Batch, evaluated: tuple[torch.Tensor, ...],
              mbt: torch.Tensor, mb_adv: torch.Tensor, critic_only: bool
              ) -> tuple[float, ...]:
    """A minibatch's loss differentiated in one pass (``update_shards`` 1): the networks'
    ``.grad`` hold its gradient; returns its statistics (:data:`UPDATE_STATS`)."""
    new_logp, entropy, v = evaluated
    total, stats = ppo_loss(s, new_logp, entropy, v, batch.logp[mbt], mb_adv, batch.ret[mbt],
                            batch.value[mbt], torch.mean, critic_only)
    total.backward()
    return stats


def _means(stats: dict[str, list[float]]) -> dict[str, float]:
    return {k: float(np.mean(v)) for k, v in stats.items()}


# --------------------------------------------------------------------------- the rollout
class Rollout:
    """One iteration's rollout of ``steps`` lock-steps of ``envs`` environments: the
    observation batches (:meth:`observe`), the log-probabilities of the actions taken
    (``logp``, filled by the trainer), the rewards and episode ends (:meth:`stepped`), and
    per episode that ended its return and ``metric(info)`` (the trainer's training
    statistic, e.g. the acceptance ratio); its duration for the steps/s column."""

    def __init__(self, steps: int, envs: int, metric: Callable[[dict[str, Any]], float]):
        self.steps, self.envs, self.metric = steps, envs, metric
        self.store: list[dict[str, np.ndarray]] = []
        self.logp = np.zeros((steps, envs), dtype=np.float32)
        self.rewards = np.zeros((steps, envs), dtype=np.float32)
        self.dones = np.zeros((steps, envs), dtype=np.float32)
        self.ended: list[float] = []
        self.returns: list[float] = []
        self.t0 = time.perf_counter()
        self.seconds = float("nan")

    def observe(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.store.append(batch)
        return batch

    def stepped(self, t: int, step: Any) -> list[Any]:
        """Lock-step ``t``'s result (:class:`~dcsim.learn.workers.lockstep.Step`) recorded; the
        next observations."""
        self.rewards[t], self.dones[t] = step.rewards, step.dones
        for _, info, ret in step.ended:
            self.ended.append(self.metric(info))
            self.returns.append(ret)
        if t == self.steps - 1:
            self.seconds = time.perf_counter() - self.t0
        return step.obs

    def flat(self) -> dict[str, np.ndarray]:
        """The stored observations as one batch (``steps × envs`` rows, step-major)."""
        return {k: np.concatenate([s[k] for s in self.store]) for k in self.store[0]}

    def row(self, iteration: int, *, wall: float, env_steps: int, train: str,
            stats: dict[str, float], lr: float, evals: tuple[str, ...]) -> dict[str, Any]:
        """The iteration's progress row: its counters (``wall_s``: seconds since the first
        iteration began; ``steps_per_s``: the rollout's decisions per second of rollout,
        the update excluded), the means over the episodes that ended in it (column
        ``train`` of the metric, and ``train_return``), the update's statistics, the
        learning rate and the evaluation columns (NaN until evaluated)."""
        def mean(v: list[float]) -> float:
            return float(np.mean(v)) if v else float("nan")
        return {"iteration": iteration, "wall_s": wall, "env_steps": env_steps,
                "steps_per_s": self.steps * self.envs / self.seconds,
                "episodes": len(self.returns), train: mean(self.ended),
                "train_return": mean(self.returns), **stats, "lr": lr,
                **dict.fromkeys(evals, float("nan"))}


# --------------------------------------------------------------------------- the trainer
class PPOTrainer(Trainer):
    """PPO on the trainer base: :meth:`train_step` is one PPO iteration. A family's PPO
    trainer sets ``settings`` (:class:`Settings`) and ``shards`` (None: each minibatch's
    gradient in one pass) in its :meth:`~dcsim.learn.trainer.Trainer.setup`, and gives
    :meth:`rollout` and :meth:`reevaluate` (and the trainer base's evaluation and
    checkpoint methods; :meth:`meta` here builds the JSON from :attr:`algorithm`,
    ``metric_doc`` and :meth:`meta_extra`)."""

    #: the progress column of the training episodes' statistic (``Rollout.metric``)
    train_column: ClassVar[str] = ""
    #: the evaluation's progress columns (NaN until evaluated)
    eval_columns: ClassVar[tuple[str, ...]] = ()
    #: the checkpoint JSON's ``training.algorithm``
    algorithm: ClassVar[str] = ""

    settings: Settings
    shards: Shards | None = None
    #: what the evaluation metric is (the checkpoint JSON's ``eval_metric``)
    metric_doc: str = ""

    def rollout(self) -> tuple[Rollout, dict[str, np.ndarray], np.ndarray, np.ndarray]:
        """``num_steps`` lock-steps of the ``num_envs`` environments from ``obs`` (left on
        the observations after them) with the policy as it is: the rollout record (its
        ``logp`` filled), the decisions' data for :meth:`reevaluate` (observations and
        actions, ``steps × envs`` rows), the values of the stored states ``(steps, envs)``
        and of the states after the last step ``(envs,)``. The networks are left in
        training mode."""
        raise NotImplementedError

    def reevaluate(self, data: dict[str, np.ndarray], mb: np.ndarray
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Decisions ``mb`` of the iteration's ``data`` re-evaluated with the networks as
        they are now: the new log-probabilities of the actions taken, entropies, values."""
        raise NotImplementedError

    def critic_only(self, it: int) -> bool:
        """Whether iteration ``it`` updates the value network alone (the policy frozen)."""
        return False

    def meta_extra(self, info: dict[str, Any] | None) -> dict[str, Any]:
        """The family's entries of a checkpoint's ``training`` JSON (``info``: the record's
        about the weights, None when they were not evaluated)."""
        return {}

    def meta(self, *, iteration: int, iterations: int, wall: float, env_steps: int,
             value: float | None, best_iteration: int | None, info: dict[str, Any] | None
             ) -> dict[str, Any]:
        return checkpoint_meta(
            self.cfg, algorithm=self.algorithm, command=self.command, iteration=iteration,
            iterations=iterations, wall=wall, env_steps=env_steps, metric=self.metric,
            value=value, metric_doc=self.metric_doc, extra=self.meta_extra(info),
            best_iteration=best_iteration, device=str(self.device),
            determinism=self.determinism)

    def train_step(self, it: int) -> dict[str, Any]:
        cfg = self.cfg
        assert self.opt is not None
        lr = cfg.lr * (1.0 - (it - 1) / cfg.iterations) if cfg.anneal_lr else cfg.lr
        for group in self.opt.param_groups:
            group["lr"] = lr
        ro, data, values, next_value = self.rollout()
        self.env_steps += cfg.num_steps * cfg.num_envs
        adv, returns = gae(ro.rewards, values, ro.dones, next_value, cfg.gamma,
                           cfg.gae_lambda)
        if self.shards is not None:
            self.shards.begin(data, ro.logp, returns, values)
        stats = update(self.settings, Batch.of(ro.logp, adv, returns, values, self.device),
                       lambda mb, _mbt: self.reevaluate(data, mb), self.opt,
                       self.rngs["minibatches"],
                       [list(m.parameters()) for m in self.modules.values()],
                       critic_only=self.critic_only(it), shards=self.shards)
        return ro.row(it, wall=self.wall(), env_steps=self.env_steps, train=self.train_column,
                      stats=stats, lr=lr, evals=self.eval_columns)
