"""The learned VMR²L rescheduler's latency on production-like mappings (numpy inference).

    python benchmarks/bench_vmr2l.py [--seed 0] [--mnl 50] [--samples 5] [--hosts 279]
                                     [--checkpoint NAME_OR_PATH] [--dense-steps 5]

Builds a production-like mapping (``synthetic_preset("production")``), then times one
``vmr2l`` plan (``samples`` trajectories of ``mnl`` steps; the shipped sparse-attention
policy unless ``--checkpoint``) and, as baselines measured in the same run, ``greedy`` and
``alpha_vbpp`` at the same MNL. The policy runs three ways: the default (the first of
``samples`` trajectories takes the argmax actions), the authors' (all sampled, with their
action threshold) and ``greedy`` (one argmax trajectory). ``--dense-steps`` also times the
paper's dense attention (random weights: the cost does not depend on the values) for that
many steps and extrapolates to ``mnl`` steps. The paper's budget: a 50-step plan within
5 s; its VMR²L takes 0.15 s per plan on a GPU.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from dcsim.reschedulers.builtin import AlphaVBPP, Greedy
from dcsim.reschedulers.vmr2l import (
    VMR2L,
    Architecture,
    Checkpoint,
    checkpoint_path,
    load_checkpoint,
    rollout,
    weight_shapes,
)
from dcsim.vm.mapping_io import parse_mapping
from dcsim.vm.synthetic import synthetic_preset


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--mnl", type=int, default=50)
    ap.add_argument("--samples", type=int, default=5)
    ap.add_argument("--hosts", type=int, default=279)
    ap.add_argument("--checkpoint", default=None)
    ap.add_argument("--dense-steps", type=int, default=5)
    a = ap.parse_args()
    state = parse_mapping(synthetic_preset("production", a.seed, hosts=a.hosts)).state
    print(f"mapping: {state.n_hosts} hosts, {state.n_vms} VMs, initial FR "
          f"{state.fragment_rate():.4f}; MNL {a.mnl}")
    rows = []
    for cls in (Greedy, AlphaVBPP):
        s, res = timed(lambda c=cls: c().run(state, a.mnl))
        rows.append((cls.name, s, res.fr_after))
    ck = load_checkpoint(checkpoint_path(a.checkpoint))
    for what, opts in (
            (f"{a.samples} samples, argmax first (default)", {}),
            (f"{a.samples} samples, the authors' (all sampled, threshold)",
             {"argmax_first": False, "min_prob_vm": 1e-5, "min_prob_host": 1e-4}),
            ("greedy: argmax only, 1 trajectory", {"greedy": True})):
        r = VMR2L(VMR2L.Options(checkpoint=str(ck.path), samples=a.samples, **opts),
                  rng=np.random.default_rng(a.seed))
        s, res = timed(lambda r=r: r.run(state, a.mnl))
        rows.append((f"vmr2l ({ck.arch.attention}), {what}", s, res.fr_after))
    if a.dense_steps:
        arch = Architecture(attention="dense")
        rng = np.random.default_rng(0)
        w = {k: rng.standard_normal(v).astype(np.float32) * 0.1
             for k, v in weight_shapes(arch).items()}
        s, _ = timed(lambda: rollout(Checkpoint(ck.path, w, arch), state, a.dense_steps,
                                     a.samples, rng))
        rows.append((f"dense attention, {a.samples} samples (extrapolated from "
                     f"{a.dense_steps} steps)", s * a.mnl / a.dense_steps, float("nan")))
    base = rows[0][1]
    print(f"{'rescheduler':72s} {'seconds':>9s} {'x greedy':>9s} {'FR after':>9s}")
    for name, s, fr in rows:
        print(f"{name:72s} {s:9.3f} {s / base:9.1f} {fr:9.4f}")


if __name__ == "__main__":
    main()
