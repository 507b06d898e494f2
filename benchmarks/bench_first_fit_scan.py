"""first_fit's scan as the cluster grows: numpy's comparison of every server against the
compiled scan that stops at the first fit (issue #51 item 4), and what loading the scan
costs, in one run.

    python benchmarks/bench_first_fit_scan.py [--servers 40000 80000 160000]
                                              [--requests 1000 5000] [--repeat 3]

On a flat cluster whose servers are 70 % nearly full (a first fit is some way in), each
round times ``--requests`` first_fit decisions with each path (the same choices, checked),
alternating which goes first. Prints per size the best round's microseconds per request of
each, the saving, and ``FirstFitAllocator.saving(servers)`` (the estimate ``DCSIM_KERNELS=
auto`` decides with); then each path's growth exponent from the smallest to the largest
size (the slope of log cost over log servers), and the seconds a fresh process takes to
load the scan from the kernel cache (its first call, minus ``import numpy``): the scan
pays after about that many seconds of savings (``FirstFitAllocator.SCAN_AFTER_S``).
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import time

import numpy as np

from dcsim.allocators.single import FirstFitAllocator
from dcsim.model import ClusterState, Request, StateView
from dcsim.model.topologies import build_topology


def cluster(n: int, seed: int = 0) -> StateView:
    state = ClusterState(build_topology({"kind": "flat", "servers": n,
                                         "server": {"cpu": 16, "mem": 64}}))
    rng = np.random.default_rng(seed)
    state.free[:, 0] = np.where(rng.random(n) < 0.7, rng.integers(0, 2, n), 16).astype(float)
    state.free[:, 1] = 64.0
    return StateView(state)


def per_request(view: StateView, reqs: list[Request], scan: bool) -> tuple[float, list]:
    ff = FirstFitAllocator()
    if scan:
        ff._load_scan(view)
    t0 = time.perf_counter()
    out = [ff.allocate(r, view) for r in reqs]
    return (time.perf_counter() - t0) / len(reqs), out


def load_seconds() -> float:
    """A fresh process's cost of loading the scan (from the kernel cache), less numpy's."""
    def cpu(code: str) -> float:
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        return time.perf_counter() - t0

    load = ("import numpy as np\nfrom dcsim.allocators.single_kernel import first_fit_two\n"
            "a = np.zeros(4)\nfirst_fit_two(a, a, 0.0, 0.0)\n")
    return min(cpu(load) for _ in range(3)) - min(cpu("import numpy") for _ in range(3))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--servers", type=int, nargs="+", default=[40_000, 80_000, 160_000])
    ap.add_argument("--requests", type=int, nargs="+", default=[1000, 5000])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"{'servers':>8} {'requests':>8} {'numpy us':>9} {'scan us':>8} {'saved us':>9} "
          f"{'estimate us':>11}")
    cost: dict[tuple[int, str], float] = {}
    for n_req in args.requests:
        for n in args.servers:
            view = cluster(n)
            rng = np.random.default_rng(1)
            reqs = [Request(i, 0.0, 1.0, np.array([float(rng.integers(1, 5)), 4.0]), 0.0, {})
                    for i in range(n_req)]
            best = {"numpy": math.inf, "scan": math.inf}
            for r in range(args.repeat):
                order = ("numpy", "scan") if r % 2 == 0 else ("scan", "numpy")
                got = {k: per_request(view, reqs, k == "scan") for k in order}
                assert got["numpy"][1] == got["scan"][1], "the scan chose other servers"
                for k in order:
                    best[k] = min(best[k], got[k][0])
            cost[n, f"numpy{n_req}"], cost[n, f"scan{n_req}"] = best["numpy"], best["scan"]
            print(f"{n:>8} {n_req:>8} {best['numpy'] * 1e6:>9.2f} {best['scan'] * 1e6:>8.2f} "
                  f"{(best['numpy'] - best['scan']) * 1e6:>9.2f} "
                  f"{FirstFitAllocator.saving(n) * 1e6:>11.2f}")
    lo, hi = min(args.servers), max(args.servers)
    for n_req in args.requests:
        for k in ("numpy", "scan"):
            slope = (math.log(cost[hi, f"{k}{n_req}"] / cost[lo, f"{k}{n_req}"])
                     / math.log(hi / lo))
            print(f"{k} at {n_req} requests: cost per request grows as servers^{slope:.2f} "
                  f"from {lo:,} to {hi:,}")
    print(f"loading the scan in a fresh process: {load_seconds():.2f} s "
          f"(SCAN_AFTER_S = {FirstFitAllocator.SCAN_AFTER_S})")


if __name__ == "__main__":
    main()
