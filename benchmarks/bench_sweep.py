"""Wall time of a 40-run sweep: serially, on a local pool, and on a 2-worker Dask cluster.

    python benchmarks/bench_sweep.py [--requests 40000] [--workers 2] [--repeat 1]

The sweep is the quickstart (64-host fat-tree, 90 % offered load) with four allocators x 10
seeds = 40 runs and ``--requests`` requests per run (40 000: about 1 s per run on one core,
so that the sweep, not Python's start-up, is what is timed). Each variant is the
whole ``dcsim run`` command in a fresh process, timed from start to exit (Python start-up,
planning, the runs, the summary; for ``--executor dask`` also starting and stopping the local
cluster), into a fresh output folder:

- ``serial``:                         ``dcsim run ... ``
- ``--jobs N``:                       ``dcsim run ... --jobs N``
- ``--executor dask --jobs N``:       starts its own N-worker LocalCluster
- ``--address`` (cluster up):         a LocalCluster of N workers (spawned, Dask's default,
                                      with the settings of docs/howto/cluster-sweeps.md)
                                      started beforehand and warmed by importing what a run
                                      needs on every worker, so neither is counted: the
                                      steady state of a cluster that is already running; its
                                      workers send the files back to ``dcsim run``

and prints each variant's best and median wall time over ``--repeat`` rounds (the variants
take turns, so slow spells of the machine hit them alike) with its speed-up over serial, the
median over rounds of serial/variant within one round (the steadiest of the three where the
machine's speed drifts), and
this machine's ceiling: how much faster N copies of a pure-Python loop finish side by side
than one after the other (N on free, equal cores; less on a shared or throttled machine).
Every variant's summary is checked against the serial one (same rows but for the wall-clock
columns). The goal (issue #8) is >= 1.7x on 2 cores for ``--jobs 2`` and the 2-worker
cluster. Run it on a quiet machine: other processes on the cores show up as lost speed-up.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

EXPERIMENT = Path(__file__).parents[1] / "experiments" / "quickstart.yaml"
VOLATILE = ["wall_time_s", "mean_decision_s"]


def sweep_args(requests: int) -> list[str]:
    return [str(EXPERIMENT), "--seeds", "10",
            "--set", "allocators=[random, first_fit, best_fit, {name: best_fit, "
                     "options: {score: max}}]",
            "--set", f"workload.requests={requests}"]


def _spin(n: int = 20_000_000) -> float:
    t0 = time.perf_counter()
    x = 0
    for i in range(n):
        x += i
    return time.perf_counter() - t0


def parallel_ceiling(n: int) -> float:
    """How much faster n CPU-bound processes finish side by side than one after the other
    (n on perfectly free, equal cores)."""
    from concurrent.futures import ProcessPoolExecutor

    ratios = []
    with ProcessPoolExecutor(n) as pool:
        list(pool.map(_spin, [1000] * n))  # start the workers
        for _ in range(3):
            t0 = time.perf_counter()
            list(pool.map(_spin, [20_000_000]))
            one = time.perf_counter() - t0
            t0 = time.perf_counter()
            list(pool.map(_spin, [20_000_000] * n))
            ratios.append(n * one / (time.perf_counter() - t0))
    return statistics.median(ratios)


def _warm_up() -> None:
    """On a worker: import what a run needs (dcsim, its plugins, the engine, Arrow)."""
    import dcsim.results.writer  # noqa: F401
    import dcsim.sim  # noqa: F401
    import dcsim.workload.spec  # noqa: F401
    from dcsim.plugins import get_plugin_manager
    from dcsim.runner.execute import execute_run  # noqa: F401

    get_plugin_manager()


def timed_run(args: list[str], out: Path) -> float:
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "dcsim", "run", *args, "--out", str(out)],
                       capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"dcsim run {' '.join(args)} failed:\n{p.stdout}{p.stderr}")
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=40000, help="requests per run")
    ap.add_argument("--workers", type=int, default=2, help="pool processes / Dask workers")
    ap.add_argument("--repeat", type=int, default=1, help="take the best of this many")
    args = ap.parse_args()
    base = sweep_args(args.requests)
    n = args.workers

    import dask
    from distributed import Client, LocalCluster

    from dcsim.runner.dask_executor import LOCAL_CLUSTER_CONFIG

    # a cluster started by hand with the settings the how-to recommends; spawned workers
    CLUSTER_CONFIG = {k: v for k, v in LOCAL_CLUSTER_CONFIG.items()
                      if k != "distributed.worker.multiprocessing-method"}


    variants = [
        ("serial", []),
        (f"--jobs {n}", ["--jobs", str(n)]),
        (f"--executor dask --jobs {n}", ["--executor", "dask", "--jobs", str(n)]),
        (f"--address (cluster of {n} up, warm)", None),
    ]
    times: dict[str, list[float]] = {name: [] for name, _ in variants}
    ceiling_before = parallel_ceiling(n)
    with tempfile.TemporaryDirectory(prefix="bench_sweep-") as tmp:
        tmp = Path(tmp)
        for rep in range(args.repeat):
            for name, extra in variants:
                out = tmp / f"{rep}-{len(times[name])}-{name.split()[0].strip('-')}"
                if extra is None:  # cluster started beforehand: its start-up is not timed
                    with dask.config.set(CLUSTER_CONFIG), \
                            LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                         dashboard_address=None,
                                         silence_logs=logging.ERROR) as cluster, \
                            Client(cluster) as client:
                        client.run(_warm_up)  # as a cluster that has run dcsim before
                        wall = timed_run(base + ["--address", cluster.scheduler_address], out)
                else:
                    wall = timed_run(base + extra, out)
                times[name].append(wall)
                summary = pd.read_parquet(out / "summary.parquet").drop(columns=VOLATILE)
                if name == "serial":
                    reference = summary
                else:
                    pd.testing.assert_frame_equal(reference, summary)
                print(f"  {name}: {wall:.1f} s", file=sys.stderr, flush=True)
    runs = len(reference)
    ceiling_after = parallel_ceiling(n)
    best = {k: min(v) for k, v in times.items()}
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{runs}-run sweep ({args.requests} requests per run), {os.cpu_count()} cores, "
          f"{args.repeat} repeat(s), variants interleaved")
    print(f"this machine's ceiling: {n} copies of a pure-Python loop side by side finish "
          f"{ceiling_before:.2f}x (before) / {ceiling_after:.2f}x (after) faster than one "
          "after the other")
    # the machine's speed drifts between rounds; a round's variants ran back to back, so the
    # ratio within a round is the steadier estimate
    paired = {k: statistics.median(s / v for s, v in zip(times["serial"], times[k], strict=True))
              for k in times}
    print("| variant | best wall s | speed-up (best) | median wall s | speed-up (median) "
          "| speed-up (median of rounds) |\n|---|---:|---:|---:|---:|---:|")
    for name, _ in variants:
        print(f"| {name} | {best[name]:.1f} | {best['serial'] / best[name]:.2f}x | "
              f"{med[name]:.1f} | {med['serial'] / med[name]:.2f}x | {paired[name]:.2f}x |")


if __name__ == "__main__":
    main()
