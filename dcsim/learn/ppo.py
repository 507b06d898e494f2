"""Train Nara's GNN policy with PPO (PyTorch, one file, CleanRL-style).

The hyper-parameters are :class:`TrainConfig` (a YAML file of its fields,
``experiments/nara_train.yaml``); the algorithm is the loop in :func:`train`. One iteration:

1. **Rollout.** ``num_envs`` :class:`~dcsim.learn.nara_env.NaraEnv` run in lock-step for
   ``num_steps`` decisions each (batch = num_envs × num_steps; the paper's
   ``train_batch_size`` 2048); at every step one batched forward of the policy gives the
   masked logits of all envs and each action is sampled from its softmax (numpy generator,
   so a seed fixes it). An env whose episode ends is reset with the next training seed;
   episodes run across iterations.
2. **Advantages.** The value network (its own GNN, RLlib's ``vf_share_layers = False``)
   evaluates every stored state in one pass; GAE(γ, λ) over the decisions, cut at episode
   ends.
3. **Update.** ``update_epochs`` passes over shuffled minibatches of ``minibatch_size`` (the
   paper's ``sgd_minibatch_size`` 256): clipped policy loss, (clipped) value loss ×
   ``vf_coef``, entropy bonus × ``ent_coef``, one Adam step per minibatch with gradient norm
   clipping; optional early stop at ``target_kl``.

Every ``eval_every`` iterations (and after the last) the *greedy* policy (argmax over the
eligible servers, the ``nara`` allocator's default) runs ``eval_episodes`` held-out episodes
of ``eval_requests`` (128, the paper's test episodes) requests; ``eval_acceptance`` is the
mean over them of acceptance_last20 (the running acceptance ratio averaged over the last
20 % of requests, the paper's table metric). The same episodes are run once with ``tetris``
for reference (``eval_tetris`` in the checkpoint JSON). The best checkpoint is the one with
the highest ``eval_acceptance``.

With ``topologies`` (a list of ``topology:`` sections; the 2023 paper's nine optical ones in
``experiments/nara_train_optical.yaml``) each training episode runs on one drawn uniformly
by its environment (:class:`~dcsim.learn.nara_env.NaraEnv`), and the evaluation runs the
``eval_episodes`` held-out episodes on *every* topology of the list: ``eval_acceptance`` is
the mean over the topologies, and the checkpoint JSON has each topology's value
(``eval_per_topology``, ``eval_tetris.per_topology``).

Paper settings (App. E.3; RLlib PPO): lr 5e-3, train batch 2048, minibatch 256, complete
episodes of 32 requests on α with the uniform set, reward 10 / −10 / 0; RLlib's defaults
otherwise (γ 0.99, λ 1.0, clip 0.3, 30 SGD passes, entropy 0, KL penalty). dcsim's defaults
keep the paper's batch, minibatch, episode and reward, and take CleanRL's values elsewhere
(γ 0.99, λ 0.95, clip 0.2, 4 epochs, Adam 1e-3 with annealing, entropy 0.01), which train
stably on a CPU in minutes; ``experiments/nara_train.yaml`` says which were used.

Outputs in the output directory (each written atomically): ``progress.parquet`` (one row
per iteration: iteration, wall_s, env_steps, steps_per_s, episodes, train_acceptance (over
the episodes that ended in the iteration), train_return, pg_loss, v_loss, entropy,
approx_kl, clipfrac, lr, eval_acceptance, eval_acceptance_ratio (NaN when not evaluated)),
``checkpoint.npz``/``.json`` (best eval acceptance), ``last.npz``/``.json`` and
``resume.npz``, what ``--resume`` continues from (:mod:`dcsim.learn.resume`; Ctrl-C stops
the training at the end of an iteration and writes it).

Determinism: ``torch.manual_seed(seed)`` fixes the initial weights; numpy generators
spawned from ``seed`` draw the episode seeds, the sampled actions and the minibatch order;
torch runs on ``threads`` threads (CPU). The same config gives the same weights on the same
machine.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch

from dcsim.allocators.multi.learned import save_checkpoint
from dcsim.greedy import greedy_argmax_torch
from dcsim.learn import ppo_core as core
from dcsim.learn.gnn import NaraPolicy, NaraValue, graph_batch, stack_obs
from dcsim.learn.group_rollout import Groups, sample
from dcsim.learn.lockstep import LockstepEnvs
from dcsim.learn.nara_config import (  # noqa: F401  (TrainConfig, load_train_config: re-exported)
    TrainConfig,
    initial_weights,
    load_train_config,
)
from dcsim.learn.nara_env import NaraEnv
from dcsim.learn.nara_eval import evaluate, evaluate_tetris
from dcsim.learn.shards import Replica, Shards

__all__ = ["TrainConfig", "evaluate", "load_train_config", "train"]


# --------------------------------------------------------------------------- rollouts
class _GroupPolicy:
    """The networks a process runs its rollout groups with (:mod:`dcsim.learn.group_rollout`):
    copies of the trainer's, on the CPU."""

    def __init__(self, arch: Any, value_hidden: int, threads: int):
        torch.set_num_threads(threads)
        self.policy, self.value = NaraPolicy(arch), NaraValue(arch, value_hidden)

    def load(self, weights: tuple[dict[str, np.ndarray], dict[str, np.ndarray]]) -> None:
        self.policy.load_numpy(weights[0])
        self.value.load_state_dict({k: torch.from_numpy(v) for k, v in weights[1].items()})

    def logp(self, obs: list[Any]) -> np.ndarray:
        with torch.no_grad():
            return torch.log_softmax(self.policy(graph_batch(stack_obs(obs))), dim=1).numpy()

    def values(self, obs: list[Any]) -> np.ndarray:
        with torch.no_grad():
            return self.value(graph_batch(stack_obs(obs))).numpy()


