"""Whole-command cost of short dcsim commands (issue #37): CPU seconds and peak memory of
each command as a process, against a baseline process measured in the same run.

- ``dcsim reschedule <279-host production mapping> --algorithm greedy --mnl 50``, against
  ``python -c "import numpy"`` (the floor any numpy program pays);
- the quickstart (``dcsim run experiments/quickstart.yaml``) with the compiled kernels
  allowed (``DCSIM_KERNELS=auto``, the default with the ``fast`` extra) against the same
  run without them (``DCSIM_KERNELS=numpy``): with the extra it should cost no more.

Each command runs ``--repeat`` times, interleaved, so machine noise hits all alike; the
minimum CPU (user + system, from ``os.wait4``) and the largest peak RSS are printed, then
the ratios. Run on an otherwise idle machine::

    python benchmarks/bench_startup.py --repeat 5
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def measure(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(CPU seconds, peak RSS in MiB) of ``cmd`` as one process."""
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    err = proc.stderr.read().decode() if proc.stderr else ""
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{err}")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    dcsim = shutil.which("dcsim") or sys.exit("the dcsim command is not on PATH")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        mapping = tmp / "production.json"
        subprocess.run([sys.executable, "-c",
                        "import json, sys; from dcsim.vm.synthetic import synthetic_preset; "
                        "json.dump(synthetic_preset('production', 0), open(sys.argv[1], 'w'))",
                        str(mapping)], check=True)
        env = dict(os.environ)
        # the kernels compiled (or loaded) once before timing: a first run on a machine
        # compiles them, which is not what this measures
        subprocess.run([dcsim, "run", str(ROOT / "experiments" / "quickstart.yaml"),
                        "--out", str(tmp / "warm"), "--seeds", "1",
                        "--set", "workload.requests=600"], env={**env, "DCSIM_KERNELS": "numba"},
                       check=True, capture_output=True)
        commands = {
            "python -c 'import numpy'": ([sys.executable, "-c", "import numpy"], env),
            "dcsim reschedule (greedy, 279 hosts, MNL 50)": (
                [dcsim, "reschedule", str(mapping), "--algorithm", "greedy", "--mnl", "50"],
                env),
            "quickstart, DCSIM_KERNELS=numpy": (
                [dcsim, "run", str(ROOT / "experiments" / "quickstart.yaml"), "--out",
                 str(tmp / "q_numpy")], {**env, "DCSIM_KERNELS": "numpy"}),
            "quickstart, DCSIM_KERNELS=auto": (
                [dcsim, "run", str(ROOT / "experiments" / "quickstart.yaml"), "--out",
                 str(tmp / "q_auto")], {**env, "DCSIM_KERNELS": "auto"}),
        }
        cpu = {k: [] for k in commands}
        rss = {k: [] for k in commands}
        for _ in range(args.repeat):
            for name, (cmd, e) in commands.items():
                for out in ("q_numpy", "q_auto"):
                    shutil.rmtree(tmp / out, ignore_errors=True)
                c, m = measure(cmd, e, tmp)
                cpu[name].append(c)
                rss[name].append(m)
    best = {k: min(v) for k, v in cpu.items()}
    print(f"{'command':48s} {'CPU s (min)':>12s} {'peak MiB':>9s}")
    for name in commands:
        print(f"{name:48s} {best[name]:12.3f} {max(rss[name]):9.0f}")
    names = list(commands)
    ratios = {
        "reschedule / import numpy (CPU)": best[names[1]] / best[names[0]],
        "quickstart auto / numpy (CPU)": best[names[3]] / best[names[2]],
        "quickstart auto / numpy (peak memory)": max(rss[names[3]]) / max(rss[names[2]]),
    }
    for k, v in ratios.items():
        print(f"{k:48s} {v:12.2f}")
    print(json.dumps({"cpu_s": best, "ratios": ratios}))


if __name__ == "__main__":
    main()
