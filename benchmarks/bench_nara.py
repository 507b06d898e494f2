"""Decisions per second of the Nara baselines as the Fabric topology grows (issue #4).

    python benchmarks/bench_nara.py [--requests 200] [--allocators tetris,nulb]
                                    [--topologies alpha,gamma] [--seed 0] [--authors]
                                    [--plot docs/img/nara_scaling.png]

Runs the uniform request set of experiments/nara_table1.yaml (one arrival per tick, cpu and
mem ~ U{1..50}, bw ~ U(0.1, 1.0), holding ~ U{1..H} with H = 30 x servers / 40, as the
paper's 30 / 480 / 1920) under ``capacity: wait`` on alpha (40 servers), gamma (640), delta
(2,560), a ~10k-server Fabric (delta with 64 racks per pod: 10,240 servers) and a
40,960-server one (256 racks per pod). Each cell is
one episode of ``--requests`` requests (default: the paper's episodes, 128 on alpha, 896 on
gamma, 2,048 on delta, 1,024 on fabric10k and 512 on fabric40k; under a minute in all since
issue #19's rack index), timed by the
engine (``mean_decision_s``: the allocator's own time per request). Prints decisions/s per
allocator and topology, then each cell's cost relative to the baseline cell
measured in the same run (random_multi on alpha, or the first cell), so that growth with size
is visible: a ratio of 64 means a decision costs 64 times the baseline's. With ``--authors``
each allocator also runs with the options nara_table1.yaml gives it (the Nara authors'
behaviours: ``<name>+authors`` rows), so the cost of reproducing them is measured beside
dcsim's defaults. With ``--plot PATH`` the cost per decision against servers is drawn on
log-log axes (PNG, and SVG beside it), and the growth exponent between the two largest
topologies is printed per allocator (cost ∝ servers^exponent; issue #19 asks for < 0.3).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import yaml

from dcsim.model.topologies import build_topology
from dcsim.modes.loss import Engine, EngineConfig
from dcsim.plugins import get_allocator_class
from dcsim.workload.spec import build_source

EXPERIMENT = Path(__file__).parents[1] / "experiments" / "nara_table1.yaml"
_EXPERIMENT = yaml.safe_load(EXPERIMENT.read_text())
WORKLOAD = _EXPERIMENT["workload"]  # the uniform set, alpha
#: allocator name -> the options nara_table1.yaml runs it with (the authors' behaviours)
AUTHORS = {a["name"]: a.get("options", {}) for a in _EXPERIMENT["allocators"]
           if isinstance(a, dict)}
ALLOCATORS = ("random_multi", "tetris", "best_fit_multi", "nulb", "nalb")
#: topology name -> fabric builder parameters
TOPOLOGIES = {
    "alpha": {"kind": "fabric", "preset": "alpha"},
    "gamma": {"kind": "fabric", "preset": "gamma"},
    "delta": {"kind": "fabric", "preset": "delta"},
    "fabric10k": {"kind": "fabric", "preset": "delta", "racks": 64},
    "fabric40k": {"kind": "fabric", "preset": "delta", "racks": 256},
}
#: default requests per episode: the paper's episode lengths (fabric10k/40k: shortened)
EPISODE = {"alpha": 128, "gamma": 896, "delta": 2048, "fabric10k": 1024, "fabric40k": 512}


def cell(topo_spec: dict, allocator: str, requests: int, seed: int,
         options: dict | None = None) -> tuple[float, float]:
    """(decisions/s of the allocator alone, wall seconds of the whole episode)."""
    topo = build_topology(topo_spec)
    workload = dict(WORKLOAD, requests=requests,
                    duration=dict(WORKLOAD["duration"], high=30 * topo.n_servers // 40))
    source = build_source(workload, topo)
    rng = np.random.default_rng(seed)
    cls = get_allocator_class(allocator)
    eng = Engine(topo, source, cls(cls.Options(**(options or {}))), rng,
                 EngineConfig(capacity="wait"), sink=lambda kind, cols: None)
    t0 = time.perf_counter()
    summary = eng.run()
    wall = time.perf_counter() - t0
    return 1.0 / summary["mean_decision_s"], wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=None,
                    help="requests per episode (default: 128 / 896 / 2048 / 1024)")
    ap.add_argument("--allocators", default=",".join(ALLOCATORS))
    ap.add_argument("--topologies", default=",".join(TOPOLOGIES))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--authors", action="store_true",
                    help="also run each allocator with nara_table1.yaml's options")
    ap.add_argument("--plot", type=Path, default=None,
                    help="draw cost per decision against servers (log-log) to this PNG")
    args = ap.parse_args()
    allocators = [a for a in args.allocators.split(",") if a]
    topologies = [t for t in args.topologies.split(",") if t]
    for t in topologies:
        if t not in TOPOLOGIES:
            ap.error(f"--topologies: unknown {t!r} (one of {', '.join(TOPOLOGIES)})")
    for a in allocators:
        get_allocator_class(a)  # fail early on a typo
    variants = [(a, a, None) for a in allocators]
    if args.authors:
        variants += [(f"{a}+authors", a, AUTHORS[a]) for a in allocators if a in AUTHORS]
    rate: dict[tuple[str, str], float] = {}
    servers: dict[str, int] = {}
    print(f"{'allocator':<22}{'topology':<11}{'servers':>8}{'requests':>9}"
          f"{'decisions/s':>13}{'wall s':>8}")
    for t in topologies:
        n_servers = servers[t] = build_topology(TOPOLOGIES[t]).n_servers
        n = args.requests or EPISODE[t]
        for label, a, opts in variants:
            rate[label, t], wall = cell(TOPOLOGIES[t], a, n, args.seed, opts)
            print(f"{label:<22}{t:<11}{n_servers:>8}{n:>9}{rate[label, t]:>13,.0f}"
                  f"{wall:>8.1f}", flush=True)
    base = ("random_multi", "alpha") if ("random_multi", "alpha") in rate else next(iter(rate))
    print(f"\ncost per decision relative to {base[0]} on {base[1]} (same run):")
    print(f"{'allocator':<22}" + "".join(f"{t:>11}" for t in topologies))
    for label, _, _ in variants:
        print(f"{label:<22}" + "".join(f"{rate[base] / rate[label, t]:>11.1f}"
                                       for t in topologies))
    if len(topologies) >= 2:
        a, b = sorted(topologies, key=servers.get)[-2:]
        print(f"\ngrowth exponent of the cost per decision, {a} -> {b} "
              f"({servers[a]:,} -> {servers[b]:,} servers):")
        for label, _, _ in variants:
            e = np.log(rate[label, a] / rate[label, b]) / np.log(servers[b] / servers[a])
            print(f"{label:<22}{e:>6.2f}")
    if args.plot:
        plot(rate, servers, [v[0] for v in variants], topologies, args.plot)
        print(f"wrote {args.plot} (and .svg)")


def plot(rate, servers, labels, topologies, png: Path) -> None:
    """Cost per decision (µs) against servers, log-log, a line per allocator."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dcsim.report.figures import _legend, _style

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    ts = sorted(topologies, key=servers.get)
    for i, label in enumerate(labels):
        ax.plot([servers[t] for t in ts], [1e6 / rate[label, t] for t in ts], label=label,
                **_style(i))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("servers (Fabric)")
    ax.set_ylabel("cost per decision (µs, allocator only)")
    ax.set_title("Nara baselines: decision cost against cluster size", fontsize=10)
    _legend(ax)
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, bbox_inches="tight")
    fig.savefig(png.with_suffix(".svg"), bbox_inches="tight")
    plt.close(fig)


if __name__ == "__main__":
    main()
