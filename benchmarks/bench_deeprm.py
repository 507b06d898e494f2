"""Speed of DeepRM's queue mode: the environment, the learned scheduler, and training.

    python benchmarks/bench_deeprm.py [--sets 20] [--iterations 3] [--jobsets 4]
                                      [--rollouts 20] [--seed 0] [--no-train]

Three tables, each with a ratio against a baseline measured in the same run:

1. simulated time steps per second of SJF on the load sweep (new_job_rate 0.1 … 1.0, job
   sets of 50 arrival steps, ``--sets`` sets per rate, each run to completion with
   :meth:`QueueEnv.run`), against the ``random`` scheduler on the same sets;
2. decisions per second of the ``deeprm`` scheduler (numpy inference of the shipped
   checkpoint, one decision at a time, as in an experiment) at rate 0.7, against SJF;
3. rollouts (and decisions) per second of the lock-step sampling rollouts alone (the
   shipped weights) and of training from scratch (``--iterations`` iterations of
   ``--jobsets`` job sets × ``--rollouts`` rollouts: rollouts + loss + optimiser step),
   against plain sequential greedy rollouts of the ``deeprm`` scheduler
   (:meth:`QueueEnv.run`); the ratio compares decisions/s, since episodes of different
   policies differ in length. Needs torch; skipped with ``--no-train``.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np
import pandas as pd

from dcsim.plugins import get_scheduler_class
from dcsim.queue import QueueConfig, QueueEnv, deeprm_jobset

RATES = [round(0.1 * k, 1) for k in range(1, 11)]


class Counting:
    """Wrap a scheduler to count its decisions."""

    def __init__(self, inner):
        self.inner, self.decisions = inner, 0
        self.name = inner.name

    def reset(self):
        self.inner.reset()

    def choose(self, view):
        self.decisions += 1
        return self.inner.choose(view)


def run_sets(name: str, sets, seed: int) -> tuple[float, int, int, float]:
    """(wall seconds, time steps, decisions, mean slowdown over jobs) of ``name`` on sets."""
    sched = Counting(get_scheduler_class(name)(rng=np.random.default_rng(seed)))
    env = QueueEnv(QueueConfig())
    steps, slow = 0, []
    t0 = time.perf_counter()
    for js in sets:
        s = env.run(sched, js)
        steps += s["steps"]
        rec = env.records()
        slow.append(rec["slowdown"][~np.isnan(rec["finish"])])
    wall = time.perf_counter() - t0
    sd = np.concatenate(slow)
    return wall, steps, sched.decisions, float(sd.mean()) if sd.size else float("nan")


def table(title: str, header: list[str], rows: list[list[str]]) -> None:
    print(f"\n{title}")
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    print("  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True)))
    for r in rows:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)))


def bench_env(n_sets: int, seed: int) -> None:
    rows = []
    for rate in RATES:
        sets = [deeprm_jobset(np.random.default_rng([seed, k]), new_job_rate=rate)
                for k in range(n_sets)]
        w_sjf, st_sjf, _, sd_sjf = run_sets("sjf", sets, seed)
        w_rnd, st_rnd, _, _ = run_sets("random", sets, seed)
        sjf, rnd = st_sjf / w_sjf, st_rnd / w_rnd
        rows.append([f"{rate:.1f}", f"{st_sjf / n_sets:.0f}", f"{sjf:,.0f}", f"{rnd:,.0f}",
                     f"{sjf / rnd:.2f}", f"{sd_sjf:.2f}"])
    table(f"1. SJF simulated steps/s on the load sweep ({n_sets} sets of 50 steps per rate)",
          ["rate", "steps/set", "sjf steps/s", "random steps/s", "sjf/random", "sjf slowdown"],
          rows)


def bench_decisions(n_sets: int, seed: int) -> None:
    sets = [deeprm_jobset(np.random.default_rng([seed, 7, k]), new_job_rate=0.7)
            for k in range(n_sets)]
    rows = []
    base = None
    for name in ("sjf", "deeprm"):
        wall, _, dec, sd = run_sets(name, sets, seed)
        rate = dec / wall
        base = base or rate
        rows.append([name, f"{dec:,}", f"{rate:,.0f}", f"{rate / base:.2f}", f"{sd:.2f}"])
    table(f"2. decisions/s at rate 0.7 ({n_sets} sets, one decision at a time)",
          ["scheduler", "decisions", "decisions/s", "vs sjf", "mean slowdown"], rows)


def bench_training(iterations: int, jobsets: int, rollouts: int, seed: int) -> None:
    try:
        import torch
    except ImportError:
        print("\n3. training: skipped (torch not installed)")
        return
    from dcsim.learn.deeprm.network import Policy, torch_logits
    from dcsim.learn.deeprm.rollout import ObsBuffer, rollout_jobset
    from dcsim.learn.deeprm.train import TrainConfig
    from dcsim.learn.deeprm.train import train as run_training
    from dcsim.schedulers.deeprm import DeepRMScheduler

    torch.set_num_threads(1)  # as the trainer (TrainConfig.threads)
    cfg = TrainConfig(iterations=iterations, jobsets_per_iter=jobsets, rollouts=rollouts,
                      eval_every=10 ** 9, eval_jobsets=1, seed=seed)
    spec = cfg.image_spec()
    rng = np.random.default_rng(seed)
    sets = [cfg.jobset(rng) for _ in range(jobsets)]
    # baseline: sequential greedy rollouts of the shipped checkpoint, numpy scheduler
    sched = Counting(DeepRMScheduler())
    env = QueueEnv(cfg.queue_config())
    n_base = max(jobsets, 4)
    t0 = time.perf_counter()
    for k in range(n_base):
        env.run(sched, sets[k % len(sets)])
    wall = time.perf_counter() - t0
    base, base_dec = n_base / wall, sched.decisions / wall
    # lock-step sampling rollouts alone (no gradient), same weights
    policy = Policy(spec.size, cfg.hidden, spec.actions)
    policy.load_numpy(sched.inner.checkpoint.weights)
    logits = torch_logits(policy)
    logits(np.zeros((1, spec.size), np.float32))  # warm torch up
    envs = [QueueEnv(cfg.queue_config()) for _ in range(rollouts)]
    buf = ObsBuffer(spec.size)
    dec = 0
    t0 = time.perf_counter()
    for js in sets:
        dec += len(rollout_jobset(envs, js, logits, spec, rng, cfg, buf).actions)
    wall = time.perf_counter() - t0
    lock, lock_dec = len(sets) * rollouts / wall, dec / wall
    # full training iterations from scratch (rollouts + loss + optimiser step + one final
    # greedy evaluation on one job set)
    with tempfile.TemporaryDirectory() as tmp:
        warm = TrainConfig(iterations=1, jobsets_per_iter=1, rollouts=1, eval_jobsets=1)
        run_training(warm, tmp, log=None)  # one-time costs: imports (pyarrow), first calls
        t0 = time.perf_counter()
        run_training(cfg, tmp, log=None)
        wall = time.perf_counter() - t0
        dec = int(pd.read_parquet(f"{tmp}/progress.parquet")["decisions"].sum())
    train, train_dec = iterations * jobsets * rollouts / wall, dec / wall
    rows = [["sequential greedy (QueueEnv.run, numpy)", f"{base:.1f}", f"{base_dec:,.0f}",
             "1.00"],
            [f"lock-step sampling ({rollouts} envs, torch)", f"{lock:.1f}",
             f"{lock_dec:,.0f}", f"{lock_dec / base_dec:.2f}"],
            [f"training ({iterations} it x {jobsets} sets x {rollouts})", f"{train:.1f}",
             f"{train_dec:,.0f}", f"{train_dec / base_dec:.2f}"]]
    table("3. rollouts/s (rate 0.7 job sets of 50 steps; ratio of decisions/s)",
          ["mode", "rollouts/s", "decisions/s", "ratio"], rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", type=int, default=20, help="job sets per rate / for decisions")
    ap.add_argument("--iterations", type=int, default=3, help="training iterations")
    ap.add_argument("--jobsets", type=int, default=4, help="job sets per training iteration")
    ap.add_argument("--rollouts", type=int, default=20, help="rollouts per job set")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-train", action="store_true", help="skip the training table")
    args = ap.parse_args()
    bench_env(args.sets, args.seed)
    bench_decisions(args.sets, args.seed)
    if not args.no_train:
        bench_training(args.iterations, args.jobsets, args.rollouts, args.seed)


if __name__ == "__main__":
    main()
