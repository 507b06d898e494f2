"""Train VMR²L's two-stage transformer policy with PPO (``dcsim train vmr2l CONFIG``).

One iteration, as the authors' ``main.py``: ``num_envs`` environments
(:class:`~dcsim.learn.vmr2l_env.VMR2LEnv`) run ``num_steps`` steps each in lock-step; at
each step one batched forward of the VM actor-critic gives the VM logits and the value, a
VM is sampled, the host actor (conditioned on that VM) gives the slot logits, masked by the
model's feasibility, and a slot is sampled; ``log π = log π_vm + log π_host``. GAE(γ, λ);
then ``update_epochs`` passes over ``num_minibatches`` shuffled minibatches: clipped policy
loss, clipped value loss × ``vf_coef``, entropy (VM + host) × ``ent_coef``, Adam with
gradient-norm clipping, the learning rate annealed linearly to 0; an epoch loop stops early
when its mean approximate KL exceeds ``target_kl``.

Defaults are the authors' settings (Adam 2.5e-4 annealed, 8 envs × 250 steps, 8 epochs, 16
minibatches, clip 0.1 on policy and value, entropy 0.005, value 0.01, grad norm 0.5, γ 0.99,
λ 0.95, approx-KL 0.15). Differences: the authors accumulate gradients over 4 minibatches of
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

import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from dcsim import __version__
from dcsim.learn import resume as rs
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


def _meta(cfg: TrainConfig, *, command, iteration, iterations, wall, env_steps, eval_fr,
          best_iteration, baselines, device) -> dict[str, Any]:
    return {"training": {
        "algorithm": "PPO (clipped), GAE; the authors' settings unless config says otherwise",
        "command": command, "iteration": iteration, "iterations": iterations,
        "env_steps": env_steps, "wall_time_s": round(wall, 3), "eval_fr": eval_fr,
        "eval_metric": (f"mean final FR over {cfg.eval_mappings} held-out "
                        f"{cfg.eval_preset} mappings at MNL {cfg.eval_mnl or cfg.mnl}, "
                        + ("greedy" if cfg.eval_samples == 1 else
                           f"best of {cfg.eval_samples} samples")),
        "eval_baselines": baselines, "best_iteration": best_iteration, "device": device,
        "config": cfg.to_dict()},
        "versions": {"dcsim": __version__, "torch": torch.__version__,
                     "numpy": np.__version__, "python": platform.python_version()}}


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
    out = Path(out)
    state = rs.load(out, "vmr2l", cfg.to_dict(), cfg.max_wall_s) if resume else None
    out.mkdir(parents=True, exist_ok=True)
    say = log or (lambda s: None)
    device = torch.device("cuda" if cfg.device == "cuda" or (
        cfg.device == "auto" and torch.cuda.is_available()) else "cpu")
    threads = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)
    try:
        with rs.StopRequest(stop_after) as guard:
            return _train(cfg, out, command, say, device, state, guard)
    finally:
        torch.set_num_threads(threads)


def _train(cfg: TrainConfig, out: Path, command, say, device,
           state: tuple[dict[str, np.ndarray], dict[str, Any]] | None,
           guard: rs.StopRequest) -> dict[str, Any]:
    if state is not None:
        command = state[1]["command"]  # the command these weights come from
    env_cfg = cfg.env_config()
    envs = [VMR2LEnv(env_cfg) for _ in range(cfg.num_envs)]
    arch = cfg.architecture()
    torch.manual_seed(cfg.seed)
    policy = VMR2LPolicy(arch, cfg.dropout).to(device)
    opt = torch.optim.Adam(policy.parameters(), lr=cfg.lr, eps=1e-5)
    ep_seq, act_seq, mb_seq = np.random.SeedSequence(cfg.seed).spawn(3)
    ep_rng, act_rng, mb_rng = (np.random.default_rng(s) for s in (ep_seq, act_seq, mb_seq))
    dev = eval_mappings(cfg)
    eval_mnl = cfg.eval_mnl or cfg.mnl
    baselines = evaluate_baselines(dev, eval_mnl)
    say("eval mappings: initial FR {initial:.4f}, greedy {greedy:.4f}, alpha_vbpp "
        "{alpha_vbpp:.4f}".format(**baselines))

    def new_seed() -> int:
        return int(ep_rng.integers(2**62))

    best: tuple[float, int, dict[str, np.ndarray] | None] = (np.inf, -1, None)
    if state is not None:
        pass  # the warm start or init_from policy is in the saved state
    elif cfg.init_from is not None:
        start = initial_weights(cfg)
        policy.load_numpy(start.weights)
        ev = evaluate_policy(start, dev, eval_mnl, cfg.eval_samples, cfg.eval_seed)
        best = (ev, 0, policy.numpy_weights())
        say(f"starting from {start.path}: eval FR {ev:.4f}")
    elif cfg.warmstart != "none":
        ws_seq = np.random.SeedSequence([cfg.seed, 1])
        ws_rng = np.random.default_rng(ws_seq)
        t_ws = time.perf_counter()
        clone(policy, cfg, teacher_data(cfg, ws_rng), ws_rng, device, say)
        weights = policy.numpy_weights()
        ev = evaluate_policy(Checkpoint(out / "warmstart.npz", weights, arch), dev, eval_mnl,
                             cfg.eval_samples, cfg.eval_seed)
        best = (ev, 0, weights)
        save_checkpoint(out / "warmstart.npz", weights, arch, _meta(
            cfg, command=command, iteration=0, iterations=0,
            wall=time.perf_counter() - t_ws, env_steps=0, eval_fr=ev, best_iteration=0,
            baselines=baselines, device=str(device)))
        say(f"after the warm start ({time.perf_counter() - t_ws:.0f}s): eval FR {ev:.4f}")

    B, T = cfg.num_envs, cfg.num_steps
    episodes = rs.EpisodeLog(B, width=2)  # what rebuilds the episodes on --resume
    obs = []
    for i, env in enumerate(envs):
        seed = new_seed()
        episodes.reset(i, seed)
        obs.append(env.reset(seed=seed)[0])
    H2 = 2 * env_cfg.max_hosts
    rows: list[dict[str, Any]] = []
    paths = {"progress": out / "progress.parquet", "best": out / "checkpoint.npz",
             "last": out / "last.npz"}
    t0 = time.perf_counter()
    env_steps = 0
    ep_ret = np.zeros(B)
    it = 0

    def save_state(stopped: str | None) -> None:
        arrays, opt_doc = rs.learner_arrays(
            {"policy": policy}, opt, best[2],
            {**episodes.arrays(), "ep_return": ep_ret, "progress": rs.rows_array(rows)})
        rs.save(out, kind="vmr2l", config=cfg.to_dict(), command=command, iteration=it,
                iterations=cfg.iterations, wall_s=time.perf_counter() - t0, stopped=stopped,
                arrays=arrays, doc={
                    "env_steps": env_steps, "optimizer": opt_doc,
                    "rngs": rs.generator_states(episodes=ep_rng, actions=act_rng,
                                                minibatches=mb_rng),
                    "best": {"value": rs.finite_or_none(best[0]), "iteration": best[1]}})

    if state is not None:  # continue where the saved run stopped
        arrays, doc = state
        rs.load_module(policy, arrays, "policy.")
        rs.load_optimizer(opt, arrays, doc["optimizer"])
        rs.load_generators(doc["rngs"], episodes=ep_rng, actions=act_rng,
                           minibatches=mb_rng)
        rs.load_torch_rng(arrays)
        episodes = rs.EpisodeLog.from_arrays(arrays, B, width=2)
        obs = episodes.replay(envs)
        ep_ret = arrays["ep_return"].copy()
        rows = rs.rows_from_array(arrays["progress"])
        if doc["best"]["value"] is not None:
            best = (doc["best"]["value"], doc["best"]["iteration"],
                    rs.prefixed(arrays, "best."))
        it, env_steps = doc["iteration"], doc["env_steps"]
        t0 -= doc["wall_s"]
        say(f"resuming after iteration {it} of {cfg.iterations} from {out / rs.RESUME_FILE}")
    guard.arm()  # from here a first SIGINT/SIGTERM stops after the iteration under way
    while it < cfg.iterations:
        it += 1
        stop = it == cfg.iterations or (
            cfg.max_wall_s is not None and time.perf_counter() - t0 >= cfg.max_wall_s)
        lr = cfg.lr * (1.0 - (it - 1) / cfg.iterations) if cfg.anneal_lr else cfg.lr
        for g in opt.param_groups:
            g["lr"] = lr
        # ---- rollout
        policy.eval()
        t_roll = time.perf_counter()
        store: list[dict[str, np.ndarray]] = []
        vm_a = np.zeros((T, B), dtype=np.int64)
        slot_a = np.zeros((T, B), dtype=np.int64)
        masks = np.zeros((T, B, H2), dtype=bool)
        logps = np.zeros((T, B), dtype=np.float32)
        values = np.zeros((T, B), dtype=np.float32)
        rewards = np.zeros((T, B), dtype=np.float32)
        dones = np.zeros((T, B), dtype=np.float32)
        ep_frs, ep_rets = [], []
        for t in range(T):
            batch = stack_observations(obs)
            store.append(batch)
            tb = batch_tensors(batch, device)
            with torch.no_grad():
                logits, value = policy.vm(tb["hosts"], tb["vms"], tb["step"], tb["host_pad"],
                                          tb["vm_pad"], tb["vm_host"])
                lp_vm = torch.log_softmax(logits, dim=-1).cpu().numpy()
                vi = sample_logp(lp_vm, act_rng)
                chosen = tb["vms"][torch.arange(B), torch.as_tensor(vi)]
                sl = policy.host(tb["hosts"], chosen, tb["step"], tb["host_pad"])
            m = np.stack([env.slot_mask(int(v)) for env, v in zip(envs, vi, strict=True)])
            masks[t] = m
            sl = sl.cpu().numpy().astype(np.float64)
            sl = np.where(m[:, :sl.shape[1]], sl, -np.inf)
            sl -= sl.max(axis=1, keepdims=True)
            lp_slot = sl - np.log(np.exp(sl).sum(axis=1, keepdims=True))
            si = sample_logp(lp_slot, act_rng)
            vm_a[t], slot_a[t] = vi, si
            logps[t] = lp_vm[np.arange(B), vi] + lp_slot[np.arange(B), si]
            values[t] = value.cpu().numpy()
            for i, env in enumerate(envs):
                o, r, done, _, info = env.step((int(vi[i]), int(si[i])))
                episodes.step(i, (int(vi[i]), int(si[i])))
                rewards[t, i] = r
                ep_ret[i] += r
                if done:
                    dones[t, i] = 1.0
                    ep_frs.append(info["fragment_rate"])
                    ep_rets.append(ep_ret[i])
                    ep_ret[i] = 0.0
                    seed = new_seed()
                    episodes.reset(i, seed)
                    o, _ = env.reset(seed=seed)
                obs[i] = o
        env_steps += T * B
        roll_s = time.perf_counter() - t_roll
        with torch.no_grad():
            tb = batch_tensors(stack_observations(obs), device)
            next_value = policy.vm(tb["hosts"], tb["vms"], tb["step"], tb["host_pad"],
                                   tb["vm_pad"], tb["vm_host"])[1].cpu().numpy()
        adv = np.zeros((T, B), dtype=np.float32)
        last = np.zeros(B, dtype=np.float32)
        for t in reversed(range(T)):
            nv = next_value if t == T - 1 else values[t + 1]
            nonterm = 1.0 - dones[t]
            delta = rewards[t] + cfg.gamma * nv * nonterm - values[t]
            last = delta + cfg.gamma * cfg.gae_lambda * nonterm * last
            adv[t] = last
        returns = adv + values
        # ---- update
        policy.train()
        flat = {k: np.concatenate([s[k] for s in store]) for k in store[0]}
        b_vm = torch.as_tensor(vm_a.reshape(-1), device=device)
        b_slot = torch.as_tensor(slot_a.reshape(-1), device=device)
        b_mask = torch.as_tensor(masks.reshape(T * B, H2), device=device)
        b_logp = torch.as_tensor(logps.reshape(-1), device=device)
        b_adv = torch.as_tensor(adv.reshape(-1), device=device)
        b_ret = torch.as_tensor(returns.reshape(-1), device=device)
        b_val = torch.as_tensor(values.reshape(-1), device=device)
        n = T * B
        mb_size = max(1, n // cfg.num_minibatches)
        stats: dict[str, list[float]] = {k: [] for k in
                                         ("pg_loss", "v_loss", "entropy", "approx_kl",
                                          "clipfrac")}
        for _epoch in range(cfg.update_epochs):
            perm = mb_rng.permutation(n)
            kls = []
            for start in range(0, n, mb_size):
                mb = perm[start:start + mb_size]
                tb = batch_tensors({k: v[mb] for k, v in flat.items()}, device)
                mbt = torch.as_tensor(mb, device=device)
                logp, ent, v, _, _ = evaluate_actions(policy, tb, b_vm[mbt], b_slot[mbt],
                                                       b_mask[mbt])
                logratio = logp - b_logp[mbt]
                ratio = logratio.exp()
                with torch.no_grad():
                    kl = float(((ratio - 1) - logratio).mean())
                    clipfrac = float(((ratio - 1.0).abs() > cfg.clip_coef).float().mean())
                mb_adv = b_adv[mbt]
                if cfg.norm_adv and len(mb) > 1:
                    mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
                pg = torch.max(-mb_adv * ratio, -mb_adv * ratio.clamp(
                    1 - cfg.clip_coef, 1 + cfg.clip_coef)).mean()
                if cfg.clip_vloss:
                    v_clip = b_val[mbt] + (v - b_val[mbt]).clamp(-cfg.clip_coef, cfg.clip_coef)
                    v_loss = 0.5 * torch.max((v - b_ret[mbt]) ** 2,
                                             (v_clip - b_ret[mbt]) ** 2).mean()
                else:
                    v_loss = 0.5 * ((v - b_ret[mbt]) ** 2).mean()
                loss = pg - cfg.ent_coef * ent.mean() + cfg.vf_coef * v_loss
                opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.max_grad_norm)
                opt.step()
                kls.append(kl)
                stats["pg_loss"].append(float(pg.detach()))
                stats["v_loss"].append(float(v_loss.detach()))
                stats["entropy"].append(float(ent.mean().detach()))
                stats["approx_kl"].append(kl)
                stats["clipfrac"].append(clipfrac)
            if cfg.target_kl is not None and np.mean(kls) > cfg.target_kl:
                break
        wall = time.perf_counter() - t0
        row = {"iteration": it, "wall_s": wall, "env_steps": env_steps,
               "steps_per_s": T * B / roll_s, "episodes": len(ep_frs),
               "train_fr": float(np.mean(ep_frs)) if ep_frs else float("nan"),
               "train_return": float(np.mean(ep_rets)) if ep_rets else float("nan"),
               **{k: float(np.mean(v)) for k, v in stats.items()}, "lr": lr,
               "eval_fr": float("nan")}
        if it % cfg.eval_every == 0 or stop:
            weights = policy.numpy_weights()
            ck = Checkpoint(paths["last"], weights, arch)
            ev = evaluate_policy(ck, dev, eval_mnl, cfg.eval_samples, cfg.eval_seed)
            wall = time.perf_counter() - t0
            row.update(eval_fr=ev, wall_s=wall)
            if ev < best[0] or best[2] is None:
                best = (ev, it, weights)
                save_checkpoint(paths["best"], weights, arch, _meta(
                    cfg, command=command, iteration=it, iterations=it, wall=wall,
                    env_steps=env_steps, eval_fr=ev, best_iteration=it,
                    baselines=baselines, device=str(device)))
            save_checkpoint(paths["last"], weights, arch, _meta(
                cfg, command=command, iteration=it, iterations=it, wall=wall,
                env_steps=env_steps, eval_fr=ev, best_iteration=best[1],
                baselines=baselines, device=str(device)))
            say(f"iter {it:4d}  {wall:7.1f}s  steps {env_steps:8d} ({row['steps_per_s']:4.0f}/s)"
                f"  train FR {row['train_fr']:.4f}  eval FR {ev:.4f} (greedy "
                f"{baselines['greedy']:.4f}, alpha_vbpp {baselines['alpha_vbpp']:.4f})"
                f"  entropy {row['entropy']:.3f}  kl {row['approx_kl']:.4f}")
        rows.append(row)
        halt = not stop and guard(it)  # Ctrl-C (or stop_after): stop here, resumable
        if halt and it % cfg.eval_every != 0:  # between evaluations: saved, not evaluated
            save_checkpoint(paths["last"], policy.numpy_weights(), arch, _meta(
                cfg, command=command, iteration=it, iterations=it, wall=wall,
                env_steps=env_steps, eval_fr=None,
                best_iteration=best[1] if best[2] is not None else None,
                baselines=baselines, device=str(device)))
        rs.end_iteration(out, iteration=it, iterations=cfg.iterations,
                         eval_every=cfg.eval_every, stop=stop, halt=halt, rows=rows,
                         progress=paths["progress"], save_state=save_state)
        if stop:
            break
    wall = time.perf_counter() - t0
    ev, best_it, best_w = best
    save_checkpoint(paths["best"], best_w, arch, _meta(
        cfg, command=command, iteration=best_it, iterations=it, wall=wall,
        env_steps=env_steps, eval_fr=ev, best_iteration=best_it, baselines=baselines,
        device=str(device)))
    return {"best_iteration": best_it, "best_eval_fr": ev, "iterations": it,
            "env_steps": env_steps, "wall_time_s": wall, "eval_baselines": baselines,
            **{k: str(v) for k, v in paths.items()}}
