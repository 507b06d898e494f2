"""Slowdown table of the DeepRM load sweep, and the papers' qualitative claims checked.

    python experiments/deeprm_report.py [--results results/deeprm_load_sweep]
                                        [--figures docs/img]

Reads the load sweep's results (:func:`dcsim.report.load`) and prints, per scheduler and
``new_job_rate`` (offered load = 1.845 × rate), the mean slowdown over seeds with its 95 %
Student-t half-width (each seed's value already averages every finished job of its 100 job
sets), then whether each claim holds at each rate: SJF beats Packer; the learned policy
(``deeprm``, when present) is at least as good as SJF at high load (rate ≥ 0.7), judged by
the means and by whether the intervals separate. With ``--figures DIR``, draws Fig. 4
(mean slowdown against offered load, one line per scheduler, 95 % band) as
``DIR/deeprm_fig4.png`` and ``.svg`` (:func:`dcsim.report.figures.metric_figure`; the
``plot`` extra).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from dcsim.queue.jobs import offered_load
from dcsim.report import describe, load
from dcsim.results.stats import ci_cell, mean_ci

ORDER = ["deeprm", "deeprm_greedy", "sjf", "tetris_star", "packer", "fifo", "random"]


def slowdown_table(df: pd.DataFrame) -> str:
    rates = sorted(df["new_job_rate"].unique())
    lines = ["| scheduler | " + " | ".join(f"{r:g}" for r in rates) + " |",
             "|---" * (len(rates) + 1) + "|",
             "| *offered load* | " + " | ".join(f"{offered_load(r):.2f}" for r in rates) + " |"]
    names = [a for a in ORDER if a in set(df["allocator"])]
    names += sorted(set(df["allocator"]) - set(names))
    for a in names:
        g = df[df["allocator"] == a].groupby("new_job_rate")["mean_slowdown"]
        lines.append(f"| {a} | " + " | ".join(
            ci_cell(g.get_group(r)) if r in g.groups else "—" for r in rates) + " |")
    return "\n".join(lines)


def compare(df: pd.DataFrame, better: str, worse: str, rates) -> list[str]:
    """Per rate: mean slowdowns of the two, and whether ``better``'s is lower (or equal
    within the intervals)."""
    out = []
    for r in rates:
        a = mean_ci(df[(df.allocator == better) & (df.new_job_rate == r)]["mean_slowdown"])
        b = mean_ci(df[(df.allocator == worse) & (df.new_job_rate == r)]["mean_slowdown"])
        if a[2] == 0 or b[2] == 0:
            continue
        if a[0] <= b[0]:
            verdict = "holds"
        elif np.isnan(a[1]) or a[0] - a[1] > b[0] + b[1]:
            verdict = "FAILS"
        else:
            verdict = "within noise"
        out.append(f"- rate {r:g}: {better} {a[0]:.2f} vs {worse} {b[0]:.2f}: {verdict}")
    return out


def figure(df: pd.DataFrame, out: Path) -> list[Path]:
    """Fig. 4: mean slowdown against offered load."""
    from dcsim.report.figures import metric_figure
    from dcsim.report.tables import in_order

    df = df.assign(offered_load=df["new_job_rate"].map(offered_load).round(3))
    df = in_order(df, ORDER)
    stats = describe(df, "mean_slowdown", ["offered_load"])
    return metric_figure(stats, "mean_slowdown", "mean job slowdown", "offered_load",
                         ["offered_load"], out, stem="deeprm_fig4",
                         xlabel="offered load (1.845 × new_job_rate)",
                         title="DeepRM Fig. 4 with dcsim (mean, 95 % band over seeds)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, default=Path("results/deeprm_load_sweep"))
    ap.add_argument("--figures", type=Path, default=None,
                    help="draw Fig. 4 into this folder (e.g. docs/img)")
    args = ap.parse_args()
    try:
        df = load(args.results).summary
    except Exception as e:  # noqa: BLE001 - one line for the reader
        raise SystemExit(f"{e}\nrun `dcsim run experiments/deeprm_load_sweep.yaml --jobs 2` "
                         "first") from None
    print("### Mean slowdown (mean ± 95 % CI over seeds)\n")
    print(slowdown_table(df))
    rates = sorted(df["new_job_rate"].unique())
    print("\n### SJF beats Packer\n")
    print("\n".join(compare(df, "sjf", "packer", rates)))
    if "deeprm" in set(df["allocator"]):
        print("\n### The learned policy at least matches SJF at high load\n")
        print("\n".join(compare(df, "deeprm", "sjf", [r for r in rates if r >= 0.7])))
    if args.figures:
        for p in figure(df, args.figures):
            print(f"wrote {p}")


if __name__ == "__main__":
    main()
