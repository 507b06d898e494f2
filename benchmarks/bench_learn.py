"""Speed of Nara's learning stack (issue #7): environment, policy forward, PPO training,
and how training scales with the processes stepping its environments (issue #36).

    python benchmarks/bench_learn.py [--topologies alpha,delta] [--steps 2000]
                                     [--iterations 3] [--no-train]
                                     [--workers 1,2] [--update-shards 1,2] [--num-envs N]
                                     [--trainer nara|vmr2l] [--workers-only]
                                     [--rollout-groups N] [--device D] [--repeat R]

Each figure comes with a ratio against a baseline measured in the same run:

* **environment**: ``NaraEnv`` steps/s on alpha (one step = one server choice, the
  scripted Tetris choice), against the ``tetris`` allocator's server choices/s inside the
  plain engine on the same requests (ratio = env steps/s ÷ engine choices/s: the cost of
  handing every choice out of the simulation, building the observation included);
* **policy forward** per decision on each topology: the observation plus the numpy
  network (the ``nara`` allocator's path) and the torch network (one graph, no gradient),
  against Tetris's own choice (``tetris_scores`` + argmax) on the same partial allocations
  (ratio = policy time ÷ Tetris time);
* **training**: PPO env steps/s over ``--iterations`` iterations of
  ``experiments/nara_train.yaml`` (rollout only, and rollout + update), against the
  environment alone driven by the scripted Tetris choice (ratio = training ÷ env);
* **workers**: the same training at each ``--workers`` count (``num_workers``, the
  processes stepping the ``num_envs`` environments; 1 = in the trainer's process) and each
  ``--update-shards`` value (the parts of each minibatch's gradient, computed in those
  processes), env steps/s of the rollouts and overall (rollout + update), against the
  first row (ratio = steps/s ÷ the first row's, measured in the same run); the weights
  are checked to be the same at every worker count of one ``update_shards``. With
  ``--repeat R`` the rows run R times in rounds, each row's ratio against its round's
  first row, then the median and range of each row's ratio over the rounds: a VM's speed
  drifts by 10 % within minutes, so one pair of runs is not a measurement. Before and
  after, the machine's parallelism is probed: how much faster that many copies of a
  pure-Python loop run side by side than one after the other (2.00 on two free cores; a
  VM whose cores its host shares with other guests can give much less, and then no
  training can gain more). ``--trainer vmr2l`` times ``experiments/vmr2l_train.yaml``
  (shortened: fewer steps) instead.

Needs PyTorch and Gymnasium (``pip install -e ".[learn]"``).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from dcsim.allocators.multi.baselines import Tetris, tetris_scores
from dcsim.allocators.multi.learned import (
    Architecture,
    float64_weights,
    greedy_server,
    policy_logits,
)
from dcsim.learn.nara.env import NaraEnv
from dcsim.learn.nara.network import NaraPolicy, graph_batch, stack_obs
from dcsim.learn.nara.train import load_train_config, train
from dcsim.modes.loss import Engine, EngineConfig
from dcsim.tie_break import greedy_argmax, greedy_argmax_torch

ROOT = Path(__file__).parents[1]
#: topology -> (preset, H of the uniform holding time): the paper's settings
TOPOLOGIES = {"alpha": ("alpha", 30), "beta": ("beta", 30), "gamma": ("gamma", 480),
              "delta": ("delta", 1920)}


def env_for(topology: str, requests: int) -> NaraEnv:
    preset, H = TOPOLOGIES[topology]
    from dcsim.learn.nara.env import UNIFORM_WORKLOAD
    wl = dict(UNIFORM_WORKLOAD, duration=dict(UNIFORM_WORKLOAD["duration"], high=H))
    return NaraEnv(topology={"kind": "fabric", "preset": preset}, workload=wl,
                   requests=requests)


def bench_env(requests: int, seed: int = 0) -> tuple[float, float]:
    """(env steps/s with the scripted Tetris choice, tetris choices/s in the engine)."""
    env = env_for("alpha", requests)
    env.reset(seed=seed)
    inv = env.view.inv_capacity ** 2
    steps, done = 0, False
    t0 = time.perf_counter()
    while not done:
        a = int(tetris_scores(env.partial, env.view, inv, 0.9).argmax())
        _, _, done, _, _ = env.step(a)
        steps += 1
    env_rate = steps / (time.perf_counter() - t0)
    calls = [0]

    class Counting(Tetris):
        def choose(self, partial, view):
            calls[0] += 1
            return super().choose(partial, view)

    eng = Engine(env.topology, env.source, Counting(), np.random.default_rng(seed),
                 EngineConfig(capacity="wait"))
    t0 = time.perf_counter()
    eng.run()
    return env_rate, calls[0] / (time.perf_counter() - t0)


def bench_forward(topology: str, decisions: int, seed: int = 0) -> dict[str, float]:
    """Mean seconds per decision: observation + the ``nara`` allocator's greedy choice (numpy,
    float64: ``greedy_server``), the same in float32 (``policy_logits``), the torch net,
    Tetris's choice."""
    env = env_for(topology, 10_000)
    arch = Architecture.for_resources(2)
    torch.manual_seed(seed)
    pol = NaraPolicy(arch)
    w = pol.numpy_weights()
    w64 = float64_weights(w)
    obs, _ = env.reset(seed=seed)
    inv = env.view.inv_capacity ** 2
    t_np = t_np32 = t_torch = t_tetris = 0.0
    for _ in range(decisions):
        part, view = env.partial, env.view
        t0 = time.perf_counter()
        o = env.observer.observe(part, view)
        t_obs = time.perf_counter() - t0
        t0 = time.perf_counter()
        greedy_server(w64, arch, env.layout, o)
        t_np += t_obs + time.perf_counter() - t0
        t0 = time.perf_counter()
        greedy_argmax(policy_logits(w, arch, env.layout, o))  # float32, the same observation
        t_np32 += t_obs + time.perf_counter() - t0
        t1 = time.perf_counter()
        with torch.no_grad():
            int(greedy_argmax_torch(pol(graph_batch(stack_obs([obs])))[0]))
        t2 = time.perf_counter()
        a = int(tetris_scores(part, view, inv, 0.9).argmax())
        t3 = time.perf_counter()
        t_torch += t2 - t1
        t_tetris += t3 - t2
        obs, _, done, _, _ = env.step(a)  # follow Tetris, so every policy sees one state
        if done:
            obs, _ = env.reset(seed=seed + 1)
    n = decisions
    return {"numpy": t_np / n, "numpy32": t_np32 / n, "torch": t_torch / n,
            "tetris": t_tetris / n,
            "servers": env.layout.n_servers, "nodes": env.layout.n_nodes}


