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

import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from dcsim import __version__
from dcsim.allocators.multi.learned import (
    save_checkpoint,
)
from dcsim.greedy import greedy_argmax_torch
from dcsim.learn import resume as rs
from dcsim.learn.gnn import NaraPolicy, NaraValue, graph_batch, stack_obs
from dcsim.learn.nara_config import (  # noqa: F401  (TrainConfig, load_train_config: re-exported)
    TrainConfig,
    initial_weights,
    load_train_config,
)
from dcsim.learn.nara_env import NaraEnv
from dcsim.learn.nara_eval import evaluate, evaluate_tetris

__all__ = ["TrainConfig", "evaluate", "load_train_config", "train"]


# --------------------------------------------------------------------------- rollouts
def _device(cfg: TrainConfig) -> torch.device:
    if cfg.device == "cuda" or (cfg.device == "auto" and torch.cuda.is_available()):
        return torch.device("cuda")
    return torch.device("cpu")


def _sample(logits: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One action per row from softmax(logits) by inverse CDF (float64)."""
    z = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(z)
    c = np.cumsum(p, axis=1)
    u = rng.random(len(c)) * c[:, -1]
    a = (c < u[:, None]).sum(axis=1)
    return np.minimum(a, logits.shape[1] - 1)


# --------------------------------------------------------------------------- training
def _meta(cfg: TrainConfig, *, command: str | None, iteration: int, iterations: int,
          wall: float, env_steps: int, eval_acceptance: float | None,
          best_iteration: int | None,
          eval_tetris: dict[str, Any] | None, device: str,
          eval_per_topology: dict[str, float] | None = None) -> dict[str, Any]:
    extra = {} if eval_per_topology is None else {"eval_per_topology": eval_per_topology}
    return {
        "training": {
            "algorithm": "PPO (clipped), GAE, separate value GNN",
            "command": command,
            "iteration": iteration,          # the iteration these weights are from
            "iterations": iterations,        # iterations run when this file was written
            "env_steps": env_steps,
            "wall_time_s": round(wall, 3),   # training wall time when this file was written
            "eval_acceptance": eval_acceptance,
            "eval_metric": "mean acceptance_last20 of the greedy policy over eval_episodes "
                           "held-out episodes of eval_requests requests",
            **extra,
            "eval_tetris": eval_tetris,
            "best_iteration": best_iteration,
            "device": device,
            "config": cfg.to_dict(),
        },
        "versions": {"dcsim": __version__, "torch": torch.__version__,
                     "numpy": np.__version__, "python": platform.python_version()},
    }


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
    out = Path(out)
    state = rs.load(out, "nara", cfg.to_dict(), cfg.max_wall_s) if resume else None
    out.mkdir(parents=True, exist_ok=True)
    say = log or (lambda s: None)
    device = _device(cfg)
    threads = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)
    try:
        with rs.StopRequest(stop_after) as guard:
            return _train(cfg, out, command, say, device, state, guard)
    finally:
        torch.set_num_threads(threads)


def _train(cfg: TrainConfig, out: Path, command: str | None, say, device,
           state: tuple[dict[str, np.ndarray], dict[str, Any]] | None,
           guard: rs.StopRequest) -> dict[str, Any]:
    if state is not None:
        command = state[1]["command"]  # the command these weights come from
    env_cfg = cfg.env_config()
    envs = [NaraEnv(env_cfg) for _ in range(cfg.num_envs)]
    resources = tuple(envs[0].topology.resources)
    arch = cfg.architecture(len(resources))
    torch.manual_seed(cfg.seed)
    policy = NaraPolicy(arch).to(device)
    value = NaraValue(arch, cfg.value_hidden).to(device)
    if cfg.init_from is not None and state is None:
        policy.load_numpy(initial_weights(cfg, len(resources)))
    params = list(policy.parameters()) + list(value.parameters())
    opt = torch.optim.Adam(params, lr=cfg.lr, eps=1e-5)
    ep_seq, act_seq, mb_seq = np.random.SeedSequence(cfg.seed).spawn(3)
    ep_rng = np.random.default_rng(ep_seq)
    act_rng = np.random.default_rng(act_seq)
    mb_rng = np.random.default_rng(mb_seq)
    eval_cfg = cfg.eval_configs()
    eval_seeds = [cfg.eval_seed + i for i in range(cfg.eval_episodes)]
    eval_tetris = evaluate_tetris(eval_cfg, eval_seeds)
    say(f"tetris on the eval episodes: acceptance_last20 {eval_tetris['acceptance']:.3f} "
        f"(ratio {eval_tetris['acceptance_ratio']:.3f})")

    def greedy(o: dict[str, np.ndarray]) -> np.ndarray:
        with torch.no_grad():
            return greedy_argmax_torch(policy(graph_batch(o, device))).cpu().numpy()

    def new_seed() -> int:
        return int(ep_rng.integers(2**62))

    B, T = cfg.num_envs, cfg.num_steps
    episodes = rs.EpisodeLog(B)  # what rebuilds the episodes in progress on --resume
    obs = []
    for i, env in enumerate(envs):
        seed = new_seed()
        episodes.reset(i, seed)
        obs.append(env.reset(seed=seed)[0])
    ep_return = np.zeros(B)
    rows: list[dict[str, Any]] = []
    best: tuple[float, int, dict[str, np.ndarray] | None, dict[str, float] | None] = (
        -np.inf, -1, None, None)
    paths = {"progress": out / "progress.parquet", "best": out / "checkpoint.npz",
             "last": out / "last.npz"}
    t0 = time.perf_counter()
    env_steps = 0
    it = 0

    def save_state(stopped: str | None) -> None:
        arrays, opt_doc = rs.learner_arrays(
            {"policy": policy, "value": value}, opt, best[2],
            {**episodes.arrays(), "ep_return": ep_return, "progress": rs.rows_array(rows)})
        rs.save(out, kind="nara", config=cfg.to_dict(), command=command, iteration=it,
                iterations=cfg.iterations, wall_s=time.perf_counter() - t0, stopped=stopped,
                arrays=arrays, doc={
                    "env_steps": env_steps, "optimizer": opt_doc,
                    "rngs": rs.generator_states(episodes=ep_rng, actions=act_rng,
                                                minibatches=mb_rng),
                    "best": {"value": rs.finite_or_none(best[0]), "iteration": best[1],
                             "per_topology": best[3]}})

    if state is not None:  # continue where the saved run stopped
        arrays, doc = state
        rs.load_module(policy, arrays, "policy.")
        rs.load_module(value, arrays, "value.")
        rs.load_optimizer(opt, arrays, doc["optimizer"])
        rs.load_generators(doc["rngs"], episodes=ep_rng, actions=act_rng,
                           minibatches=mb_rng)
        rs.load_torch_rng(arrays)
        episodes = rs.EpisodeLog.from_arrays(arrays, B)
        obs = episodes.replay(envs)
        ep_return = arrays["ep_return"].copy()
        rows = rs.rows_from_array(arrays["progress"])
        b = doc["best"]
        if b["value"] is not None:
            best = (b["value"], b["iteration"], rs.prefixed(arrays, "best."),
                    b["per_topology"])
        it, env_steps = doc["iteration"], doc["env_steps"]
        t0 -= doc["wall_s"]
        say(f"resuming after iteration {it} of {cfg.iterations} from {out / rs.RESUME_FILE}")
    elif cfg.init_from is not None:  # the starting policy is iteration 0's candidate
        ev = evaluate(greedy, eval_cfg, eval_seeds)
        per_topo = ev.get("per_topology")
        best = (ev["acceptance"], 0, policy.numpy_weights(), per_topo)
        save_checkpoint(paths["best"], best[2], arch, _meta(
            cfg, command=command, iteration=0, iterations=0, wall=0.0, env_steps=0,
            eval_acceptance=ev["acceptance"], best_iteration=0, eval_tetris=eval_tetris,
            device=str(device), eval_per_topology=per_topo), resources, cfg.features)
        rows.append({"iteration": 0, "wall_s": time.perf_counter() - t0, "env_steps": 0,
                     "eval_acceptance": ev["acceptance"],
                     "eval_acceptance_ratio": ev["acceptance_ratio"],
                     **{f"eval_acceptance:{n}": a for n, a in (per_topo or {}).items()}})
        say(f"iter    0  (init_from {cfg.init_from})  eval acc {ev['acceptance']:.3f}"
            f" (tetris {eval_tetris['acceptance']:.3f})")
    guard.arm()  # from here a first SIGINT/SIGTERM stops after the iteration under way
    while it < cfg.iterations:
        it += 1
        stop = it == cfg.iterations or (
            cfg.max_wall_s is not None and time.perf_counter() - t0 >= cfg.max_wall_s)
        lr = cfg.lr * (1.0 - (it - 1) / cfg.iterations) if cfg.anneal_lr else cfg.lr
        for group in opt.param_groups:
            group["lr"] = lr
        # ---- rollout
        t_roll = time.perf_counter()
        store: list[dict[str, np.ndarray]] = []
        actions = np.zeros((T, B), dtype=np.int64)
        logps = np.zeros((T, B), dtype=np.float32)
        rewards = np.zeros((T, B), dtype=np.float32)
        dones = np.zeros((T, B), dtype=np.float32)
        ep_acc, ep_ret = [], []
        for t in range(T):
            batch = stack_obs(obs)
            store.append(batch)
            with torch.no_grad():
                logits = policy(graph_batch(batch, device))
                logp_all = torch.log_softmax(logits, dim=1).cpu().numpy()
            a = _sample(logp_all.astype(np.float64), act_rng)
            actions[t] = a
            logps[t] = logp_all[np.arange(B), a]
            for i, env in enumerate(envs):
                o, r, done, _, info = env.step(int(a[i]))
                episodes.step(i, int(a[i]))
                rewards[t, i] = r
                ep_return[i] += r
                if done:
                    dones[t, i] = 1.0
                    ep_acc.append(info["accepted"] / max(info["received"], 1))
                    ep_ret.append(ep_return[i])
                    ep_return[i] = 0.0
                    seed = new_seed()
                    episodes.reset(i, seed)
                    o, _ = env.reset(seed=seed)
                obs[i] = o
        env_steps += T * B
        roll_s = time.perf_counter() - t_roll
        # ---- advantages (GAE), values of every stored state in one pass
        flat = {k: np.concatenate([s[k] for s in store]) for k in store[0]}  # (T*B, ...)
        with torch.no_grad():
            values = value(graph_batch(flat, device)).cpu().numpy().reshape(T, B)
            next_value = value(graph_batch(stack_obs(obs), device)).cpu().numpy()
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
        b_act = torch.as_tensor(actions.reshape(-1), device=device)
        b_logp = torch.as_tensor(logps.reshape(-1), device=device)
        b_adv = torch.as_tensor(adv.reshape(-1), device=device)
        b_ret = torch.as_tensor(returns.reshape(-1), device=device)
        b_val = torch.as_tensor(values.reshape(-1).astype(np.float32), device=device)
        n = T * B
        stats = {"pg_loss": [], "v_loss": [], "entropy": [], "approx_kl": [], "clipfrac": []}
        for _epoch in range(cfg.update_epochs):
            perm = mb_rng.permutation(n)
            kl_stop = False
            for start in range(0, n, cfg.minibatch_size):
                mb = perm[start:start + cfg.minibatch_size]
                g = graph_batch({k: v[mb] for k, v in flat.items()}, device)
                mbt = torch.as_tensor(mb, device=device)
                logp_all = torch.log_softmax(policy(g), dim=1)
                new_logp = logp_all.gather(1, b_act[mbt][:, None])[:, 0]
                entropy = -(logp_all.exp() * logp_all).sum(dim=1)
                ratio = (new_logp - b_logp[mbt]).exp()
                with torch.no_grad():
                    approx_kl = float(((ratio - 1) - (new_logp - b_logp[mbt])).mean())
                    clipfrac = float(((ratio - 1.0).abs() > cfg.clip_coef).float().mean())
                mb_adv = b_adv[mbt]
                if cfg.norm_adv and len(mb) > 1:
                    mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
                pg = torch.max(-mb_adv * ratio, -mb_adv * ratio.clamp(
                    1 - cfg.clip_coef, 1 + cfg.clip_coef)).mean()
                v = value(g)
                if cfg.clip_vloss:
                    v_clip = b_val[mbt] + (v - b_val[mbt]).clamp(-cfg.clip_coef * 10,
                                                                 cfg.clip_coef * 10)
                    v_loss = 0.5 * torch.max((v - b_ret[mbt]) ** 2,
                                             (v_clip - b_ret[mbt]) ** 2).mean()
                else:
                    v_loss = 0.5 * ((v - b_ret[mbt]) ** 2).mean()
                ent = entropy.mean()
                if it <= cfg.critic_warmup:  # the policy is frozen: no gradient reaches it
                    loss = cfg.vf_coef * v_loss
                else:
                    loss = pg - cfg.ent_coef * ent + cfg.vf_coef * v_loss
                opt.zero_grad()
                loss.backward()
                # clipped per network: the critic's gradients (returns of ±10s) would
                # otherwise dominate a shared norm and freeze the actor
                torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.max_grad_norm)
                torch.nn.utils.clip_grad_norm_(value.parameters(), cfg.max_grad_norm)
                opt.step()
                stats["pg_loss"].append(float(pg.detach()))
                stats["v_loss"].append(float(v_loss.detach()))
                stats["entropy"].append(float(ent.detach()))
                stats["approx_kl"].append(approx_kl)
                stats["clipfrac"].append(clipfrac)
                if cfg.target_kl is not None and approx_kl > cfg.target_kl:
                    kl_stop = True
                    break
            if kl_stop:
                break
        wall = time.perf_counter() - t0
        row = {"iteration": it, "wall_s": wall, "env_steps": env_steps,
               "steps_per_s": T * B / roll_s, "episodes": len(ep_acc),
               "train_acceptance": float(np.mean(ep_acc)) if ep_acc else float("nan"),
               "train_return": float(np.mean(ep_ret)) if ep_ret else float("nan"),
               **{k: float(np.mean(v)) for k, v in stats.items()}, "lr": lr,
               "eval_acceptance": float("nan"), "eval_acceptance_ratio": float("nan")}
        if it % cfg.eval_every == 0 or stop:
            ev = evaluate(greedy, eval_cfg, eval_seeds)
            wall = time.perf_counter() - t0
            row.update(eval_acceptance=ev["acceptance"],
                       eval_acceptance_ratio=ev["acceptance_ratio"], wall_s=wall)
            per_topo = ev.get("per_topology")
            for name, acc in (per_topo or {}).items():
                row[f"eval_acceptance:{name}"] = acc
            weights = policy.numpy_weights()
            if ev["acceptance"] > best[0] or best[2] is None:
                best = (ev["acceptance"], it, weights, per_topo)
                save_checkpoint(paths["best"], weights, arch, _meta(
                    cfg, command=command, iteration=it, iterations=it, wall=wall,
                    env_steps=env_steps, eval_acceptance=ev["acceptance"],
                    best_iteration=it, eval_tetris=eval_tetris, device=str(device),
                    eval_per_topology=per_topo), resources, cfg.features)
            save_checkpoint(paths["last"], weights, arch, _meta(
                cfg, command=command, iteration=it, iterations=it, wall=wall,
                env_steps=env_steps, eval_acceptance=ev["acceptance"],
                best_iteration=best[1], eval_tetris=eval_tetris, device=str(device),
                eval_per_topology=per_topo), resources, cfg.features)
            say(f"iter {it:4d}  {wall:7.1f}s  steps {env_steps:8d} ({row['steps_per_s']:5.0f}/s)"
                f"  train acc {row['train_acceptance']:.3f}  eval acc {ev['acceptance']:.3f}"
                f" (tetris {eval_tetris['acceptance']:.3f})  entropy {row['entropy']:.3f}"
                f"  kl {row['approx_kl']:.4f}  v_loss {row['v_loss']:.2f}")
            if per_topo:
                say("    " + "  ".join(f"{n.removeprefix('optical-')} {a:.3f}"
                                      f" ({eval_tetris['per_topology'][n]:.3f})"
                                      for n, a in per_topo.items()))
        rows.append(row)
        halt = not stop and guard(it)  # Ctrl-C (or stop_after): stop here, resumable
        if halt and it % cfg.eval_every != 0:  # between evaluations: saved, not evaluated
            save_checkpoint(paths["last"], policy.numpy_weights(), arch, _meta(
                cfg, command=command, iteration=it, iterations=it, wall=wall,
                env_steps=env_steps, eval_acceptance=None,
                best_iteration=best[1] if best[2] is not None else None,
                eval_tetris=eval_tetris, device=str(device)), resources, cfg.features)
        rs.end_iteration(out, iteration=it, iterations=cfg.iterations,
                         eval_every=cfg.eval_every, stop=stop, halt=halt, rows=rows,
                         progress=paths["progress"], save_state=save_state)
        if stop:
            break
    wall = time.perf_counter() - t0
    acc, best_it, best_w, best_per_topo = best
    save_checkpoint(paths["best"], best_w, arch, _meta(
        cfg, command=command, iteration=best_it, iterations=it, wall=wall,
        env_steps=env_steps, eval_acceptance=acc, best_iteration=best_it,
        eval_tetris=eval_tetris, device=str(device), eval_per_topology=best_per_topo),
        resources, cfg.features)
    return {"best_iteration": best_it, "best_eval_acceptance": acc, "iterations": it,
            "env_steps": env_steps, "wall_time_s": wall, "eval_tetris": eval_tetris,
            **{k: str(v) for k, v in paths.items()}}
