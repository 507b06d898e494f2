"""Train Nara's GNN policy with PPO (``dcsim train nara CONFIG``): :class:`NaraTrainer`, a
:class:`~dcsim.learn.ppo.PPOTrainer` that gives its rollout, its re-evaluation of a
minibatch, the evaluation and the checkpoints.

The hyper-parameters are :class:`~dcsim.learn.nara.config.TrainConfig` (a YAML file of its
fields, ``experiments/nara_train.yaml``). One iteration:

1. **Rollout.** ``num_envs`` :class:`~dcsim.learn.nara.env.NaraEnv` run in lock-step for
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
by its environment (:class:`~dcsim.learn.nara.env.NaraEnv`), and the evaluation runs the
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
from dcsim.learn.nara.config import (  # noqa: F401  (load_train_config: re-exported)
    TrainConfig,
    initial_weights,
    load_train_config,
)
from dcsim.learn.nara.env import NaraEnv
from dcsim.learn.nara.evaluate import evaluate, evaluate_tetris
from dcsim.learn.nara.network import NaraPolicy, NaraValue, graph_batch, stack_obs
from dcsim.learn.ppo import PPOTrainer, Rollout, Settings
from dcsim.learn.trainer import Best
from dcsim.learn.workers.groups import Groups, sample
from dcsim.learn.workers.lockstep import LockstepEnvs
from dcsim.learn.workers.shards import Replica, Shards
from dcsim.tie_break import greedy_argmax_torch

__all__ = ["NaraTrainer", "TrainConfig", "evaluate", "load_train_config", "train"]


# --------------------------------------------------------------------------- rollouts
class GroupPolicy:
    """The networks a process runs its rollout groups with
    (:mod:`dcsim.learn.workers.groups`): copies of the trainer's, on the CPU."""

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


def networks(arch: Any, value_hidden: int) -> dict[str, torch.nn.Module]:
    """The policy and the value network (a worker's copies,
    :mod:`dcsim.learn.workers.shards`)."""
    return {"policy": NaraPolicy(arch), "value": NaraValue(arch, value_hidden)}


