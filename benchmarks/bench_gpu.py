"""Speed of ``mode: gpu`` (FGD, ATC'23): one experiment (trace, policy, seed) per policy on
the full default trace, and FGD against two baselines measured in the same run on the same
pods:

* ``fgd(cache=false)`` — dcsim's FGD computing every feasible node's score for every pod
  (numpy, no per-class cache);
* ``reference`` — the authors' algorithm as their Go code runs it, in plain Python: for
  each pod, each feasible node and each device that fits, the node's fragmentation before
  and after summed over the typical pods one by one (``fgd_score.go``, ``frag.go``), the
  integer score, ties to the first node of the seeded node order. It must make the same
  choices as dcsim's FGD; the script checks every pod's node and devices.

    python benchmarks/bench_gpu.py [--nodes 150] [--pods 1500] [--repeat 3]

The per-policy table is the full trace, with FGD also timed without its cache. The
comparison with the reference runs on the first ``--nodes`` nodes of the GPU node list and
the first ``--pods`` pods of the default pod list, inflated to 130 %, so that the
reference finishes;
each round times the three back to back and the script prints the median of the ratios.
The full trace is 1,213 nodes and 8,152 pods inflated to about 10,800.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dcsim.modes.gpu.engine import run_gpu  # noqa: E402
from dcsim.plugins import get_plugin_class  # noqa: E402
from tests.helpers.fgd_reference import Reference  # noqa: E402

TRACE = ROOT / "traces" / "alibaba_gpu_2023_openb"
POLICIES = ["random", "dot_product", "gpu_clustering", "gpu_packing", "best_fit", "fgd"]


def section(nodes: int | None = None, pods: int | None = None) -> dict:
    return {"nodes": {"path": str(TRACE / "openb_node_list_gpu_node.csv"), "limit": nodes},
            "pods": {"path": str(TRACE / "openb_pod_list_default.csv"), "limit": pods},
            "order": "shuffle", "inflate": {"target": 1.3}}


def allocator(name: str, seed: int, **options):
    cls = get_plugin_class(name, "gpu_allocator")
    return cls(cls.parse_options(options), rng=np.random.default_rng(seed))


def timed(alloc, spec, seed=42, keep: dict | None = None):
    """Seconds and summary of one run; ``keep`` receives the pods' nodes and devices."""
    def sink(table, cols):
        if keep is not None and table == "pods":
            keep["choices"] = list(zip(cols["node"], map(tuple, cols["devices"]),
                                       strict=True))
    t0 = time.perf_counter()
    out = run_gpu(spec, alloc, np.random.default_rng(seed), sink if keep is not None else None)
    return time.perf_counter() - t0, out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=150)
    ap.add_argument("--pods", type=int, default=1500)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-full", action="store_true", help="leave out the full-trace table")
    a = ap.parse_args(argv)

    if not a.skip_full:
        print("one experiment (default trace, seed 42, pods shuffled and inflated to 130 %):")
        print(f"{'policy':<16}{'pods':>8}{'seconds':>10}{'ms/pod':>9}{'alloc %':>9}")
        for p in POLICIES:
            sec, out = timed(allocator(p, 7), section())
            print(f"{p:<16}{out['received']:>8}{sec:>10.2f}{1e3 * sec / out['received']:>9.3f}"
                  f"{100 * out['alloc_gpu_share']:>9.2f}")
            if p == "fgd":
                fgd_sec, fgd_out = sec, out
        sec, out = timed(allocator("fgd", 7, cache=False), section())
        print(f"{'fgd(cache=false)':<16}{out['received']:>8}{sec:>10.2f}"
              f"{1e3 * sec / out['received']:>9.3f}{100 * out['alloc_gpu_share']:>9.2f}")
        print(f"the per-class score cache: {sec / fgd_sec:.1f}x on the full trace (same "
              f"allocation: {out['alloc_gpu_share'] == fgd_out['alloc_gpu_share']})")
        print()

    spec = section(a.nodes, a.pods)
    ratios_nocache, ratios_ref = [], []
    for r in range(a.repeat):
        got, got_nc, got_ref = {}, {}, {}
        t_fgd, out = timed(allocator("fgd", 7), spec, keep=got)
        t_nc, out_nc = timed(allocator("fgd", 7, cache=False), spec, keep=got_nc)
        ref = Reference(allocator("fgd", 7))
        t_ref, out_ref = timed(ref, spec, keep=got_ref)
        # every pod's node and devices, not only the totals
        same = got["choices"] == got_nc["choices"] == got_ref["choices"]
        print(f"round {r + 1}: fgd {t_fgd:.2f} s, fgd(cache=false) {t_nc:.2f} s, reference "
              f"{t_ref:.2f} s ({out['received']} pods on {a.nodes} nodes; every pod on the "
              f"same node and devices: {same})")
        if not same:
            print("the reference and dcsim's FGD disagree", file=sys.stderr)
            return 1
        ratios_nocache.append(t_nc / t_fgd)
        ratios_ref.append(t_ref / t_fgd)
    print(f"fgd is {statistics.median(ratios_nocache):.1f}x faster than fgd(cache=false) "
          f"and {statistics.median(ratios_ref):.0f}x faster than the reference (median of "
          f"{a.repeat} rounds)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
