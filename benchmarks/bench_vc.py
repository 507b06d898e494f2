"""Cost of an AHAB decision against one embedding, measured in the same run (issue #3).

    python benchmarks/bench_vc.py [--decisions 30] [--embedder kraken]
        [--host-link per_vm_strict] [--embed-option zero_bandwidth=most_preferred]

Builds the k = 12 fat-tree, loads it by running the lambda = 12 workload with the embedder
until more than half the compute is used (so AHAB's 50 % shortcut does not apply), then
times, on that state: one embedding of a fresh VC, and one AHAB decision (2 x 20 sequences x
15 lookahead VCs = 600 embeddings of work), with the embedder's compiled lookahead kernel
(numba, the ``fast`` extra; ``dcsim.kernels``) and with the numpy lookahead, the
same decisions, the median of 3 rounds each, after a first decision that loads the kernel.
Prints them, their ratio, and the decision against one embedding; the goal is a
ratio <= 100, i.e. the lookahead costing less than 100 single embeddings. Then one numpy
lookahead step (the embedder's batched call) on 1 and on 40 states: its fixed cost, its
cost per state, and the decision floor (15 steps on one state). Issue #19's goal: one
AHAB(KRAKEN) decision <= 4 ms with the shipped options (--host-link per_vm_strict).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import yaml

from dcsim.allocators.vc.ahab import Ahab
from dcsim.model import ClusterState, Request, StateView
from dcsim.model.topologies import build_topology
from dcsim.plugins import get_allocator_class
from dcsim.workload.facts import WorkloadFacts
from dcsim.workload.spec import build_source

#: the lambda = 12 workload of the shipped experiment, so the benchmark measures what runs
EXPERIMENT = Path(__file__).parents[1] / "experiments" / "ahab_lambda12.yaml"
WORKLOAD = yaml.safe_load(EXPERIMENT.read_text())["workload"]


def loaded_state(embedder, topo, source, rng):
    """Fill the cluster with the embedder's placements until > 60 % of compute is used."""
    state = ClusterState(topo)
    view = StateView(state)
    embedder.setup(view)
    batch = source.draw(rng, WORKLOAD["requests"])
    total = topo.server_capacity[:, 0].sum()
    for i in range(len(batch)):
        attrs = {k: v[i] for k, v in batch.attrs.items()}
        req = Request(i, 0.0, 1.0, batch.demand[i], batch.bandwidth[i], attrs)
        p = embedder.allocate(req, view)
        if p is not None:
            state.reserve(p)
        if state.free[:, 0].sum() < 0.4 * total:
            break
    return state, view, batch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--decisions", type=int, default=30)
    ap.add_argument("--embedder", default="kraken")
    ap.add_argument("--host-link", default="hose",
                    help="the embedders' host_link option (the shipped experiments: "
                    "per_vm_strict)")
    ap.add_argument("--embed-option", action="append", default=[], metavar="KEY=VALUE",
                    help="another option of the embedder, e.g. zero_bandwidth=most_preferred")
    args = ap.parse_args()
    extra = dict(o.split("=", 1) for o in args.embed_option)
    topo = build_topology({"kind": "fat_tree", "preset": "ahab_k12"})
    source = build_source(WORKLOAD, topo)
    rng = np.random.default_rng(7)
    cls = get_allocator_class(args.embedder)
    embedder = cls(cls.parse_options({**extra, "host_link": args.host_link}))
    state, view, batch = loaded_state(embedder, topo, source, rng)
    view.workload = WorkloadFacts.of(source)
    ahab = Ahab(Ahab.parse_options({"embed": args.embedder, "host_link": args.host_link,
                                    "embed_options": extra}), rng=np.random.default_rng(3))
    ahab.setup(view)
    used = 1 - state.free[:, 0].sum() / topo.server_capacity[:, 0].sum()
    probes = source.draw(rng, args.decisions)
    reqs = [Request(i, 0.0, 1.0, probes.demand[i], probes.bandwidth[i],
                    {k: v[i] for k, v in probes.attrs.items()}) for i in range(len(probes))]
    t0 = time.perf_counter()
    for r in reqs:
        embedder.allocate(r, view)
    t_embed = (time.perf_counter() - t0) / len(reqs)
    cpu, lf = view.free[:, 0].copy(), view.link_free.copy()
    t0 = time.perf_counter()
    for r in reqs:
        embedder.embed(cpu, lf, int(r.attrs["N"]), float(r.attrs["S"]), float(r.attrs["B"]))
    t_core = (time.perf_counter() - t0) / len(reqs)
    t0 = time.perf_counter()
    ahab.allocate(reqs[0], view)  # the first decision loads (or compiles) the kernel
    t_first = time.perf_counter() - t0
    compiled = ahab.kernels and ahab.embedder.lookahead_kernel(
        ahab.embedder.lookahead_hints(cpu[None], lf[None], np.ones(1), np.ones(1))) is not None
    t_ahab = {}
    for kernels in ([True, False] if compiled else [False]):  # the same decisions
        ahab.kernels = kernels
        rounds = []
        for _ in range(3):
            ahab.rng = np.random.default_rng(3)
            t0 = time.perf_counter()
            for r in reqs:
                ahab.allocate(r, view)
            rounds.append((time.perf_counter() - t0) / len(reqs))
        t_ahab[kernels] = sorted(rounds)[1]  # the median of 3 rounds
    print(f"k=12 fat-tree, {used:.0%} of compute used; {len(reqs)} probe VCs; "
          f"embedder {embedder.label}")
    print(f"one {args.embedder} embedding : {t_embed * 1e3:8.3f} ms (allocate: embed + "
          f"placement), {t_core * 1e3:.3f} ms (embed only)")
    for kernels, t in t_ahab.items():
        how = ("the compiled lookahead kernel" if kernels else
               "the numpy lookahead" + ("" if compiled else " (no kernel: DCSIM_KERNELS, "
                                        "numba missing, or none for this embedder)"))
        print(f"one ahab({args.embedder}) decision: {t * 1e3:8.3f} ms with {how} "
              "(2 x 20 sequences x 15 VCs = 600 embeddings of work)")
    if compiled:
        print(f"numpy lookahead / compiled kernel: {t_ahab[False] / t_ahab[True]:.2f}; the "
              f"first decision took {t_first * 1e3:.0f} ms (loading or compiling the kernel)")
    t_best = min(t_ahab.values())
    print(f"ratio decision / embedding: {t_best / t_embed:8.1f} against allocate, "
          f"{t_best / t_core:.1f} against embed only  (goal <= 100)")
    floor(ahab, cpu, lf, reqs, t_ahab[False])


