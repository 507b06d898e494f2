"""k-shortest paths by rack pair against the per-server-pair cache it replaced (issue #37).

    python benchmarks/bench_paths.py [--topology delta] [--allocator tetris] [--requests 2048]
                                     [--repeat 3] [--seed 0] [--dcsim-options]

Runs one Nara table episode (the uniform request set of experiments/nara_table1.yaml under
``capacity: wait``, as ``benchmarks/bench_nara.py`` does; by default Tetris with the options
the table gives it, the Nara authors' behaviours, on δ with the paper's 2,048 requests) twice
per round: with ``PathService``'s rack-pair cache (the default) and with the per-server-pair
cache of before (``PathService._by_rack = False``, kept for this measurement only). Rounds
alternate the order, so machine noise hits both alike. Prints per mode the ``k_paths``
calls, the cache lookups and their hit rate (the per-pair cache also looks up two servers
of one rack, which the rack-pair one answers without the cache; neither searches for them),
the k-shortest searches run and their share of the calls, the time inside ``k_paths`` and
its share of the episode, and the episode's wall time; then the min and median over
rounds of the old/new ratios. Both modes must give the same request rows (checked every round).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from bench_nara import AUTHORS, TOPOLOGIES, WORKLOAD  # noqa: E402

from dcsim.model.topologies import build_topology  # noqa: E402
from dcsim.modes.loss import Engine, EngineConfig
from dcsim.plugins import get_allocator_class  # noqa: E402
from dcsim.workload.spec import build_source  # noqa: E402

#: request columns that depend on the machine's speed, not on the decisions
_TIMING = ("decision_s",)


def _plain(v):
    """A record column as plain lists (NaN as None, so that equal rows compare equal)."""
    if isinstance(v, np.ndarray):
        v = v.tolist()
    return [_plain(x) if isinstance(x, (np.ndarray, list, tuple))
            else None if isinstance(x, float) and x != x else x for x in v]


def episode(topo_name: str, allocator: str, options: dict, requests: int, seed: int,
            by_rack: bool) -> dict:
    """One episode; its wall time, k_paths time, cache counters and request rows."""
    topo = build_topology(TOPOLOGIES[topo_name])
    workload = dict(WORKLOAD, requests=requests,
                    duration=dict(WORKLOAD["duration"], high=30 * topo.n_servers // 40))
    cls = get_allocator_class(allocator)
    rows: list = []

    def sink(kind, cols):
        if kind == "requests":
            rows.append({k: _plain(v) for k, v in cols.items() if k not in _TIMING})

    eng = Engine(topo, build_source(workload, topo), cls(cls.Options(**options)),
                 np.random.default_rng(seed), EngineConfig(capacity="wait"), sink=sink)
    eng.allocator.setup(eng.view)  # run() sets it up again: the same PathService
    ps = eng.allocator.path_service
    ps._by_rack = by_rack
    ps.cache_clear()
    inner = ps.k_paths
    spent = [0.0]
    n_calls = [0]

    def timed(a, b, k=3):
        n_calls[0] += 1
        t0 = time.perf_counter()
        try:
            return inner(a, b, k)
        finally:
            spent[0] += time.perf_counter() - t0

    ps.k_paths = timed
    t0 = time.perf_counter()
    eng.run()
    wall = time.perf_counter() - t0
    info = ps.cache_info()
    calls = info["hits"] + info["misses"]
    return {"wall": wall, "paths": spent[0], "hit_rate": info["hits"] / calls if calls else 0,
            "searches": info["searches"], "lookups": calls, "calls": n_calls[0], "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topology", default="delta", choices=sorted(TOPOLOGIES))
    ap.add_argument("--allocator", default="tetris")
    ap.add_argument("--requests", type=int, default=2048)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dcsim-options", action="store_true",
                    help="the allocator's default options instead of nara_table1.yaml's")
    args = ap.parse_args()
    options = {} if args.dcsim_options else AUTHORS.get(args.allocator, {})
    print(f"{args.allocator} {options or '(defaults)'} on {args.topology}, "
          f"{args.requests} requests, {args.repeat} rounds")
    print(f"{'round':>5} {'cache':<9}{'calls':>7}{'lookups':>8}{'hit rate':>9}{'searches':>9}"
          f"{'searched':>9}{'k_paths s':>10}{'share':>7}{'wall s':>8}")
    ratios_wall, ratios_paths = [], []
    for r in range(args.repeat):
        order = (False, True) if r % 2 == 0 else (True, False)
        res = {}
        for by_rack in order:
            res[by_rack] = e = episode(args.topology, args.allocator, options, args.requests,
                                       args.seed, by_rack)
            print(f"{r:>5} {'rack' if by_rack else 'per-pair':<9}{e['calls']:>7}{e['lookups']:>8}"
                  f"{e['hit_rate']:>9.1%}{e['searches']:>9}{e['searches'] / e['calls']:>9.1%}"
                  f"{e['paths']:>10.3f}"
                  f"{e['paths'] / e['wall']:>7.1%}{e['wall']:>8.2f}", flush=True)
        if res[True]["rows"] != res[False]["rows"]:
            raise SystemExit("the two caches gave different request rows")
        ratios_wall.append(res[False]["wall"] / res[True]["wall"])
        ratios_paths.append(res[False]["paths"] / res[True]["paths"])
    print("\nold per-pair cache / rack-pair cache (same run; rows identical):")
    for name, xs in (("episode wall time", ratios_wall), ("time in k_paths", ratios_paths)):
        print(f"  {name:<18} min {min(xs):.2f}x  median {statistics.median(xs):.2f}x")


if __name__ == "__main__":
    main()