def bench_train(iterations: int) -> tuple[float, float]:
    """(rollout env steps/s, overall env steps/s incl. updates) of PPO on the shipped
    training config for a few iterations (no evaluation until the last)."""
    cfg = load_train_config(ROOT / "experiments" / "nara_train.yaml",
                            iterations=iterations, max_wall_s=None,
                            eval_every=10_000, eval_episodes=1, eval_requests=8)
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        r = train(cfg, d, log=None)
        wall = time.perf_counter() - t0
        import pandas as pd
        prog = pd.read_parquet(Path(d) / "progress.parquet")
    steps = int(r["env_steps"])
    roll = float(np.mean(prog["steps_per_s"]))
    return roll, steps / wall


def bench_workers(trainer: str, iterations: int, workers: int, shards: int,
                  num_envs: int | None = None, device: str = "auto",
                  groups: int = 1) -> dict[str, float]:
    """Rollout and overall env steps/s of ``iterations`` iterations of ``trainer``'s shipped
    config with ``workers`` processes stepping the environments and ``shards`` parts per
    minibatch gradient (``update_shards``; the start-up of the workers excluded: steps/s
    are over the iterations), and a digest of the weights. ``num_envs`` (Nara): that many
    environments, with num_steps making the same 2,048 decisions per iteration; ``device``:
    the trainers' setting (``auto``: CUDA when available); ``groups``: Nara's
    ``rollout_groups``."""
    import hashlib

    import pandas as pd

    if trainer == "nara":
        cfg = load_train_config(ROOT / "experiments" / "nara_train.yaml",
                                iterations=iterations, max_wall_s=None, eval_every=10_000,
                                eval_episodes=1, eval_requests=8, num_workers=workers,
                                update_shards=shards, device=device, rollout_groups=groups,
                                **({} if num_envs is None else
                                   {"num_envs": num_envs, "num_steps": 2048 // num_envs}))
        run = train
    else:
        from dcsim.learn.vmr2l import train as vmr2l_train
        cfg = vmr2l_train.load_train_config(
            ROOT / "experiments" / "vmr2l_train.yaml", iterations=iterations,
            max_wall_s=None, warmstart="none", num_steps=50, minibatch_size=100,
            update_epochs=1, eval_every=10_000, eval_mappings=1, eval_samples=1,
            num_workers=workers, update_shards=shards, device=device)
        run = vmr2l_train.train
    with tempfile.TemporaryDirectory() as d:
        run(cfg, d, log=None)
        prog = pd.read_parquet(Path(d) / "progress.parquet")
        with np.load(Path(d) / "last.npz") as z:
            digest = hashlib.sha256(b"".join(z[k].tobytes() for k in sorted(z.files)))
    steps = float(prog["env_steps"].iloc[-1])
    # the wall time of the iterations: the first row's wall_s starts with the workers up
    return {"rollout": float(np.mean(prog["steps_per_s"])),
            "overall": steps / float(prog["wall_s"].iloc[-1]),
            "weights": digest.hexdigest()[:12]}


def _spin(n: int) -> float:
    """Seconds of a pure-Python loop of ``n`` steps (the parallelism probe's unit)."""
    t0 = time.perf_counter()
    s = 0
    for i in range(n):
        s += i * i
    return time.perf_counter() - t0


def machine_parallelism(processes: int, n: int = 10_000_000) -> float:
    """How much faster ``processes`` copies of one pure-Python loop run side by side than
    one after the other, in spawned processes: the most a training with that many processes
    can gain on this machine now (a VM's cores can be shared with its host's other guests;
    2.0 for two free cores)."""
    import multiprocessing as mp

    with mp.get_context("spawn").Pool(processes) as pool:
        pool.map(_spin, [1000] * processes)  # the workers started
        alone = sum(pool.apply(_spin, (n,)) for _ in range(processes))
        t0 = time.perf_counter()
        pool.map(_spin, [n] * processes)
        return alone / (time.perf_counter() - t0)


def print_workers(trainer: str, iterations: int, counts: list[int], shards: list[int],
                  num_envs: int | None = None, device: str = "auto", groups: int = 1,
                  repeat: int = 1) -> None:
    cuda = device == "cuda" or (device == "auto" and torch.cuda.is_available())
    print(f"\n{trainer} PPO training by worker count ({iterations} iterations, "
          f"{'CUDA' if cuda else 'CPU'}, {os.cpu_count()} cores, rollout_groups {groups}); "
          "ratio = steps/s over the first row's"
          + (f" (of the same round; {repeat} rounds)" if repeat > 1 else "") + ":")
    print(f"  {'shards':>6}{'workers':>8}{'rollout steps/s':>17}{'ratio':>7}"
          f"{'overall steps/s':>17}{'ratio':>7}  weights")
    most = max(counts)
    probe = f"{most} copies of a Python loop side by side vs one after the other"
    if most > 1:
        print(f"  machine parallelism before: {machine_parallelism(most):.2f}x ({probe})")
    ratios: dict[tuple[int, int], list[tuple[float, float]]] = {}
    weights: dict[int, str] = {}  # each update_shards' weights, the same at every count
    for _round in range(repeat):
        base = None
        for k in shards:
            for w in counts:
                r = bench_workers(trainer, iterations, w, k, num_envs, device, groups)
                base = base or r
                weights.setdefault(k, r["weights"])
                roll, overall = r["rollout"] / base["rollout"], r["overall"] / base["overall"]
                if r is not base:
                    ratios.setdefault((k, w), []).append((roll, overall))
                print(f"  {k:>6}{w:>8}{r['rollout']:>17,.0f}{roll:>7.2f}"
                      f"{r['overall']:>17,.0f}{overall:>7.2f}  {r['weights']}"
                      + ("" if r["weights"] == weights[k] else "  DIFFERENT WEIGHTS"))
    if most > 1:
        print(f"  machine parallelism after:  {machine_parallelism(most):.2f}x")
    if repeat > 1:
        print(f"  over the {repeat} rounds, ratio to the round's first row: median (min-max)")
        for (k, w), got in ratios.items():
            roll, overall = np.array(got).T
            print(f"  {k:>6}{w:>8}  rollout {np.median(roll):.2f} ({roll.min():.2f}-"
                  f"{roll.max():.2f})  overall {np.median(overall):.2f} ({overall.min():.2f}-"
                  f"{overall.max():.2f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topologies", default="alpha,delta")
    ap.add_argument("--decisions", type=int, default=300,
                    help="decisions timed per topology (forward pass)")
    ap.add_argument("--requests", type=int, default=500, help="env episode (alpha)")
    ap.add_argument("--iterations", type=int, default=3, help="PPO iterations timed")
    ap.add_argument("--no-train", action="store_true")
    ap.add_argument("--workers", default="1,2",
                    help="worker counts to time training at (comma-separated; empty: none)")
    ap.add_argument("--update-shards", default="1,2",
                    help="update_shards values to time the worker counts at (comma-separated)")
    ap.add_argument("--num-envs", type=int, default=None,
                    help="Nara's num_envs for the worker comparison (num_steps keeps 2,048 "
                         "decisions per iteration); default: the config's 8")
    ap.add_argument("--trainer", choices=("nara", "vmr2l"), default="nara",
                    help="whose training --workers times")
    ap.add_argument("--rollout-groups", type=int, default=1,
                    help="Nara's rollout_groups for the worker comparison")
    ap.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                    help="the trainers' device for the worker comparison")
    ap.add_argument("--workers-only", action="store_true",
                    help="only the worker-count comparison")
    ap.add_argument("--repeat", type=int, default=1,
                    help="rounds of the --workers counts, each row's ratio against its "
                         "round's first row, and the median and range over the rounds")
    args = ap.parse_args()
    torch.set_num_threads(1)
    counts = [int(x) for x in args.workers.split(",") if x]
    shards = [int(x) for x in args.update_shards.split(",") if x]
    if args.workers_only:
        print_workers(args.trainer, args.iterations, counts, shards, args.num_envs,
                      args.device, args.rollout_groups, args.repeat)
        return
    env_rate, engine_rate = bench_env(args.requests)
    print(f"environment (alpha, {args.requests} requests, scripted Tetris choice):")
    print(f"  NaraEnv steps/s {env_rate:10,.0f}   engine tetris choices/s {engine_rate:10,.0f}"
          f"   ratio {env_rate / engine_rate:.2f}")
    print("\npolicy forward per decision (ms), ratio = time / Tetris's choice on the same "
          "states:")
    print("  (numpy: the allocator's float64 greedy choice; numpy32: the same in float32)")
    print(f"  {'topology':<9}{'servers':>8}{'nodes':>7}{'numpy':>9}{'numpy32':>9}{'torch':>9}"
          f"{'tetris':>9}{'numpy/tetris':>14}{'torch/tetris':>14}{'numpy/numpy32':>15}")
    for t in [x for x in args.topologies.split(",") if x]:
        r = bench_forward(t, args.decisions)
        print(f"  {t:<9}{r['servers']:>8}{r['nodes']:>7}{r['numpy'] * 1e3:>9.3f}"
              f"{r['numpy32'] * 1e3:>9.3f}{r['torch'] * 1e3:>9.3f}{r['tetris'] * 1e3:>9.3f}"
              f"{r['numpy'] / r['tetris']:>14.1f}{r['torch'] / r['tetris']:>14.1f}"
              f"{r['numpy'] / r['numpy32']:>15.2f}")
    if not args.no_train:
        roll, overall = bench_train(args.iterations)
        print(f"\nPPO training (experiments/nara_train.yaml, {args.iterations} iterations, "
              f"{'CUDA' if torch.cuda.is_available() else 'CPU'}):")
        print(f"  rollout env steps/s {roll:8,.0f}   ratio to env alone {roll / env_rate:.2f}")
        print(f"  overall env steps/s {overall:8,.0f}   ratio to env alone "
              f"{overall / env_rate:.2f}  (rollout + PPO update)")
    if counts:
        print_workers(args.trainer, args.iterations, counts, shards, args.num_envs,
                      args.device, args.rollout_groups, args.repeat)


if __name__ == "__main__":
    main()
