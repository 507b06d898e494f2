"""The MIP rescheduler on production-like mappings: FR and time to optimum per MNL, for the old
(wall-clock limited) and the new (deterministic, warm-started) configuration.

    python benchmarks/bench_mip.py [--preset production] [--seeds 0,1,2] [--mnl 10,20,30,40,50]
                                   [--old-limit 5] [--busy]

Per seed, a mapping of the preset (``production``: 279 hosts, ≈ 2,100 VMs, initial FR ≈ 0.55-0.60;
``medium``: VMR²L's Table 1 mix, easier), then per MNL:

* ``greedy`` and ``alpha_vbpp`` (their FR: the warm start's);
* *old*: the MIP configured as before issue #15 (a ``--old-limit``-second wall-clock limit,
  no warm start, no node limit), on today's formulation: what it returns depends on load;
* *new*: ``mip`` with its defaults (node limit, warm start, no clock): its wall and CPU
  seconds are the time to optimum when its status is ``optimal``.

``--busy`` keeps one other core busy (a ``while True: pass`` process) during the whole run, the
"busy machine" of issue #15. Times are also given as ratios to a baseline measured in the same
run: validating an MNL-step migration list (random valid moves) step by step through the model
on a fresh copy (median of 50). HiGHS's MIP search runs on one thread: CPU ≈ wall when a core
is free for it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import numpy as np
from bench_resched import median_time, random_moves  # the same baseline as bench_resched

from dcsim.reschedulers.builtin import MIP, AlphaVBPP, Greedy
from dcsim.vm.mapping_io import parse_mapping
from dcsim.vm.synthetic import synthetic_preset


def timed(algo, state, mnl):
    c0 = time.process_time()
    r = algo.run(state, mnl)
    return r, time.process_time() - c0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="production")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--mnl", default="10,20,30,40,50")
    ap.add_argument("--old-limit", type=float, default=5.0)
    ap.add_argument("--busy", action="store_true", help="keep one other core busy meanwhile")
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    mnls = [int(m) for m in args.mnl.split(",")]
    busy = (subprocess.Popen([sys.executable, "-c", "while True: pass"])
            if args.busy else None)
    try:
        run(args, seeds, mnls)
    finally:
        if busy is not None:
            busy.terminate()
            busy.wait()


def run(args, seeds: list[int], mnls: list[int]) -> None:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{os.cpu_count()} cores, load average {load:.2f} at start; "
          f"{'one busy-loop process beside' if args.busy else 'no busy-loop process'}")
    new = MIP()
    rows = []
    for seed in seeds:
        state = parse_mapping(synthetic_preset(args.preset, seed)).state
        old = MIP(MIP.parse_options({"time_limit": args.old_limit, "node_limit": None,
                                     "warm_start": False}))
        moves = random_moves(state, max(mnls), np.random.default_rng(seed))
        t_base = median_time(lambda s=state, m=moves: s.copy().apply_all(m), 50)
        print(f"\n{args.preset} seed {seed}: {state.n_hosts} hosts, {state.n_vms} VMs, "
              f"FR before {state.fragment_rate():.4f}; baseline (validating {len(moves)} "
              f"moves) {t_base * 1e3:.2f} ms")
        header = (f"{'MNL':>4} {'greedy':>7} {'alpha':>7} | {'old FR':>7} {'old s':>6} "
                  f"{'old status':<11} | {'new FR':>7} {'bound':>7} {'status':<8} "
                  f"{'source':<10} {'wall s':>6} {'cpu s':>6} {'x base':>7} {'nodes':>5}")
        print(header)
        print("-" * len(header))
        for mnl in mnls:
            g = Greedy().run(state, mnl)
            a = AlphaVBPP().run(state, mnl)
            o, _ = timed(old, state, mnl)
            n, cpu = timed(new, state, mnl)
            bound = f"{n.bound:.4f}" if n.bound is not None else "-"
            print(f"{mnl:>4} {g.fr_after:>7.4f} {a.fr_after:>7.4f} | {o.fr_after:>7.4f} "
                  f"{o.seconds:>6.2f} {o.status:<11} | {n.fr_after:>7.4f} {bound:>7} "
                  f"{n.status:<8} {n.info['source']:<10} {n.seconds:>6.2f} {cpu:>6.2f} "
                  f"{n.seconds / t_base:>7.0f} {n.info['nodes']:>5}", flush=True)
            rows.append((o, n, cpu, min(g.fr_after, a.fr_after)))
    walls = [n.seconds for _, n, _, _ in rows]
    cpus = [c for _, _, c, _ in rows]
    optimal = sum(n.status.startswith("optimal") for _, n, _, _ in rows)
    old_opt = sum(o.status.startswith("optimal") for o, _, _, _ in rows)
    worse = sum(o.fr_after > h + 1e-12 for o, _, _, h in rows)
    print(f"\nnew: {optimal}/{len(rows)} proven optimal; wall s mean {np.mean(walls):.2f} "
          f"max {max(walls):.2f}, {sum(w <= 5 for w in walls)}/{len(rows)} within 5 s; "
          f"cpu s mean {np.mean(cpus):.2f} max {max(cpus):.2f}")
    print(f"old: {old_opt}/{len(rows)} proven optimal within {args.old_limit:g} s; "
          f"{worse}/{len(rows)} worse than the better heuristic")


if __name__ == "__main__":
    main()