def floor(ahab: Ahab, cpu: np.ndarray, lf: np.ndarray, reqs: list, t_ahab: float) -> None:
    """One numpy lookahead step (the embedder's batched call, as AHAB makes it without a
    kernel) on 1 and on 40 copies of the loaded state: the fixed cost per call and the
    cost per state, and the decision floor, a numpy decision's 15 steps if 40 states cost
    what one does (issue #19); ``t_ahab``: the numpy decision."""
    emb = ahab.embedder
    call = getattr(emb, "embed_sparse", None) or emb.embed_batch
    opt = ahab.options
    sizes = np.array([[float(r.attrs["S"]), float(r.attrs["B"])] for r in reqs])
    hints = emb.lookahead_hints(cpu, lf, sizes[:, 0], sizes[:, 1])
    per = {}
    for k in (1, 2 * opt.sequences):
        states = (np.repeat(cpu[None], k, axis=0), np.repeat(lf[None], k, axis=0))
        rounds = []
        for _ in range(3):
            t0 = time.perf_counter()
            for r in reqs:
                n, s, b = (np.full(k, float(r.attrs[a])) for a in ("N", "S", "B"))
                call(*states, n.astype(np.int64), s, b, **hints)
            rounds.append((time.perf_counter() - t0) / len(reqs))
        per[k] = min(rounds)
    k = 2 * opt.sequences
    print(f"one numpy lookahead step: {per[1] * 1e3:.3f} ms on 1 state, "
          f"{per[k] * 1e3:.3f} ms on {k} "
          f"({(per[k] - per[1]) / (k - 1) * 1e6:.1f} us per further state)")
    print(f"numpy decision floor ({opt.lookahead} steps on 1 state): "
          f"{opt.lookahead * per[1] * 1e3:.3f} ms; the decision is "
          f"{t_ahab / (opt.lookahead * per[1]):.1f} x that")


if __name__ == "__main__":
    main()
