"""Train DeepRM's policy with REINFORCE and a per-time-step baseline (PyTorch, one file).

CleanRL-style: the hyper-parameters are :class:`TrainConfig`, the algorithm is the loop in
:func:`train`. One iteration:

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
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from dcsim import __version__
from dcsim.learn import resume as rs
from dcsim.learn.deeprm_config import (  # noqa: F401  (re-exported)
    TrainConfig,
    load_train_config,
)
from dcsim.learn.deeprm_rollout import (  # noqa: F401  (re-exported)
    ObsBuffer,
    Policy,
    evaluate,
    rollout_jobset,
    run_lockstep,
    torch_logits,
)
from dcsim.learn.pace import Pace
from dcsim.queue.env import QueueConfig, QueueEnv
from dcsim.schedulers.deeprm import (
    ImageSpec,
    save_checkpoint,
)

__all__ = ["Policy", "TrainConfig", "evaluate", "load_train_config", "rollout_jobset", "train"]


# --------------------------------------------------------------------------- training
def _meta(cfg: TrainConfig, *, command: str | None, iteration: int, iterations: int,
          wall: float, eval_slowdown: float | None, best_iteration: int | None = None
          ) -> dict[str, Any]:
    queue = dataclasses.asdict(cfg.queue_config())
    return {
        "queue_config": queue,
        "jobs": cfg.job_params(),
        "training": {
            "algorithm": "REINFORCE, per-time-step baseline over R rollouts per job set",
            "command": command,
            "iteration": iteration,          # the iteration these weights are from
            "iterations": iterations,        # iterations run when this file was written
            "wall_time_s": round(wall, 3),   # training wall time when this file was written
            "eval_slowdown": eval_slowdown,
            "best_iteration": best_iteration,
            "config": cfg.to_dict(),
        },
        "dcsim_version": __version__,
    }


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
    out = Path(out)
    state = rs.load(out, "deeprm", cfg.to_dict(), cfg.max_wall_s) if resume else None
    out.mkdir(parents=True, exist_ok=True)
    say = log or (lambda s: None)
    spec = cfg.image_spec()
    queue = cfg.queue_config()
    threads = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)
    try:
        with rs.StopRequest(stop_after) as guard:
            return _train(cfg, out, command, say, spec, queue, state, guard)
    finally:
        torch.set_num_threads(threads)


def _train(cfg: TrainConfig, out: Path, command: str | None, say, spec: ImageSpec,
           queue: QueueConfig, state: tuple[dict[str, np.ndarray], dict[str, Any]] | None,
           guard: rs.StopRequest) -> dict[str, Any]:
    if state is not None:
        command = state[1]["command"]  # the command these weights come from
    torch.manual_seed(cfg.seed)
    policy = Policy(spec.size, cfg.hidden, spec.actions, cfg.init_std)
    if cfg.optimizer == "adam":
        opt: torch.optim.Optimizer = torch.optim.Adam(policy.parameters(), lr=cfg.lr)
    else:
        opt = torch.optim.RMSprop(policy.parameters(), lr=cfg.lr, alpha=cfg.rms_rho,
                                  eps=cfg.rms_eps)
    set_seq, act_seq = np.random.SeedSequence(cfg.seed).spawn(2)
    set_rng, act_rng = np.random.default_rng(set_seq), np.random.default_rng(act_seq)
    eval_rng = np.random.default_rng(cfg.eval_seed)
    eval_sets = [cfg.jobset(eval_rng) for _ in range(cfg.eval_jobsets)]
    pool = [cfg.jobset(set_rng) for _ in range(cfg.train_pool)]
    envs = [QueueEnv(queue) for _ in range(cfg.rollouts)]
    buffer = ObsBuffer(spec.size)
    act = torch_logits(policy)
    rows: list[dict[str, Any]] = []
    best = (float("inf"), -1, None)  # (eval slowdown, iteration, weights)
    t0 = time.perf_counter()
    paths = {"progress": out / "progress.parquet", "best": out / "checkpoint.npz",
             "last": out / "last.npz"}
    it = 0

    def save_state(stopped: str | None) -> None:
        arrays, opt_doc = rs.learner_arrays({"policy": policy}, opt, best[2],
                                            {"progress": rs.rows_array(rows)})
        rs.save(out, kind="deeprm", config=cfg.to_dict(), command=command, iteration=it,
                iterations=cfg.iterations, wall_s=time.perf_counter() - t0, stopped=stopped,
                arrays=arrays, doc={
                    "optimizer": opt_doc,
                    "rngs": rs.generator_states(jobsets=set_rng, actions=act_rng),
                    "best": {"value": rs.finite_or_none(best[0]), "iteration": best[1]}})

    if state is not None:  # continue where the saved run stopped
        arrays, doc = state
        rs.load_module(policy, arrays, "policy.")
        rs.load_optimizer(opt, arrays, doc["optimizer"])
        rs.load_generators(doc["rngs"], jobsets=set_rng, actions=act_rng)
        rs.load_torch_rng(arrays)
        rows = rs.rows_from_array(arrays["progress"])
        if doc["best"]["value"] is not None:
            best = (doc["best"]["value"], doc["best"]["iteration"],
                    rs.prefixed(arrays, "best."))
        it = doc["iteration"]
        t0 -= doc["wall_s"]
        say(f"resuming after iteration {it} of {cfg.iterations} from {out / rs.RESUME_FILE}")
    # the lines' iteration, decisions/s and ETA, counted from where this invocation starts
    steps = int(sum(r.get("decisions", 0) for r in rows))
    pace = Pace(cfg.iterations, cfg.max_wall_s)
    pace.begin(it, time.perf_counter() - t0, steps)
    guard.arm()  # from here a first SIGINT/SIGTERM stops after the iteration under way
    while it < cfg.iterations:
        it += 1
        stop = it == cfg.iterations or (
            cfg.max_wall_s is not None and time.perf_counter() - t0 >= cfg.max_wall_s)
        opt.zero_grad()
        returns, slowdowns, ent_sum, loss_sum, decisions = [], [], 0.0, 0.0, 0
        for n in range(cfg.jobsets_per_iter):
            if pool:
                js = pool[((it - 1) * cfg.jobsets_per_iter + n) % len(pool)]
            else:
                js = cfg.jobset(set_rng)
            b = rollout_jobset(envs, js, act, spec, act_rng, cfg, buffer)
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
        opt.step()
        steps += decisions
        sd = np.concatenate(slowdowns)
        row = {"iteration": it, "wall_s": time.perf_counter() - t0,
               "train_return": float(np.concatenate(returns).mean()),
               "train_slowdown": float(sd.mean()) if sd.size else float("nan"),
               "eval_slowdown": float("nan"), "eval_unfinished": -1,
               "eval_slowdown_sampled": float("nan"),
               "entropy": ent_sum / cfg.jobsets_per_iter, "loss": loss_sum,
               "decisions": decisions}
        if it % cfg.eval_every == 0 or stop:
            weights = policy.numpy_weights()
            ev, unfinished = evaluate(act, spec, queue, eval_sets)
            ev_sampled, _ = evaluate(act, spec, queue, eval_sets,
                                     np.random.default_rng([cfg.eval_seed, it]))
            row.update(eval_slowdown=ev, eval_unfinished=unfinished,
                       eval_slowdown_sampled=ev_sampled, wall_s=time.perf_counter() - t0)
            wall = row["wall_s"]
            if ev < best[0] or best[2] is None:
                best = (ev, it, weights)
                save_checkpoint(paths["best"], weights, spec,
                                _meta(cfg, command=command, iteration=it, iterations=it,
                                      wall=wall, eval_slowdown=ev, best_iteration=it))
            save_checkpoint(paths["last"], weights, spec,
                            _meta(cfg, command=command, iteration=it, iterations=it,
                                  wall=wall, eval_slowdown=ev, best_iteration=best[1]))
            say(f"{pace.head(it, wall, steps, width=5)}  "
                f"train return {row['train_return']:9.2f}  "
                f"train slowdown {row['train_slowdown']:6.3f}  eval slowdown {ev:6.3f}"
                f"{f' ({unfinished} unfinished)' if unfinished else ''}  "
                f"(sampled {ev_sampled:6.3f})  entropy {row['entropy']:.3f}")
        rows.append(row)
        if it % cfg.eval_every != 0 and not stop and pace.due(row["wall_s"]):
            say(pace.head(it, row["wall_s"], steps, width=5))  # between evaluations
        halt = not stop and guard(it)  # Ctrl-C (or stop_after): stop here, resumable
        if halt and it % cfg.eval_every != 0:  # between evaluations: saved, not evaluated
            save_checkpoint(paths["last"], policy.numpy_weights(), spec, _meta(
                cfg, command=command, iteration=it, iterations=it, wall=row["wall_s"],
                eval_slowdown=None, best_iteration=best[1] if best[2] is not None else None))
        rs.end_iteration(out, iteration=it, iterations=cfg.iterations,
                         eval_every=cfg.eval_every, stop=stop, halt=halt, rows=rows,
                         progress=paths["progress"], save_state=save_state)
        if stop:
            break
    wall = time.perf_counter() - t0
    # rewrite the best checkpoint's JSON with the whole run's record
    ev, best_it, best_w = best
    save_checkpoint(paths["best"], best_w, spec,
                    _meta(cfg, command=command, iteration=best_it,
                          iterations=it, wall=wall, eval_slowdown=ev,
                          best_iteration=best_it))
    return {"best_iteration": best_it, "best_eval_slowdown": ev,
            "iterations": it, "wall_time_s": wall,
            **{k: str(v) for k, v in paths.items()}}
