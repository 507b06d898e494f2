"""Tables of the Nara baseline reproduction (2021 paper, Tables 1 and 2), from Parquet results.

    python experiments/nara_report.py [--results results]

Reads ``results/nara_table1/summary.parquet`` and prints Markdown tables of mean ± 95 %
Student-t half-width over seeds: Table 1, the acceptance ratio the paper reports (the running
ratio averaged over the last 20 % of requests, ``acceptance_last20``) per request set and
topology; Table 2, the cpu and memory utilisation on topology alpha. If
``results/nara_optical/summary.parquet`` exists, also the acceptance on the nine optical
topologies of the 2023 paper.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from dcsim.results.stats import mean_ci

ORDER = ["tetris", "nalb", "nulb", "random_multi", "best_fit_multi"]
SETS = ["uniform", "azure", "alibaba"]
PRESETS = ["alpha", "beta", "gamma", "delta"]


def cell(values: pd.Series) -> str:
    m, h, n = mean_ci(values)
    if n == 0:
        return "—"
    return f"{m:.2f}" if np.isnan(h) else f"{m:.2f} ± {h:.2f}"


def table1(df: pd.DataFrame) -> str:
    cols = [(s, p) for s in SETS for p in PRESETS]
    lines = ["| allocator | " + " | ".join(f"{s} {p}" for s, p in cols) + " |",
             "|---" * (len(cols) + 1) + "|"]
    for a in [x for x in ORDER if x in set(df["allocator"])]:
        cells = [cell(df[(df["allocator"] == a) & (df["workload"] == s) & (df["preset"] == p)]
                      ["acceptance_last20"]) for s, p in cols]
        lines.append(f"| {a} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def table2(df: pd.DataFrame) -> str:
    alpha = df[df["preset"] == "alpha"]
    lines = ["| allocator | " + " | ".join(f"{s} cpu | {s} mem" for s in SETS) + " |",
             "|---" * (2 * len(SETS) + 1) + "|"]
    for a in [x for x in ORDER if x in set(alpha["allocator"])]:
        cells = []
        for s in SETS:
            g = alpha[(alpha["allocator"] == a) & (alpha["workload"] == s)]
            cells += [cell(g["util_cpu"]), cell(g["util_mem"])]
        lines.append(f"| {a} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def optical(df: pd.DataFrame) -> str:
    by = [c for c in ("channels", "oversubscription") if c in df.columns]
    keys = sorted(df.groupby(by).groups) if by else []
    lines = ["| allocator | " + " | ".join(" ".join(map(str, np.atleast_1d(k))) for k in keys)
             + " |", "|---" * (len(keys) + 1) + "|"]
    for a in [x for x in ORDER if x in set(df["allocator"])]:
        g = df[df["allocator"] == a].groupby(by)["acceptance_last20"]
        lines.append(f"| {a} | " + " | ".join(cell(g.get_group(k)) for k in keys) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, default=Path("results"))
    args = ap.parse_args()
    p = args.results / "nara_table1" / "summary.parquet"
    if not p.exists():
        raise SystemExit(f"no {p}: run `dcsim run experiments/nara_table1.yaml --jobs 2` first")
    df = pd.read_parquet(p)
    print("### Table 1: acceptance (running ratio over the last 20 % of requests)\n")
    print(table1(df))
    print("\n### Table 2: utilisation on alpha\n")
    print(table2(df))
    q = args.results / "nara_optical" / "summary.parquet"
    if q.exists():
        print("\n### Optical (2023): acceptance\n")
        print(optical(pd.read_parquet(q)))


if __name__ == "__main__":
    main()
