"""Train DeepRM's policy with REINFORCE and a per-time-step baseline (``dcsim train deeprm
CONFIG``): :class:`DeepRMTrainer`, on the trainer base (:class:`~dcsim.learn.trainer.
Trainer`) as the PPO trainers are, overrides its :meth:`~DeepRMTrainer.train_step` with one
REINFORCE iteration.

The hyper-parameters are :class:`~dcsim.learn.deeprm.config.TrainConfig`; the rollouts,
returns and baseline are :mod:`dcsim.learn.deeprm.rollout`. One iteration:

1. draw ``jobsets_per_iter`` (N) job sets from DeepRM's distribution (or take the next N of
   a fixed pool when ``train_pool > 0``, like the authors' fixed ``num_ex`` sets);
2. for each job set run ``rollouts`` (R) episodes of the current *stochastic* policy, the R
   environments in lock-step (one batched image + forward pass per decision step, numpy);
   an episode stops when done or after ``episode_max_length`` decisions;
3. returns ``G_t = Σ_{t'≥t} γ^{t'−t} r_{t'}`` over the decisions of each rollout (γ = 1);
   baseline ``b_t`` = mean over the R rollouts of ``G_t``, a rollout shorter than ``t``
   counting 0 there (the authors' ``pg_re.py`` pads the returns with zeros before
   averaging); advantage ``A_t = G_t − b_t``. ``t`` indexes decisions, not time steps;
4. loss = mean over the job sets of (−mean over that set's decisions of
   ``log π(a_t|s_t)·A_t``); one optimiser step per iteration.

Every ``eval_every`` iterations (and after the last) the greedy policy (argmax over the
slots holding a job and void, exactly as the ``deeprm`` scheduler's default) runs on a
fixed held-out batch of ``eval_jobsets`` job sets; ``eval_slowdown`` is the mean slowdown
over their jobs, where a job still unfinished when the episode is cut off at
``max_steps`` counts ``(cut-off time − arrival) / length`` (a lower bound: a policy that
never starts a job must not look good); dropped jobs are left out, as in
:meth:`QueueEnv.summary`. The best checkpoint is the one with the lowest
``eval_slowdown``. ``eval_slowdown_sampled`` is the same for the sampling policy (the
authors evaluate DeepRM by sampling), for information.

Where this differs from the paper and the authors' code:

- optimiser: the reproduction paper uses Adam (lr 0.001), Mao et al.'s code RMSProp (lr
  0.001, ρ 0.9, ε 1e-9); both are offered, Adam by default.
- job sets: fresh ones every iteration by default (the authors reuse a fixed set of
  ``num_ex`` sequences and evaluate on them); ``train_pool`` restores the fixed pool, and
  evaluation is always on held-out sets.
- size: the authors train 100 job sets per iteration for 1000+ iterations (GPU-free, but
  days); the defaults here (N = 10, R = 20) fit a laptop CPU. See
  ``experiments/deeprm_train.yaml``.

Outputs in the output directory (each written atomically): ``progress.parquet`` (one row
per iteration: iteration, wall_s, train_return (mean over rollouts), train_slowdown (over
the jobs finished in the rollouts), eval_slowdown, eval_unfinished, eval_slowdown_sampled
(NaN / −1 when not evaluated), entropy (mean over visited states), loss, decisions),
``checkpoint.npz``/``.json`` (best eval slowdown), ``last.npz``/``.json`` and
``resume.npz`` (what ``--resume`` continues from, :mod:`dcsim.learn.resume`). The run
stops after ``iterations`` or, with ``max_wall_s``, after the iteration during which that
much wall time has passed, or at the end of the iteration under way on Ctrl-C.

Determinism: ``torch.manual_seed(seed)`` fixes the initial weights, numpy generators
spawned from ``seed`` draw the job sets and the sampled actions, and torch runs on
``threads`` threads; the same config gives the same weights.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from dcsim import __version__
from dcsim.learn.deeprm.config import (  # noqa: F401  (load_train_config: re-exported)
    TrainConfig,
    load_train_config,
)
from dcsim.learn.deeprm.network import Policy, torch_logits
from dcsim.learn.deeprm.rollout import ObsBuffer, evaluate, rollout_jobset
from dcsim.learn.trainer import Trainer
from dcsim.queue.env import QueueEnv
from dcsim.schedulers.deeprm import save_checkpoint

__all__ = ["DeepRMTrainer", "TrainConfig", "load_train_config", "train"]

ALGORITHM = "REINFORCE, per-time-step baseline over R rollouts per job set"


class DeepRMTrainer(Trainer):
    """DeepRM's REINFORCE: one optimiser step per iteration on the policy-gradient loss of
    ``jobsets_per_iter`` job sets' ``rollouts`` rollouts each; the greedy evaluation on
    held-out job sets (lower slowdown is better). Its environments are the rollouts' queue
    environments, reset per job set, so the resume state has no episodes in progress."""

    kind = "deeprm"
    metric = "eval_slowdown"
    higher_is_better = False
    rng_names = ("jobsets", "actions")
    line_width = 5

    def setup(self) -> None:
        cfg = self.cfg
        self.spec = spec = cfg.image_spec()
        self.queue = queue = cfg.queue_config()
        self.policy = policy = Policy(spec.size, cfg.hidden, spec.actions, cfg.init_std)
        self.modules = {"policy": policy}
        if cfg.optimizer == "adam":
            self.opt = torch.optim.Adam(policy.parameters(), lr=cfg.lr)
        else:
            self.opt = torch.optim.RMSprop(policy.parameters(), lr=cfg.lr, alpha=cfg.rms_rho,
                                           eps=cfg.rms_eps)
        eval_rng = np.random.default_rng(cfg.eval_seed)
        self.eval_sets = [cfg.jobset(eval_rng) for _ in range(cfg.eval_jobsets)]
        self.pool = [cfg.jobset(self.rngs["jobsets"]) for _ in range(cfg.train_pool)]
        self.queues = [QueueEnv(queue) for _ in range(cfg.rollouts)]
        self.buffer = ObsBuffer(spec.size)
        self.act = torch_logits(policy)

    def train_step(self, it: int) -> dict[str, Any]:
        cfg, policy = self.cfg, self.policy
        assert self.opt is not None
        self.opt.zero_grad()
        returns, slowdowns, ent_sum, loss_sum, decisions = [], [], 0.0, 0.0, 0
        for n in range(cfg.jobsets_per_iter):
            if self.pool:
                js = self.pool[((it - 1) * cfg.jobsets_per_iter + n) % len(self.pool)]
            else:
                js = cfg.jobset(self.rngs["jobsets"])
            b = rollout_jobset(self.queues, js, self.act, self.spec, self.rngs["actions"],
                               cfg, self.buffer)
            logits = policy(torch.from_numpy(b.obs))
            logp = torch.log_softmax(logits, dim=1)
            chosen = logp[torch.arange(len(b.actions)), torch.from_numpy(b.actions)]
            adv = torch.from_numpy(b.advantages.astype(np.float32))
            loss = -(chosen * adv).mean() / cfg.jobsets_per_iter
            loss.backward()
            with torch.no_grad():
                ent_sum += float(-(logp.exp() * logp).sum(dim=1).mean())
            loss_sum += float(loss.detach())
            decisions += len(b.actions)
            returns.append(b.returns)
            slowdowns.append(b.slowdowns)
        self.opt.step()
        self.env_steps += decisions
        sd = np.concatenate(slowdowns)
        return {"iteration": it, "wall_s": self.wall(),
                "train_return": float(np.concatenate(returns).mean()),
                "train_slowdown": float(sd.mean()) if sd.size else float("nan"),
                "eval_slowdown": float("nan"), "eval_unfinished": -1,
                "eval_slowdown_sampled": float("nan"),
                "entropy": ent_sum / cfg.jobsets_per_iter, "loss": loss_sum,
                "decisions": decisions}

    def weights(self) -> dict[str, np.ndarray]:
        return self.policy.numpy_weights()

    def evaluate(self, weights: dict[str, np.ndarray], row: dict[str, Any]
                 ) -> tuple[float, dict[str, Any]]:
        """The greedy policy on the held-out job sets, and the sampling one (for
        information: the authors evaluate DeepRM by sampling)."""
        cfg = self.cfg
        ev, unfinished = evaluate(self.act, self.spec, self.queue, self.eval_sets)
        ev_sampled, _ = evaluate(self.act, self.spec, self.queue, self.eval_sets,
                                 np.random.default_rng([cfg.eval_seed, self.it]))
        row.update(eval_slowdown=ev, eval_unfinished=unfinished,
                   eval_slowdown_sampled=ev_sampled)
        return ev, {}

    def report(self, row: dict[str, Any], wall: float) -> None:
        unfinished = row["eval_unfinished"]
        self.say(f"{self.head(wall)}  "
                 f"train return {row['train_return']:9.2f}  "
                 f"train slowdown {row['train_slowdown']:6.3f}  eval slowdown "
                 f"{row['eval_slowdown']:6.3f}"
                 f"{f' ({unfinished} unfinished)' if unfinished else ''}  "
                 f"(sampled {row['eval_slowdown_sampled']:6.3f})  "
                 f"entropy {row['entropy']:.3f}")

    def meta(self, *, iteration: int, iterations: int, wall: float, env_steps: int,
             value: float | None, best_iteration: int | None, info: dict[str, Any] | None
             ) -> dict[str, Any]:
        """DeepRM's checkpoint JSON: the queue and job settings the scheduler reads, and
        how the weights were trained."""
        cfg = self.cfg
        return {
            "queue_config": dataclasses.asdict(cfg.queue_config()),
            "jobs": cfg.job_params(),
            "training": {
                "algorithm": ALGORITHM,
                "command": self.command,
                "iteration": iteration,          # the iteration these weights are from
                "iterations": iterations,        # iterations run when this was written
                "wall_time_s": round(wall, 3),   # training wall time when it was written
                "eval_slowdown": value,
                "best_iteration": best_iteration,
                "config": cfg.to_dict(),
            },
            "dcsim_version": __version__,
        }

    def write_checkpoint(self, path: Path, weights: dict[str, np.ndarray],
                         meta: dict[str, Any]) -> None:
        save_checkpoint(path, weights, self.spec, meta)


def train(cfg: TrainConfig, out: str | Path, *, command: str | None = None,
          log: Callable[[str], None] | None = print, resume: bool = False,
          stop_after: int | None = None) -> dict[str, Any]:
    """Train with ``cfg``, writing progress and checkpoints to ``out``; returns a summary
    (best iteration and eval slowdown, iterations, wall time, output paths).

    ``resume``: continue the training whose state ``out`` holds (``resume.npz``, see
    :mod:`dcsim.learn.resume`; a ConfigError when there is none, or ``cfg`` differs from
    the recorded config). A first SIGINT/SIGTERM during the iterations, or the end of
    iteration ``stop_after``, stops the run after the iteration under way: ``last.npz``,
    ``progress.parquet`` and the resume state are written and
    :class:`~dcsim.learn.resume.TrainingInterrupted` is raised."""
    return DeepRMTrainer(cfg).run(out, command=command, log=log, resume=resume,
                                  stop_after=stop_after)