def evaluate_decisions(nets: dict[str, torch.nn.Module], data: dict[str, np.ndarray],
                       mb: np.ndarray, device: torch.device
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Decisions ``mb`` of the iteration's ``data`` (the observations and ``action``)
    re-evaluated: new log-probabilities of the actions taken, entropies, values."""
    g = graph_batch({k: v[mb] for k, v in data.items()}, device)
    logp_all = torch.log_softmax(nets["policy"](g), dim=1)
    act = torch.as_tensor(data["action"][mb], device=device)
    new_logp = logp_all.gather(1, act[:, None])[:, 0]
    return new_logp, -(logp_all.exp() * logp_all).sum(dim=1), nets["value"](g)


def acceptance(info: dict[str, Any]) -> float:
    """An ended training episode's acceptance ratio."""
    return info["accepted"] / max(info["received"], 1)


# --------------------------------------------------------------------------- training
class NaraTrainer(PPOTrainer):
    """Nara's PPO: the policy GNN and a separate value GNN (each its own gradient-norm
    clip; the policy frozen for the first ``critic_warmup`` iterations), optional rollout
    groups and update parts, the greedy evaluation on held-out episodes (higher acceptance
    is better; Tetris on the same episodes for reference)."""

    kind = "nara"
    metric = "eval_acceptance"
    higher_is_better = True
    train_column = "train_acceptance"
    eval_columns = ("eval_acceptance", "eval_acceptance_ratio")
    algorithm = "PPO (clipped), GAE, separate value GNN"
    metric_doc = ("mean acceptance_last20 of the greedy policy over eval_episodes held-out "
                  "episodes of eval_requests requests")

    def setup(self) -> None:
        cfg, say, device = self.cfg, self.say, self.device
        env_cfg = cfg.env_config()
        self.resources = resources = tuple(NaraEnv(env_cfg).topology.resources)
        self.arch = arch = cfg.architecture(len(resources))
        self.policy = policy = NaraPolicy(arch).to(device)
        self.value = value = NaraValue(arch, cfg.value_hidden).to(device)
        self.modules = {"policy": policy, "value": value}
        if cfg.init_from is not None and self.state is None:
            policy.load_numpy(initial_weights(cfg, len(resources)))
        params = list(policy.parameters()) + list(value.parameters())
        self.opt = torch.optim.Adam(params, lr=cfg.lr, eps=1e-5)
        self.eval_cfg = cfg.eval_configs()
        self.eval_seeds = [cfg.eval_seed + i for i in range(cfg.eval_episodes)]
        self.settings = Settings.of(cfg, value_clip=cfg.clip_coef * 10, kl_stop="minibatch")
        # the workers start (and build what is attached to them) while Tetris is evaluated
        self.envs = envs = self.closing.enter_context(LockstepEnvs(
            partial(NaraEnv, env_cfg), cfg.num_envs, self.rngs["episodes"],
            workers=cfg.num_workers, groups=cfg.rollout_groups))
        self.groups = None if cfg.rollout_groups == 1 else Groups(
            envs, partial(GroupPolicy, arch, cfg.value_hidden, cfg.threads))
        self.shards = None if cfg.update_shards == 1 else Shards(
            cfg.update_shards, self.modules,
            Replica(partial(networks, arch, cfg.value_hidden), evaluate_decisions,
                    cfg.threads), envs, device)
        self.eval_tetris = evaluate_tetris(self.eval_cfg, self.eval_seeds)
        say(f"tetris on the eval episodes: acceptance_last20 "
            f"{self.eval_tetris['acceptance']:.3f} "
            f"(ratio {self.eval_tetris['acceptance_ratio']:.3f})")

    def greedy(self, o: dict[str, np.ndarray]) -> np.ndarray:
        """The greedy policy's servers for a batch of observations."""
        with torch.no_grad():
            return greedy_argmax_torch(self.policy(graph_batch(o, self.device))).cpu().numpy()

    def begin(self) -> None:
        """With ``init_from``, a new run's start is iteration 0's candidate."""
        cfg, record = self.cfg, self.record
        if self.state is not None or cfg.init_from is None:
            return
        ev = evaluate(self.greedy, self.eval_cfg, self.eval_seeds)
        per_topo = ev.get("per_topology")
        record.best = Best(ev["acceptance"], 0, self.policy.numpy_weights(),
                           {"per_topology": per_topo})
        record.save(record.paths["best"], record.best.weights, iteration=0, iterations=0,
                    wall=0.0, env_steps=0, value=ev["acceptance"], best_iteration=0,
                    info=record.best.info)
        record.rows.append({"iteration": 0, "wall_s": self.wall(), "env_steps": 0,
                            "eval_acceptance": ev["acceptance"],
                            "eval_acceptance_ratio": ev["acceptance_ratio"],
                            **{f"eval_acceptance:{n}": a
                               for n, a in (per_topo or {}).items()}})
        self.say(f"iter    0  (init_from {cfg.init_from})  eval acc {ev['acceptance']:.3f}"
                 f" (tetris {self.eval_tetris['acceptance']:.3f})")

    def rollout(self) -> tuple[Rollout, dict[str, np.ndarray], np.ndarray, np.ndarray]:
        cfg, policy, value, envs, device = (self.cfg, self.policy, self.value, self.envs,
                                            self.device)
        assert envs is not None and self.obs is not None
        act_rng = self.rngs["actions"]
        B, T = cfg.num_envs, cfg.num_steps
        ro = Rollout(T, B, acceptance)
        actions = np.zeros((T, B), dtype=np.int64)
        obs = self.obs
        if self.groups is not None:  # every process rolls out its own groups, values too
            weights = (policy.numpy_weights(),
                       {k: v.detach().numpy().copy() for k, v in value.state_dict().items()})
            rolled = self.groups.run(weights, obs, act_rng.random((T, B)),
                                     self.rngs["episodes"].integers(2**62, size=(T, B)))
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
        self.obs = obs
        return ro, {**flat, "action": actions.reshape(-1)}, values, next_value

    def reevaluate(self, data: dict[str, np.ndarray], mb: np.ndarray
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return evaluate_decisions(self.modules, data, mb, self.device)

    def critic_only(self, it: int) -> bool:
        return it <= self.cfg.critic_warmup  # the critic's warm-up: the policy frozen

    def weights(self) -> dict[str, np.ndarray]:
        return self.policy.numpy_weights()

    def evaluate(self, weights: dict[str, np.ndarray], row: dict[str, Any]
                 ) -> tuple[float, dict[str, Any]]:
        ev = evaluate(self.greedy, self.eval_cfg, self.eval_seeds)
        row.update(eval_acceptance=ev["acceptance"],
                   eval_acceptance_ratio=ev["acceptance_ratio"])
        per_topo = ev.get("per_topology")
        for name, acc in (per_topo or {}).items():
            row[f"eval_acceptance:{name}"] = acc
        return ev["acceptance"], {"per_topology": per_topo}

    def report(self, row: dict[str, Any], wall: float) -> None:
        tetris = self.eval_tetris
        self.say(f"{self.head(wall)}  train acc {row['train_acceptance']:.3f}  "
                 f"eval acc {row['eval_acceptance']:.3f} (tetris {tetris['acceptance']:.3f})"
                 f"  entropy {row['entropy']:.3f}  kl {row['approx_kl']:.4f}  "
                 f"v_loss {row['v_loss']:.2f}")
        per_topo = {k.split(":", 1)[1]: v for k, v in row.items()
                    if k.startswith("eval_acceptance:")}
        if per_topo:
            self.say("    " + "  ".join(f"{n.removeprefix('optical-')} {a:.3f}"
                                        f" ({tetris['per_topology'][n]:.3f})"
                                        for n, a in per_topo.items()))

    def meta_extra(self, info: dict[str, Any] | None) -> dict[str, Any]:
        per_topo = (info or {}).get("per_topology")
        extra = {} if per_topo is None else {"eval_per_topology": per_topo}
        return {**extra, "eval_tetris": self.eval_tetris}

    def write_checkpoint(self, path: Path, weights: dict[str, np.ndarray],
                         meta: dict[str, Any]) -> None:
        save_checkpoint(path, weights, self.arch, meta, self.resources, self.cfg.features)

    def finish(self) -> dict[str, Any]:
        return {**super().finish(), "eval_tetris": self.eval_tetris}


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
    return NaraTrainer(cfg).run(out, command=command, log=log, resume=resume,
                                stop_after=stop_after)
