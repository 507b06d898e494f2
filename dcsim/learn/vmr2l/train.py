"""Train VMR²L's two-stage transformer policy with PPO (``dcsim train vmr2l CONFIG``):
:class:`VMR2LTrainer`, a :class:`~dcsim.learn.ppo.PPOTrainer` that gives its rollout, its
re-evaluation of a minibatch, the evaluation and the checkpoints.

One iteration, as the authors' ``main.py``: ``num_envs`` environments
(:class:`~dcsim.learn.vmr2l.env.VMR2LEnv`) run ``num_steps`` steps each in lock-step; at
each step one batched forward of the VM actor-critic gives the VM logits and the value, a
VM is sampled, the host actor (conditioned on that VM) gives the slot logits, masked by the
model's feasibility, and a slot is sampled; ``log π = log π_vm + log π_host``. GAE(γ, λ);
then ``update_epochs`` passes over shuffled minibatches of ``minibatch_size``: clipped policy
loss, clipped value loss × ``vf_coef``, entropy (VM + host) × ``ent_coef``, Adam with
gradient-norm clipping, the learning rate annealed linearly to 0; an epoch loop stops early
when its mean approximate KL exceeds ``target_kl``.

Defaults are the authors' settings (Adam 2.5e-4 annealed, 8 envs × 250 steps, 8 epochs, 16
minibatches of 125, clip 0.1 on policy and value, entropy 0.005, value 0.01, grad norm 0.5,
γ 0.99, λ 0.95, approx-KL 0.15). Differences: the authors accumulate gradients over 4 minibatches of
31 (an effective 125); dcsim takes minibatches of 125 directly (the same number of
optimizer steps). Their dropout is 0.1 and their rollouts run in training mode (dropout
on); dcsim's default is 0.0 (``dropout``), so that the sampled and the re-evaluated
log-probabilities are of the same network and numpy inference equals the trained policy.

Every ``eval_every`` iterations (and after the last) the policy, exported to numpy, runs on
``eval_mappings`` held-out mappings (``eval_preset``/``eval_hosts``, seeds from
``eval_seed``) at ``eval_mnl`` steps, greedy (argmax) or with ``eval_samples`` sampled
trajectories (the best kept); ``eval_fr`` is the mean final FR. ``greedy`` and
``alpha_vbpp`` on the same mappings are in the checkpoint's JSON for reference. The best
checkpoint is the one with the lowest ``eval_fr``.

``warmstart: alpha_vbpp | greedy`` (dcsim's addition, off by default): before PPO, the
policy imitates a heuristic's migrations (behaviour cloning: cross-entropy of the VM and the
slot the heuristic chose, on ``warmstart_mappings`` training mappings of ``mnl`` steps,
``warmstart_epochs`` passes, Adam at ``warmstart_lr``; the critic regresses the teacher's
discounted returns at the same time). The cloned weights are ``warmstart.npz`` and are
evaluated as iteration 0, a candidate for the best checkpoint. The authors' repository has a
supervised warm-up stage of its own for the VM network (``vm-scheduling warmup``, ``--pretrain``);
cloning a heuristic is what makes a CPU budget of an hour or two reach a useful policy
(their full-scale training is ~7,300 core-hours).

Outputs (each written atomically): ``progress.parquet`` (one row per iteration),
``checkpoint.npz/.json`` (best), ``last.npz/.json`` and ``resume.npz`` (what ``--resume``
continues from, :mod:`dcsim.learn.resume`; Ctrl-C stops at the end of an iteration and
writes it). Same config, same machine: same weights (torch seeded, numpy generators
spawned from ``seed``), a stopped and resumed run included.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch

from dcsim.learn.ppo import PPOTrainer, Rollout, Settings
from dcsim.learn.trainer import Best
from dcsim.learn.vmr2l.config import (  # noqa: F401  (load_train_config: re-exported)
    TrainConfig,
    initial_weights,
    load_train_config,
)
from dcsim.learn.vmr2l.env import VMR2LEnv
from dcsim.learn.vmr2l.network import (
    VMR2LPolicy,
    batch_tensors,
    evaluate_actions,
    sample_logp,
    stack_observations,
)
from dcsim.learn.vmr2l.warmstart import clone, teacher_data
from dcsim.learn.workers.lockstep import LockstepEnvs
from dcsim.learn.workers.shards import Replica, Shards
from dcsim.reschedulers.builtin import AlphaVBPP, Greedy
from dcsim.reschedulers.vmr2l import (
    Checkpoint,
    rollout,
    save_checkpoint,
)
from dcsim.vm.mapping_io import parse_mapping
from dcsim.vm.model import MappingState
from dcsim.vm.synthetic import synthetic_preset

__all__ = ["TrainConfig", "VMR2LTrainer", "load_train_config", "train"]


def eval_mappings(cfg: TrainConfig) -> list[MappingState]:
    """The held-out evaluation mappings (seeds ``eval_seed + i``)."""
    kw = {} if cfg.eval_hosts is None else {"hosts": cfg.eval_hosts}
    return [parse_mapping(synthetic_preset(cfg.eval_preset, cfg.eval_seed + i, **kw)).state
            for i in range(cfg.eval_mappings)]


def evaluate_policy(ck: Checkpoint, mappings: list[MappingState], mnl: int, samples: int,
                    seed: int) -> float:
    """Mean final FR of the policy over ``mappings`` (greedy when ``samples`` is 1)."""
    frs = []
    for i, m in enumerate(mappings):
        rng = np.random.default_rng([seed, i])
        _, ends = rollout(ck, m, mnl, samples, rng, greedy=samples == 1)
        frs.append(min(s.fragment_rate() for s in ends))
    return float(np.mean(frs))


def evaluate_baselines(mappings: list[MappingState], mnl: int) -> dict[str, float]:
    out = {"initial": float(np.mean([m.fragment_rate() for m in mappings]))}
    for cls in (Greedy, AlphaVBPP):
        out[cls.name] = float(np.mean([cls().run(m, mnl).fr_after for m in mappings]))
    return out


def networks(arch: Any, dropout: float) -> dict[str, torch.nn.Module]:
    """The policy (a worker's copy, :mod:`dcsim.learn.workers.shards`)."""
    return {"policy": VMR2LPolicy(arch, dropout)}


def evaluate_decisions(nets: dict[str, torch.nn.Module], data: dict[str, np.ndarray],
                       mb: np.ndarray, device: torch.device
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Decisions ``mb`` of the iteration's ``data`` (the observations, ``vm_action``,
    ``slot_action`` and ``slot_mask``) re-evaluated: new log-probabilities of the (VM, slot)
    actions taken, entropies, values."""
    tb = batch_tensors({k: v[mb] for k, v in data.items()}, device)
    logp, ent, v, _, _ = evaluate_actions(
        nets["policy"], tb, *(torch.as_tensor(data[k][mb], device=device)
                              for k in ("vm_action", "slot_action", "slot_mask")))
    return logp, ent, v


class VMR2LTrainer(PPOTrainer):
    """VMR²L's PPO: the VM actor-critic and the host actor of one :class:`VMR2LPolicy`
    (one network, one gradient-norm clip), a warm start or ``init_from`` before the
    iterations, the evaluation on held-out mappings (lower FR is better)."""

    kind = "vmr2l"
    metric = "eval_fr"
    higher_is_better = False
    train_column = "train_fr"
    eval_columns = ("eval_fr",)
    algorithm = "PPO (clipped), GAE; the authors' settings unless config says otherwise"

    def setup(self) -> None:
        cfg, out, say, device = self.cfg, self.out, self.say, self.device
        self.env_cfg = env_cfg = cfg.env_config()
        self.arch = arch = cfg.architecture()
        self.policy = policy = VMR2LPolicy(arch, cfg.dropout).to(device)
        self.modules = {"policy": policy}
        self.opt = torch.optim.Adam(policy.parameters(), lr=cfg.lr, eps=1e-5)
        self.dev = dev = eval_mappings(cfg)
        self.eval_mnl = eval_mnl = cfg.eval_mnl or cfg.mnl
        self.baselines = evaluate_baselines(dev, eval_mnl)
        say("eval mappings: initial FR {initial:.4f}, greedy {greedy:.4f}, alpha_vbpp "
            "{alpha_vbpp:.4f}".format(**self.baselines))
        self.metric_doc = (f"mean final FR over {cfg.eval_mappings} held-out "
                           f"{cfg.eval_preset} mappings at MNL {eval_mnl}, " + (
                               "greedy" if cfg.eval_samples == 1 else
                               f"best of {cfg.eval_samples} samples"))
        self.settings = Settings.of(cfg, value_clip=cfg.clip_coef, kl_stop="epoch")
        # the workers start (and build what is attached to them) during the warm start here
        self.envs = envs = self.closing.enter_context(LockstepEnvs(
            partial(VMR2LEnv, env_cfg), cfg.num_envs, self.rngs["episodes"], width=2,
            workers=cfg.num_workers))
        self.shards = None if cfg.update_shards == 1 else Shards(
            cfg.update_shards, self.modules,
            Replica(partial(networks, arch, cfg.dropout), evaluate_decisions, cfg.threads),
            envs, device)
        record = self.record
        if self.state is not None:
            pass  # the warm start or init_from policy is in the saved state
        elif cfg.init_from is not None:
            start = initial_weights(cfg)
            policy.load_numpy(start.weights)
            ev = evaluate_policy(start, dev, eval_mnl, cfg.eval_samples, cfg.eval_seed)
            record.best = Best(ev, 0, policy.numpy_weights())
            say(f"starting from {start.path}: eval FR {ev:.4f}")
        elif cfg.warmstart != "none":
            ws_rng = np.random.default_rng(np.random.SeedSequence([cfg.seed, 1]))
            t_ws = time.perf_counter()
            clone(policy, cfg, teacher_data(cfg, ws_rng), ws_rng, device, say)
            weights = policy.numpy_weights()
            ev = evaluate_policy(Checkpoint(out / "warmstart.npz", weights, arch), dev,
                                 eval_mnl, cfg.eval_samples, cfg.eval_seed)
            record.best = Best(ev, 0, weights)
            record.save(out / "warmstart.npz", weights, iteration=0, iterations=0,
                        wall=time.perf_counter() - t_ws, env_steps=0, value=ev,
                        best_iteration=0, info=None)
            say(f"after the warm start ({time.perf_counter() - t_ws:.0f}s): eval FR "
                f"{ev:.4f}")

    def rollout(self) -> tuple[Rollout, dict[str, np.ndarray], np.ndarray, np.ndarray]:
        cfg, policy, envs, device = self.cfg, self.policy, self.envs, self.device
        assert envs is not None and self.obs is not None
        act_rng = self.rngs["actions"]
        B, T = cfg.num_envs, cfg.num_steps
        H2 = 2 * self.env_cfg.max_hosts
        policy.eval()
        ro = Rollout(T, B, lambda info: info["fragment_rate"])
        vm_a = np.zeros((T, B), dtype=np.int64)
        slot_a = np.zeros((T, B), dtype=np.int64)
        masks = np.zeros((T, B, H2), dtype=bool)
        values = np.zeros((T, B), dtype=np.float32)
        obs = self.obs
        for t in range(T):
            tb = batch_tensors(ro.observe(stack_observations(obs)), device)
            with torch.no_grad():
                logits, value = policy.vm(tb["hosts"], tb["vms"], tb["step"], tb["host_pad"],
                                          tb["vm_pad"], tb["vm_host"])
                lp_vm = torch.log_softmax(logits, dim=-1).cpu().numpy()
                vi = sample_logp(lp_vm, act_rng)
                chosen = tb["vms"][torch.arange(B), torch.as_tensor(vi)]
                sl = policy.host(tb["hosts"], chosen, tb["step"], tb["host_pad"])
            m = np.stack(envs.call("slot_mask", [int(v) for v in vi]))
            masks[t] = m
            sl = sl.cpu().numpy().astype(np.float64)
            sl = np.where(m[:, :sl.shape[1]], sl, -np.inf)
            sl -= sl.max(axis=1, keepdims=True)
            lp_slot = sl - np.log(np.exp(sl).sum(axis=1, keepdims=True))
            si = sample_logp(lp_slot, act_rng)
            vm_a[t], slot_a[t] = vi, si
            ro.logp[t] = lp_vm[np.arange(B), vi] + lp_slot[np.arange(B), si]
            values[t] = value.cpu().numpy()
            obs = ro.stepped(t, envs.step([(int(v), int(s)) for v, s in zip(vi, si,
                                                                             strict=True)]))
        self.obs = obs
        with torch.no_grad():
            tb = batch_tensors(stack_observations(obs), device)
            next_value = policy.vm(tb["hosts"], tb["vms"], tb["step"], tb["host_pad"],
                                   tb["vm_pad"], tb["vm_host"])[1].cpu().numpy()
        policy.train()
        data = {**ro.flat(), "vm_action": vm_a.reshape(-1), "slot_action": slot_a.reshape(-1),
                "slot_mask": masks.reshape(T * B, H2)}
        return ro, data, values, next_value

    def reevaluate(self, data: dict[str, np.ndarray], mb: np.ndarray
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return evaluate_decisions(self.modules, data, mb, self.device)

    def weights(self) -> dict[str, np.ndarray]:
        return self.policy.numpy_weights()

    def evaluate(self, weights: dict[str, np.ndarray], row: dict[str, Any]
                 ) -> tuple[float, dict[str, Any]]:
        cfg = self.cfg
        ck = Checkpoint(self.record.paths["last"], weights, self.arch)
        ev = evaluate_policy(ck, self.dev, self.eval_mnl, cfg.eval_samples, cfg.eval_seed)
        row["eval_fr"] = ev
        return ev, {}

    def report(self, row: dict[str, Any], wall: float) -> None:
        b = self.baselines
        self.say(f"{self.head(wall)}  train FR {row['train_fr']:.4f}  eval FR "
                 f"{row['eval_fr']:.4f} (greedy {b['greedy']:.4f}, alpha_vbpp "
                 f"{b['alpha_vbpp']:.4f})  entropy {row['entropy']:.3f}  "
                 f"kl {row['approx_kl']:.4f}")

    def meta_extra(self, info: dict[str, Any] | None) -> dict[str, Any]:
        return {"eval_baselines": self.baselines}

    def write_checkpoint(self, path: Path, weights: dict[str, np.ndarray],
                         meta: dict[str, Any]) -> None:
        save_checkpoint(path, weights, self.arch, meta)

    def finish(self) -> dict[str, Any]:
        return {**super().finish(), "eval_baselines": self.baselines}


def train(cfg: TrainConfig, out: str | Path, *, command: str | None = None,
          log: Callable[[str], None] | None = print, resume: bool = False,
          stop_after: int | None = None) -> dict[str, Any]:
    """Train with ``cfg`` into ``out``; returns a summary (best iteration and eval FR, ...).

    ``resume``: continue the training whose state ``out`` holds (``resume.npz``, see
    :mod:`dcsim.learn.resume`; a ConfigError when there is none, or ``cfg`` differs from
    the recorded config; the warm start or ``init_from`` is not redone). A first
    SIGINT/SIGTERM during the iterations, or the end of iteration ``stop_after``, stops
    the run after the iteration under way: ``last.npz``, ``progress.parquet`` and the
    resume state are written and :class:`~dcsim.learn.resume.TrainingInterrupted` is
    raised."""
    return VMR2LTrainer(cfg).run(out, command=command, log=log, resume=resume,
                                 stop_after=stop_after)
