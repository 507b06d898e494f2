"""Tables and Fig. 3a of the AHAB reproduction, made from the Parquet results.

    python experiments/ahab_report.py [--results results] [--png docs/img/ahab_fig3a.png]

Reads ``results/ahab_lambda{4,12,20}/summary.parquet`` (whichever exist) and, if present,
``results/ahab_lookahead`` (Fig. 6a), ``results/ahab_sequences`` (Fig. 6b) and
``results/ahab_host_capacity`` (Fig. 9); prints Markdown tables of mean and 95 %
confidence interval over seeds (Student t) of used-CU fraction, footprint, concurrent VCs
and acceptance; and draws Fig. 3a (used CU against lambda, one line per configuration) to
the PNG (needs matplotlib: ``pip install -e ".[plot]"``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from dcsim.results.stats import mean_ci

ORDER = ["oktopus", "kraken", "vc_tetris", "strawman(kraken)", "ahab(oktopus)",
         "ahab(kraken)", "ahab(vc_tetris)"]
METRICS = {"util_cpu": "used CU", "mean_footprint": "footprint (BU)",
           "mean_concurrent": "concurrent VCs", "acceptance_ratio": "acceptance"}


def load(results: Path) -> pd.DataFrame:
    frames = []
    for lam in (4, 12, 20):
        p = results / f"ahab_lambda{lam}" / "summary.parquet"
        if p.exists():
            frames.append(pd.read_parquet(p).assign(lam=lam))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def table(df: pd.DataFrame, metric: str) -> str:
    lams = sorted(df["lam"].unique())
    head = "| configuration | " + " | ".join(f"λ = {lam}" for lam in lams) + " |"
    lines = [head, "|---" * (len(lams) + 1) + "|"]
    labels = [a for a in ORDER if a in set(df["allocator"])]
    labels += sorted(set(df["allocator"]) - set(labels))
    for label in labels:
        cells = []
        for lam in lams:
            m, h, n = mean_ci(df[(df["allocator"] == label) & (df["lam"] == lam)][metric])
            cells.append("—" if n == 0 else f"{m:.3f} ± {h:.3f} (n={n})" if metric in (
                "util_cpu", "acceptance_ratio") else f"{m:.1f} ± {h:.1f} (n={n})")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def sweep_table(results: Path, name: str, by: list[str], metric: str = "util_cpu") -> str | None:
    """Mean ± 95 % CI of ``metric`` per combination of the ``by`` columns, or None."""
    p = results / name / "summary.parquet"
    if not p.exists():
        return None
    df = pd.read_parquet(p)
    lines = ["| " + " | ".join(by) + " | used CU (mean ± 95 % CI) |", "|---" * (len(by) + 1) + "|"]
    for key, g in df.groupby(by):
        m, h, n = mean_ci(g[metric])
        cells = key if isinstance(key, tuple) else (key,)
        lines.append("| " + " | ".join(str(c) for c in cells) + f" | {m:.3f} ± {h:.3f} (n={n}) |")
    return "\n".join(lines)


#: (results directory, grouping columns, title) of the sweeps beside Fig. 3
SWEEPS = [
    ("ahab_lookahead", ["embed", "lookahead"], "Fig. 6a: used CU against lookahead (20 sequences)"),
    ("ahab_sequences", ["embed", "sequences"], "Fig. 6b: used CU against sequences (lookahead 15)"),
    ("ahab_host_capacity", ["topology_server_cpu", "host_link", "allocator"],
     "Fig. 9: used CU against host capacity"),
]


def plot(df: pd.DataFrame, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    labels = [a for a in ORDER if a in set(df["allocator"])]
    for label in labels:
        pts = [(lam, *mean_ci(df[(df["allocator"] == label) & (df["lam"] == lam)]["util_cpu"])[:2])
               for lam in sorted(df["lam"].unique())]
        pts = [p for p in pts if not np.isnan(p[1])]
        if pts:
            x, y, e = zip(*pts, strict=True)
            ax.errorbar(x, y, yerr=np.nan_to_num(e), marker="o", capsize=3, label=label,
                        linestyle="--" if label.startswith("ahab") else "-")
    ax.set_xlabel("arrival rate λ")
    ax.set_ylabel("fraction of used CUs")
    ax.set_title("AHAB Fig. 3a reproduced with dcsim (mean, 95 % CI over seeds)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(png, dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, default=Path("results"))
    ap.add_argument("--png", type=Path, default=None)
    args = ap.parse_args()
    df = load(args.results)
    if df.empty:
        raise SystemExit(f"no results/ahab_lambda*/summary.parquet under {args.results}")
    for metric, title in METRICS.items():
        print(f"\n### {title}\n")
        print(table(df, metric))
    for name, by, title in SWEEPS:
        t = sweep_table(args.results, name, by)
        if t:
            print(f"\n### {title}\n")
            print(t)
    if args.png:
        plot(df, args.png)
        print(f"\nwrote {args.png}")


if __name__ == "__main__":
    main()
