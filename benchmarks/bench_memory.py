"""Peak memory of `dcsim run` replaying a trace of 100k vs 1M requests (flat = streaming works).

    python benchmarks/bench_memory.py [--sizes 100000 1000000]
    python benchmarks/bench_memory.py --sizes 1000000 5000000   # issue #47: within 5 %

Writes synthetic Parquet traces to a temporary folder, runs each through the CLI in a fresh
process (first_fit on 100 servers) and prints the peak resident set size of each process
and their ratio. With streaming reads, batch-wise records and row-group writes, the ratio
stays near 1 however long the trace; what remains is the interpreter and imports. The
`dcsim` program sets its allocators (dcsim/process_memory.py); set `MALLOC_MMAP_THRESHOLD_`
and `ARROW_DEFAULT_MEMORY_POOL` yourself to measure others.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

CONFIG = """\
name: mem{n}
topology: {{kind: flat, servers: 100, server: {{cpu: 16, mem: 32}}}}
workload:
  trace: {{path: {trace}}}
allocators: [first_fit]
"""


def peak_rss_mb(cmd: list[str]) -> tuple[float, float]:
    """Run ``cmd``; return (its peak RSS in MB, wall seconds)."""
    code = (
        "import resource, subprocess, sys;"
        "r = subprocess.run(sys.argv[1:]);"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss);"
        "sys.exit(r.returncode)"
    )
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code, *cmd], capture_output=True, text=True,
                         check=True)
    return int(out.stdout.strip().splitlines()[-1]) / 1024, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        rows = []
        for n in args.sizes:
            rng = np.random.default_rng(0)
            pd.DataFrame({
                "arrival": np.cumsum(rng.exponential(0.1, n)),
                "duration": rng.exponential(20, n),
                "cpu": rng.integers(1, 5, n).astype(float),
                "mem": rng.integers(1, 9, n).astype(float),
            }).to_parquet(tmp / f"t{n}.parquet")
            cfg = tmp / f"exp{n}.yaml"
            cfg.write_text(CONFIG.format(n=n, trace=tmp / f"t{n}.parquet"))
            mb, wall = peak_rss_mb(["dcsim", "run", str(cfg), "--out", str(tmp / f"out{n}")])
            rows.append((n, mb, wall))
        base = rows[0][1]
        print(f"{'requests':>10} {'peak RSS MB':>12} {'wall s':>8} {'RSS / first':>12}")
        for n, mb, wall in rows:
            print(f"{n:>10,} {mb:>12.0f} {wall:>8.1f} {mb / base:>12.2f}")


if __name__ == "__main__":
    main()