def _networks(arch: Any, value_hidden: int) -> dict[str, torch.nn.Module]:
    """The policy and the value network (a worker's copies, :mod:`dcsim.learn.shards`)."""
    return {"policy": NaraPolicy(arch), "value": NaraValue(arch, value_hidden)}


def _evaluate(nets: dict[str, torch.nn.Module], data: dict[str, np.ndarray], mb: np.ndarray,
              device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Decisions ``mb`` of the iteration's ``data`` (the observations and ``action``)
    re-evaluated: new log-probabilities of the actions taken, entropies, values."""
    g = graph_batch({k: v[mb] for k, v in data.items()}, device)
    logp_all = torch.log_softmax(nets["policy"](g), dim=1)
    act = torch.as_tensor(data["action"][mb], device=device)
    new_logp = logp_all.gather(1, act[:, None])[:, 0]
    return new_logp, -(logp_all.exp() * logp_all).sum(dim=1), nets["value"](g)


def _acceptance(info: dict[str, Any]) -> float:
    """An ended training episode's acceptance ratio."""
    return info["accepted"] / max(info["received"], 1)


# --------------------------------------------------------------------------- training
ALGORITHM = "PPO (clipped), GAE, separate value GNN"
EVAL_METRIC = ("mean acceptance_last20 of the greedy policy over eval_episodes held-out "
               "episodes of eval_requests requests")


def train(cfg: TrainConfig, out: str | Path, *, command: str | None = None,
          log: Callable[[str], None] | None = print, resume: bool = False,
          stop_after: int | None = None) -> dict[str, Any]:
    """Train with ``cfg``, writing progress and checkpoints to ``out``; returns a summary
    (best iteration and eval acceptance, iterations, env steps, wall time, output paths).

    ``resume``: continue the training whose state ``out`` holds (``resume.npz``, see
    :mod:`dcsim.learn.resume`; a ConfigError when there is none, or ``cfg`` differs from
    the recorded config). A first SIGINT/SIGTERM during the iterations, or the end of
    iteration ``stop_after``, stops the run after the iteration under way: ``last.npz``,
    ``progress.parquet`` and the resume state are written and
    :class:`~dcsim.learn.resume.TrainingInterrupted` is raised."""
    return core.run("nara", cfg, out, partial(_train, cfg), command=command, log=log,
                    resume=resume, stop_after=stop_after)


def _train(cfg: TrainConfig, ctx: core.Context) -> dict[str, Any]:
    out, command, say, device, state = ctx.out, ctx.command, ctx.say, ctx.device, ctx.state
    env_cfg = cfg.env_config()
    resources = tuple(NaraEnv(env_cfg).topology.resources)
    arch = cfg.architecture(len(resources))
    policy = NaraPolicy(arch).to(device)
    value = NaraValue(arch, cfg.value_hidden).to(device)
    nets = {"policy": policy, "value": value}
    if cfg.init_from is not None and state is None:
        policy.load_numpy(initial_weights(cfg, len(resources)))
    params = list(policy.parameters()) + list(value.parameters())
    opt = torch.optim.Adam(params, lr=cfg.lr, eps=1e-5)
    eval_cfg = cfg.eval_configs()
    eval_seeds = [cfg.eval_seed + i for i in range(cfg.eval_episodes)]

    def meta(*, iteration, iterations, wall, env_steps, value, best_iteration, info):
        per_topo = (info or {}).get("per_topology")
        extra = {} if per_topo is None else {"eval_per_topology": per_topo}
        return core.checkpoint_meta(
            cfg, algorithm=ALGORITHM, command=command, iteration=iteration,
            iterations=iterations, wall=wall, env_steps=env_steps, metric="eval_acceptance",
            value=value, metric_doc=EVAL_METRIC, extra={**extra, "eval_tetris": eval_tetris},
            best_iteration=best_iteration, device=str(device),
            determinism=ctx.determinism)

    def write(path, weights, meta_doc):
        save_checkpoint(path, weights, arch, meta_doc, resources, cfg.features)

    record = core.TrainingRecord(out, higher_is_better=True, write=write, meta=meta)
    run = core.Learner("nara", cfg, out, command, {"policy": policy, "value": value}, opt,
                       record)
    settings = core.Settings.of(cfg, value_clip=cfg.clip_coef * 10, kl_stop="minibatch")
    act_rng, mb_rng = run.rngs["actions"], run.rngs["minibatches"]

    def greedy(o: dict[str, np.ndarray]) -> np.ndarray:
        with torch.no_grad():
            return greedy_argmax_torch(policy(graph_batch(o, device))).cpu().numpy()

    B, T = cfg.num_envs, cfg.num_steps
    # the workers start (and build what is attached to them) while Tetris is evaluated here
    envs = ctx.closing.enter_context(LockstepEnvs(
        partial(NaraEnv, env_cfg), B, run.rngs["episodes"], workers=cfg.num_workers,
        groups=cfg.rollout_groups))
    groups = None if cfg.rollout_groups == 1 else Groups(
        envs, partial(_GroupPolicy, arch, cfg.value_hidden, cfg.threads))
    shards = None if cfg.update_shards == 1 else Shards(
        cfg.update_shards, nets, Replica(partial(_networks, arch, cfg.value_hidden),
                                         _evaluate, cfg.threads), envs, device)
    eval_tetris = evaluate_tetris(eval_cfg, eval_seeds)
    say(f"tetris on the eval episodes: acceptance_last20 {eval_tetris['acceptance']:.3f} "
        f"(ratio {eval_tetris['acceptance_ratio']:.3f})")
    obs = run.start(envs, state, say)  # the training's clock starts with the workers ready
    if state is None and cfg.init_from is not None:  # the start is iteration 0's candidate
        ev = evaluate(greedy, eval_cfg, eval_seeds)
        per_topo = ev.get("per_topology")
        record.best = core.Best(ev["acceptance"], 0, policy.numpy_weights(),
                                {"per_topology": per_topo})
        record.save(record.paths["best"], record.best.weights, iteration=0, iterations=0,
                    wall=0.0, env_steps=0, value=ev["acceptance"], best_iteration=0,
                    info=record.best.info)
        record.rows.append({"iteration": 0, "wall_s": run.wall(), "env_steps": 0,
                            "eval_acceptance": ev["acceptance"],
                            "eval_acceptance_ratio": ev["acceptance_ratio"],
                            **{f"eval_acceptance:{n}": a
                               for n, a in (per_topo or {}).items()}})
        say(f"iter    0  (init_from {cfg.init_from})  eval acc {ev['acceptance']:.3f}"
            f" (tetris {eval_tetris['acceptance']:.3f})")
    ctx.guard.arm()  # from here a first SIGINT/SIGTERM stops after the iteration under way
    for it, stop, lr in run.iterations():
        ro = core.Rollout(T, B, _acceptance)
        actions = np.zeros((T, B), dtype=np.int64)
        if groups is not None:  # every process rolls out its own groups, values included
            weights = (policy.numpy_weights(),
                       {k: v.detach().numpy().copy() for k, v in value.state_dict().items()})
            rolled = groups.run(weights, obs, act_rng.random((T, B)),
                                run.rngs["episodes"].integers(2**62, size=(T, B)))
            actions[:], ro.logp[:] = rolled.actions, rolled.logp
            for t, step in enumerate(rolled.steps):
                obs = ro.stepped(t, step)
            flat, values, next_value = rolled.flat, rolled.values, rolled.next_values
        else:
            for t in range(T):
                batch = ro.observe(stack_obs(obs))
                with torch.no_grad():
                    logits = policy(graph_batch(batch, device))
                    logp_all = torch.log_softmax(logits, dim=1).cpu().numpy()
                a = sample(logp_all.astype(np.float64), act_rng.random(B))
                actions[t] = a
                ro.logp[t] = logp_all[np.arange(B), a]
                obs = ro.stepped(t, envs.step([int(x) for x in a]))
            # values of every stored state in one pass
            flat = ro.flat()
            with torch.no_grad():
                values = value(graph_batch(flat, device)).cpu().numpy().reshape(T, B)
                next_value = value(graph_batch(stack_obs(obs), device)).cpu().numpy()
        run.env_steps += T * B
        # ---- advantages (GAE)
        adv, returns = core.gae(ro.rewards, values, ro.dones, next_value, cfg.gamma,
                                cfg.gae_lambda)
        # ---- update
        data = {**flat, "action": actions.reshape(-1)}
        if shards is not None:
            shards.begin(data, ro.logp, returns, values)
        # the gradient norms are clipped per network: the critic's (returns of ±10s)
        # would otherwise dominate a shared norm and freeze the actor; during the critic
        # warm-up the policy is frozen (no gradient reaches it)
        stats = core.update(settings, core.Batch.of(ro.logp, adv, returns, values, device),
                            lambda mb, _mbt, data=data: _evaluate(nets, data, mb, device),
                            opt, mb_rng, [list(policy.parameters()), list(value.parameters())],
                            critic_only=it <= cfg.critic_warmup, shards=shards)
        row = ro.row(it, wall=run.wall(), env_steps=run.env_steps, train="train_acceptance",
                     stats=stats, lr=lr, evals=("eval_acceptance", "eval_acceptance_ratio"))
        if run.evaluates(stop):
            ev = evaluate(greedy, eval_cfg, eval_seeds)
            wall = run.wall()
            row.update(eval_acceptance=ev["acceptance"],
                       eval_acceptance_ratio=ev["acceptance_ratio"], wall_s=wall)
            per_topo = ev.get("per_topology")
            for name, acc in (per_topo or {}).items():
                row[f"eval_acceptance:{name}"] = acc
            record.evaluated(it, policy.numpy_weights(), ev["acceptance"],
                             {"per_topology": per_topo}, wall=wall, env_steps=run.env_steps)
            say(f"{run.head(wall)}  train acc {row['train_acceptance']:.3f}  "
                f"eval acc {ev['acceptance']:.3f} (tetris {eval_tetris['acceptance']:.3f})  "
                f"entropy {row['entropy']:.3f}  kl {row['approx_kl']:.4f}  "
                f"v_loss {row['v_loss']:.2f}")
            if per_topo:
                say("    " + "  ".join(f"{n.removeprefix('optical-')} {a:.3f}"
                                      f" ({eval_tetris['per_topology'][n]:.3f})"
                                      for n, a in per_topo.items()))
        run.end_iteration(row, stop, ctx.guard, policy.numpy_weights)
    return {**run.finish("eval_acceptance"), "eval_tetris": eval_tetris}
