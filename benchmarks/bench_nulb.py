"""NULB's decision cost at 10k, 20k and 40k servers and its growth exponent (issue #37).

    python benchmarks/bench_nulb.py [--requests 200] [--repeat 3] [--authors] [--seed 0]

Runs NULB (dcsim's options, or with ``--authors`` the ones experiments/nara_table1.yaml
gives it) on the uniform request set of ``benchmarks/bench_nara.py`` under ``capacity:
wait``, on Fabrics of 10,240, 20,480 and 40,960 servers (δ with 64, 128 and 256 racks per
pod), ``--requests`` requests each. Per cell it times the allocator's ``allocate`` calls
(CPU time of the process, ``time.process_time``, which a busy machine disturbs less than
wall time; and the engine's wall-clock ``mean_decision_s``) and fits cost ∝ servers^e by
least squares on log-log axes. Each cell builds its topology afresh (a run's one-off costs
inside decisions count, as in a real run). Each round runs every size; the table shows the minimum
over rounds per cell, the exponent the fit of those minima, and the median of the
per-round exponents.

The code measured is whatever ``dcsim`` imports: to compare with an older version, run this
script with ``PYTHONPATH`` pointing at that version's checkout (``git archive <commit> |
tar -x -C /tmp/old``), in the same session.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from bench_nara import AUTHORS, WORKLOAD  # noqa: E402

from dcsim.model.topologies import build_topology  # noqa: E402
from dcsim.modes.loss import Engine, EngineConfig
from dcsim.plugins import get_allocator_class  # noqa: E402
from dcsim.workload.spec import build_source  # noqa: E402

SIZES = {"fabric10k": 64, "fabric20k": 128, "fabric40k": 256}  # racks per pod of δ


def cell(racks: int, options: dict, requests: int, seed: int) -> tuple[float, float]:
    """(CPU seconds per decision, the engine's wall seconds per decision) on a topology
    built for the cell (as a run builds it: nothing cached from an earlier cell)."""
    topo = build_topology({"kind": "fabric", "preset": "delta", "racks": racks})
    workload = dict(WORKLOAD, requests=requests,
                    duration=dict(WORKLOAD["duration"], high=30 * topo.n_servers // 40))
    cls = get_allocator_class("nulb")
    alloc = cls(cls.Options(**options))
    eng = Engine(topo, build_source(workload, topo), alloc, np.random.default_rng(seed),
                 EngineConfig(capacity="wait"), sink=lambda kind, cols: None)
    inner = alloc.allocate
    cpu = [0.0, 0]

    def timed(request, view):
        t0 = time.process_time()
        try:
            return inner(request, view)
        finally:
            cpu[0] += time.process_time() - t0
            cpu[1] += 1

    alloc.allocate = timed
    summary = eng.run()
    return cpu[0] / cpu[1], summary["mean_decision_s"]


def exponent(servers: list[int], cost: list[float]) -> float:
    return float(np.polyfit(np.log(servers), np.log(cost), 1)[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--authors", action="store_true",
                    help="nara_table1.yaml's options for nulb (the Nara authors' behaviours)")
    args = ap.parse_args()
    options = AUTHORS["nulb"] if args.authors else {}
    import dcsim

    print(f"nulb {options or '(dcsim defaults)'}, {args.requests} requests per cell, "
          f"dcsim from {Path(dcsim.__file__).parent}")
    topos = SIZES
    servers = [build_topology({"kind": "fabric", "preset": "delta", "racks": r}).n_servers
               for r in SIZES.values()]
    cpu: dict[str, list[float]] = {n: [] for n in topos}
    wall: dict[str, list[float]] = {n: [] for n in topos}
    for _ in range(args.repeat):
        for name, racks in topos.items():
            c, w = cell(racks, options, args.requests, args.seed)
            cpu[name].append(c)
            wall[name].append(w)
    print(f"{'servers':>8}{'cpu ms/decision':>17}{'wall ms/decision':>18}  (min of rounds)")
    for name, n in zip(topos, servers, strict=True):
        print(f"{n:>8}{1e3 * min(cpu[name]):>17.3f}{1e3 * min(wall[name]):>18.3f}")
    for label, d in (("cpu", cpu), ("wall", wall)):
        per_round = [exponent(servers, [d[n][r] for n in topos]) for r in range(args.repeat)]
        print(f"exponent ({label}): {exponent(servers, [min(d[n]) for n in topos]):.2f} from the"
              f" minima; per round median {statistics.median(per_round):.2f}"
              f" (min {min(per_round):.2f}, max {max(per_round):.2f})")


if __name__ == "__main__":
    main()
