"""VM rescheduling on the synthetic medium mapping: FR reached and time, per algorithm.

    python benchmarks/bench_resched.py [--seed 0] [--mnl 50] [--hosts 280] [--long]

Builds the synthetic medium mapping (280 hosts, ≈ 94 % cpu, VMR²L Table 1 mix), then runs
greedy and alpha_vbpp at MNL 50 and the MIP (aggregated formulation) with a 5-s limit;
``--long`` adds the MIP with a 120-s limit and the paper-literal per-VM formulation at 5 s
and 120 s (≈ 1 M binaries; ≈ 1.2 GB). Times are also given as ratios to a baseline measured
in the same run: validating an MNL-step migration list (random valid moves, fixed seed) step
by step through the model on a fresh copy (median of 50). The paper's medium-set numbers (MNL 50):
initial FR ≈ 0.55, MIP 0.2859 (Gurobi, 50.55 min), VMR²L 0.2953, α-VBPP and GA ≈ 0.38.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from dcsim.reschedulers.builtin import MIP, AlphaVBPP, Greedy
from dcsim.vm import BOTH, Migration
from dcsim.vm.mapping_io import parse_mapping
from dcsim.vm.synthetic import synthetic_mapping


def median_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def random_moves(state, n: int, rng: np.random.Generator) -> list[Migration]:
    """``n`` migrations, each valid after the previous ones: a random VM that can move,
    to a random option."""
    work = state.copy()
    out: list[Migration] = []
    for _ in range(1000 * n):
        if len(out) == n:
            break
        k = int(rng.integers(work.n_vms))
        opts = np.argwhere(work.options(k))
        if not len(opts):
            continue
        h, j = opts[rng.integers(len(opts))]
        m = Migration(k, int(h), BOTH if work.vm_double[k] else int(j))
        work.apply(m)
        out.append(m)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--mnl", type=int, default=50)
    ap.add_argument("--hosts", type=int, default=280)
    ap.add_argument("--long", action="store_true", help="also the 120-s and per-VM MIP runs")
    args = ap.parse_args()
    state = parse_mapping(synthetic_mapping(np.random.default_rng(args.seed),
                                            hosts=args.hosts)).state
    cpu = 1 - state.free_cpu.sum() / state.cap_cpu.sum()
    mem = 1 - state.free_mem.sum() / state.cap_mem.sum()
    print(f"synthetic medium, seed {args.seed}: {state.n_hosts} hosts, {state.n_vms} VMs, "
          f"cpu {cpu:.1%} used, memory {mem:.1%}; FR before {state.fragment_rate():.4f}; "
          f"MNL {args.mnl}")

    moves = random_moves(state, args.mnl, np.random.default_rng(args.seed))
    t_fr = median_time(state.fragment_rate, 200)
    t_validate = median_time(lambda: state.copy().apply_all(moves, mnl=args.mnl), 50)
    print(f"baseline: validating a {len(moves)}-step migration list "
          f"{t_validate * 1e3:.3f} ms (one FR computation {t_fr * 1e6:.1f} us)")
    runs = [
        ("greedy", Greedy()),
        ("alpha_vbpp (alpha=10)", AlphaVBPP()),
        ("mip aggregated, 5 s", MIP(MIP.parse_options({"time_limit": 5}))),
    ]
    if args.long:
        runs += [
            ("mip aggregated, 120 s", MIP(MIP.parse_options({"time_limit": 120}))),
            ("mip per_vm, 5 s", MIP(MIP.parse_options({"time_limit": 5,
                                                       "formulation": "per_vm"}))),
            ("mip per_vm, 120 s", MIP(MIP.parse_options({"time_limit": 120,
                                                         "formulation": "per_vm"}))),
        ]
    header = (f"{'algorithm':<24} {'FR before':>9} {'FR after':>9} {'moves':>5} "
              f"{'time s':>8} {'x baseline':>11} {'bound':>7}  status")
    print(header)
    print("-" * len(header))
    for label, algo in runs:
        r = algo.run(state, args.mnl)
        bound = f"{r.bound:.4f}" if r.bound is not None else "-"
        print(f"{label:<24} {r.fr_before:>9.4f} {r.fr_after:>9.4f} {len(r.migrations):>5} "
              f"{r.seconds:>8.3f} {r.seconds / t_validate:>11.0f} {bound:>7}  {r.status}",
              flush=True)


if __name__ == "__main__":
    main()
