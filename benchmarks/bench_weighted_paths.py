"""NALB/NULB's free-capacity weighted k shortest paths: dcsim's search on node indices, in
Python and compiled (numba), against the networkx search it replaced (issue #51 item 1), in
one run.

    python benchmarks/bench_weighted_paths.py [--requests 256] [--repeat 3] [--pairs 400]

Two measurements on the Nara 2023 scaled optical topology (1,024 servers, 16 channels,
1:8, ``experiments/nara_optical_scaled.yaml``):

1. *searches*: ``--pairs`` random server pairs on a partly used network (each link's free
   bandwidth drawn between 0 and its capacity, so the weights tie often and some links are
   full), k = 3, ``path_weight: free`` (the authors') and ``inverse_free``; the same paths
   are asserted for every pair;
2. *episode*: a NALB episode of ``--requests`` requests with the experiment's options and
   workload, once with each search (``dcsim.allocators.multi.step.weighted_k_paths`` swapped
   for the networkx one; ``DCSIM_KERNELS`` choosing dcsim's Python or compiled one); the
   request rows must be equal.

Rounds alternate the order; prints per round each time and its ratio to networkx's, then
the min and median of the ratios. The networkx search is
:mod:`dcsim.allocators.multi.paths_reference`. Needs numba (the ``fast`` extra) for the
compiled search.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import yaml

from dcsim.allocators.multi import step
from dcsim.allocators.multi.paths import link_weight, link_weights, weighted_k_paths
from dcsim.allocators.multi.paths_reference import networkx_k_paths
from dcsim.model.paths import PathService
from dcsim.model.topologies import build_topology
from dcsim.modes.loss import Engine, EngineConfig
from dcsim.plugins import get_allocator_class
from dcsim.workload.spec import build_source

ROOT = Path(__file__).resolve().parents[1]


def searches(ps: PathService, pairs: np.ndarray, free: np.ndarray, fn, kernel: bool
             ) -> tuple[float, list]:
    cap = ps.topology.link_capacity
    out = []
    t0 = time.perf_counter()
    for kind in ("free", "inverse_free"):
        # as the allocator passes them: every link's weight with the kernel, else a function
        w = link_weights(kind, free, cap) if kernel else link_weight(kind, free, cap)
        out.extend([p.tolist() for p in fn(ps, int(a), int(b), 3, w, kernel=kernel)]
                   for a, b in pairs)
    return time.perf_counter() - t0, out


def episode(cfg: dict, requests: int, fn, kernel: bool) -> tuple[float, list]:
    topo = build_topology(cfg["topology"])
    entry = next(a for a in cfg["allocators"] if a["name"] == "nalb")
    cls = get_allocator_class("nalb")
    alloc = cls(cls.parse_options(entry["options"]), rng=np.random.default_rng(1))
    src = build_source({**cfg["workload"], "requests": requests}, topo)
    rows: list = []
    step.weighted_k_paths = fn
    os.environ["DCSIM_KERNELS"] = "numba" if kernel else "numpy"
    try:
        t0 = time.perf_counter()
        eng = Engine(topo, src, alloc, np.random.default_rng(7),
                     EngineConfig(capacity="wait", departures="after_first_step"),
                     sink=lambda table, cols: rows.append((table, {
                         k: v for k, v in cols.items() if k != "decision_s"})))
        eng.run()
        seconds = time.perf_counter() - t0
    finally:
        step.weighted_k_paths = weighted_k_paths
        os.environ.pop("DCSIM_KERNELS")
    return seconds, rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=256)
    ap.add_argument("--pairs", type=int, default=400)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    cfg = yaml.safe_load((ROOT / "experiments" / "nara_optical_scaled.yaml").read_text())
    ps = PathService(build_topology(cfg["topology"]))
    rng = np.random.default_rng(0)
    cap = ps.topology.link_capacity
    free = np.floor(rng.uniform(0, 1, cap.shape) * (cap + 1)).clip(0, cap)
    pairs = rng.integers(0, ps.topology.n_servers, size=(args.pairs, 2))
    variants = [("networkx", networkx_k_paths, False), ("python", weighted_k_paths, False),
                ("compiled", weighted_k_paths, True)]
    searches(ps, pairs[:2], free, weighted_k_paths, True)  # compile first
    ratios: dict[tuple[str, str], list[float]] = {}
    for r in range(args.repeat):
        order = variants if r % 2 == 0 else variants[::-1]
        s = {name: searches(ps, pairs, free, fn, kernel) for name, fn, kernel in order}
        e = {name: episode(cfg, args.requests, fn, kernel) for name, fn, kernel in order}
        for name in ("python", "compiled"):
            assert s[name][1] == s["networkx"][1], f"{name}: the searches found other paths"
            assert _same(e[name][1], e["networkx"][1]), f"{name}: the episode's rows differ"
        line = []
        for what, m in (("searches", s), ("NALB episode", e)):
            parts = []
            for name in ("python", "compiled"):
                ratios.setdefault((what, name), []).append(m["networkx"][0] / m[name][0])
                parts.append(f"{name} {m[name][0]:.3f} s "
                             f"({ratios[what, name][-1]:.2f}x)")
            line.append(f"{what}: networkx {m['networkx'][0]:.3f} s, " + ", ".join(parts))
        print(f"round {r} ({args.pairs} pairs x 2 weights; {args.requests} requests): "
              + "; ".join(line))
    for (what, name), xs in ratios.items():
        print(f"{what}, networkx / dcsim {name}: min {min(xs):.2f}x, "
              f"median {statistics.median(xs):.2f}x")

def _same(a: list, b: list) -> bool:
    if len(a) != len(b):
        return False
    for (ta, ca), (tb, cb) in zip(a, b, strict=True):
        if ta != tb or ca.keys() != cb.keys():
            return False
        for k in ca:
            if repr(list(ca[k])) != repr(list(cb[k])):  # nested lists, NaNs: by their text
                return False
    return True


if __name__ == "__main__":
    sys.exit(main())
