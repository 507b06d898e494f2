"""Train VMR²L's two-stage transformer policy with PPO (``dcsim train vmr2l CONFIG``).

One iteration, as the authors' ``main.py``: ``num_envs`` environments
(:class:`~dcsim.learn.vmr2l_env.VMR2LEnv`) run ``num_steps`` steps each in lock-step; at
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

from dcsim.learn import ppo_core as core
from dcsim.learn.lockstep import LockstepEnvs
from dcsim.learn.shards import Replica, Shards
from dcsim.learn.vmr2l_batch import (
    batch_tensors,
    evaluate_actions,
    sample_logp,
    stack_observations,
)
from dcsim.learn.vmr2l_config import TrainConfig, initial_weights, load_train_config
from dcsim.learn.vmr2l_env import VMR2LEnv
from dcsim.learn.vmr2l_model import VMR2LPolicy
from dcsim.learn.vmr2l_warmstart import clone, teacher_data
from dcsim.reschedulers.builtin import AlphaVBPP, Greedy
from dcsim.reschedulers.vmr2l import (
    Checkpoint,
    rollout,
    save_checkpoint,
)
from dcsim.vm.mapping_io import parse_mapping
from dcsim.vm.model import MappingState
from dcsim.vm.synthetic import synthetic_preset

__all__ = ["TrainConfig", "load_train_config", "train"]


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


ALGORITHM = "PPO (clipped), GAE; the authors' settings unless config says otherwise"


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
    return core.run("vmr2l", cfg, out, partial(_train, cfg), command=command, log=log,
                    resume=resume, stop_after=stop_after)


def _networks(arch: Any, dropout: float) -> dict[str, torch.nn.Module]:
    """The policy (a worker's copy, :mod:`dcsim.learn.shards`)."""
    return {"policy": VMR2LPolicy(arch, dropout)}


def _evaluate(nets: dict[str, torch.nn.Module], data: dict[str, np.ndarray], mb: np.ndarray,
              device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Decisions ``mb`` of the iteration's ``data`` (the observations, ``vm_action``,
    ``slot_action`` and ``slot_mask``) re-evaluated: new log-probabilities of the (VM, slot)
    actions taken, entropies, values."""
    tb = batch_tensors({k: v[mb] for k, v in data.items()}, device)
    logp, ent, v, _, _ = evaluate_actions(
        nets["policy"], tb, *(torch.as_tensor(data[k][mb], device=device)
                              for k in ("vm_action", "slot_action", "slot_mask")))
    return logp, ent, v


def _train(cfg: TrainConfig, ctx: core.Context) -> dict[str, Any]:
    out, command, say, device, state = ctx.out, ctx.command, ctx.say, ctx.device, ctx.state
    env_cfg = cfg.env_config()
    arch = cfg.architecture()
    policy = VMR2LPolicy(arch, cfg.dropout).to(device)
    opt = torch.optim.Adam(policy.parameters(), lr=cfg.lr, eps=1e-5)
    dev = eval_mappings(cfg)
    eval_mnl = cfg.eval_mnl or cfg.mnl
    baselines = evaluate_baselines(dev, eval_mnl)
    say("eval mappings: initial FR {initial:.4f}, greedy {greedy:.4f}, alpha_vbpp "
        "{alpha_vbpp:.4f}".format(**baselines))
    metric_doc = (f"mean final FR over {cfg.eval_mappings} held-out {cfg.eval_preset} "
                  f"mappings at MNL {eval_mnl}, " + (
                      "greedy" if cfg.eval_samples == 1 else
                      f"best of {cfg.eval_samples} samples"))

    def meta(*, iteration, iterations, wall, env_steps, value, best_iteration, info):
        return core.checkpoint_meta(
            cfg, algorithm=ALGORITHM, command=command, iteration=iteration,
            iterations=iterations, wall=wall, env_steps=env_steps, metric="eval_fr",
            value=value, metric_doc=metric_doc, extra={"eval_baselines": baselines},
            best_iteration=best_iteration, device=str(device),
            determinism=ctx.determinism)

    def write(path, weights, meta_doc):
        save_checkpoint(path, weights, arch, meta_doc)

    record = core.TrainingRecord(out, higher_is_better=False, write=write, meta=meta)
    run = core.Learner("vmr2l", cfg, out, command, {"policy": policy}, opt, record)
    settings = core.Settings.of(cfg, value_clip=cfg.clip_coef, kl_stop="epoch")
    act_rng, mb_rng = run.rngs["actions"], run.rngs["minibatches"]
    B, T = cfg.num_envs, cfg.num_steps
    # the workers start (and build what is attached to them) during the warm start here
    envs = ctx.closing.enter_context(LockstepEnvs(
        partial(VMR2LEnv, env_cfg), B, run.rngs["episodes"], width=2,
        workers=cfg.num_workers))
    shards = None if cfg.update_shards == 1 else Shards(
        cfg.update_shards, {"policy": policy},
        Replica(partial(_networks, arch, cfg.dropout), _evaluate, cfg.threads), envs, device)
    if state is not None:
        pass  # the warm start or init_from policy is in the saved state
    elif cfg.init_from is not None:
        start = initial_weights(cfg)
        policy.load_numpy(start.weights)
        ev = evaluate_policy(start, dev, eval_mnl, cfg.eval_samples, cfg.eval_seed)
        record.best = core.Best(ev, 0, policy.numpy_weights())
        say(f"starting from {start.path}: eval FR {ev:.4f}")
    elif cfg.warmstart != "none":
        ws_rng = np.random.default_rng(np.random.SeedSequence([cfg.seed, 1]))
        t_ws = time.perf_counter()
        clone(policy, cfg, teacher_data(cfg, ws_rng), ws_rng, device, say)
        weights = policy.numpy_weights()
        ev = evaluate_policy(Checkpoint(out / "warmstart.npz", weights, arch), dev, eval_mnl,
                             cfg.eval_samples, cfg.eval_seed)
        record.best = core.Best(ev, 0, weights)
        record.save(out / "warmstart.npz", weights, iteration=0, iterations=0,
                    wall=time.perf_counter() - t_ws, env_steps=0, value=ev, best_iteration=0,
                    info=None)
        say(f"after the warm start ({time.perf_counter() - t_ws:.0f}s): eval FR {ev:.4f}")

    obs = run.start(envs, state, say)  # the training's clock starts with the workers ready
    H2 = 2 * env_cfg.max_hosts
    ctx.guard.arm()  # from here a first SIGINT/SIGTERM stops after the iteration under way
    for it, stop, lr in run.iterations():
        # ---- rollout
        policy.eval()
        ro = core.Rollout(T, B, lambda info: info["fragment_rate"])
        vm_a = np.zeros((T, B), dtype=np.int64)
        slot_a = np.zeros((T, B), dtype=np.int64)
        masks = np.zeros((T, B, H2), dtype=bool)
        values = np.zeros((T, B), dtype=np.float32)
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
        run.env_steps += T * B
        with torch.no_grad():
            tb = batch_tensors(stack_observations(obs), device)
            next_value = policy.vm(tb["hosts"], tb["vms"], tb["step"], tb["host_pad"],
                                   tb["vm_pad"], tb["vm_host"])[1].cpu().numpy()
        adv, returns = core.gae(ro.rewards, values, ro.dones, next_value, cfg.gamma,
                                cfg.gae_lambda)
        # ---- update
        policy.train()
        data = {**ro.flat(), "vm_action": vm_a.reshape(-1), "slot_action": slot_a.reshape(-1),
                "slot_mask": masks.reshape(T * B, H2)}
        if shards is not None:
            shards.begin(data, ro.logp, returns, values)
        stats = core.update(settings, core.Batch.of(ro.logp, adv, returns, values, device),
                            lambda mb, _mbt, data=data: _evaluate({"policy": policy}, data,
                                                                 mb, device),
                            opt, mb_rng, [list(policy.parameters())], shards=shards)
        row = ro.row(it, wall=run.wall(), env_steps=run.env_steps, train="train_fr",
                     stats=stats, lr=lr, evals=("eval_fr",))
        if run.evaluates(stop):
            weights = policy.numpy_weights()
            ck = Checkpoint(record.paths["last"], weights, arch)
            ev = evaluate_policy(ck, dev, eval_mnl, cfg.eval_samples, cfg.eval_seed)
            wall = run.wall()
            row.update(eval_fr=ev, wall_s=wall)
            record.evaluated(it, weights, ev, {}, wall=wall, env_steps=run.env_steps)
            say(f"{run.head(wall)}  train FR {row['train_fr']:.4f}  eval FR "
                f"{ev:.4f} (greedy {baselines['greedy']:.4f}, alpha_vbpp "
                f"{baselines['alpha_vbpp']:.4f})  entropy {row['entropy']:.3f}  "
                f"kl {row['approx_kl']:.4f}")
        run.end_iteration(row, stop, ctx.guard, policy.numpy_weights)
    return {**run.finish("eval_fr"), "eval_baselines": baselines}
