"""Tables of the Nara baseline reproduction (2021 paper, Tables 1 and 2), from Parquet results.

    python experiments/nara_report.py [--results results] [--figures docs/img]

Reads ``results/nara_table1/summary.parquet`` and prints Markdown tables of mean ± 95 %
Student-t half-width over seeds: Table 1, the acceptance ratio the paper reports (the running
ratio averaged over the last 20 % of requests, ``acceptance_last20``) per request set and
topology; Table 2, the cpu and memory utilisation on topology alpha, twice: as the paper
computes it (``util_cpu_last50`` / ``util_mem_last50``: the utilisation sampled once per
request, averaged over the last 50 % of requests, the authors' ``scripts/plots.py``) and as
dcsim's time average over the episode (``util_cpu`` / ``util_mem``); Table 3, the same
per-request utilisation on beta. If
``results/nara_optical/summary.parquet`` (or ``nara_optical_scaled``) exists, also the
acceptance, cpu and memory utilisation on the nine optical topologies of the 2023 paper
(its Fig. 2), and each baseline's rank per topology. If ``results/nara_learned/summary.parquet``
exists (``dcsim run experiments/nara_learned.yaml``), also Table 1 and 2 with the learned
policy (``nara``, the one trained on each set) beside the baselines.

    python experiments/nara_report.py --ablation

prints what each of the authors' behaviours is worth, from
``results/nara_authors_ablation`` (and ``nara_authors_ablation_gamma``): acceptance per
request set and topology of each variant (rows) and its change from the ``+authors`` row,
and, from ``results/nara_clock_ablation``, what the authors' clock (``departures:
after_first_step``) changes: each baseline under both departure orders and the paired
difference (mean ± 95 % CI over seeds).

    python experiments/nara_report.py --spread

asks, for every Table 1 cell on alpha and beta, whether the paper's value is within dcsim's
seed-to-seed spread, from ``results/nara_seed_spread`` (100 seeds): dcsim's mean and
standard deviation over seeds, the paper's value (``experiments/paper/nara2021_table1.csv``)
and how often the mean of 5 seeds drawn from the 100 (the paper's 5 rollouts) lies at least
as far from dcsim's mean as the paper's value does.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from dcsim.results.stats import ci_cell

ORDER = ["nara_topology", "nara_topology_rules", "nara", "tetris", "tetris_dcsim", "nalb",
         "nulb", "random_multi", "best_fit_multi"]
SETS = ["uniform", "azure", "alibaba"]
PRESETS = ["alpha", "beta", "gamma", "delta"]


def table1(df: pd.DataFrame) -> str:
    cols = [(s, p) for s in SETS for p in PRESETS]
    lines = ["| allocator | " + " | ".join(f"{s} {p}" for s, p in cols) + " |",
             "|---" * (len(cols) + 1) + "|"]
    for a in [x for x in ORDER if x in set(df["allocator"])]:
        cells = [ci_cell(df[(df["allocator"] == a) & (df["workload"] == s) & (df["preset"] == p)]
                      ["acceptance_last20"]) for s, p in cols]
        lines.append(f"| {a} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def table2(df: pd.DataFrame, suffix: str = "_last50", preset: str = "alpha") -> str:
    """cpu and memory utilisation on ``preset`` (the paper's Table 2: alpha, Table 3: beta):
    ``util_{cpu,mem}{suffix}`` ("" = time average)."""
    alpha = df[df["preset"] == preset]
    lines = ["| allocator | " + " | ".join(f"{s} cpu | {s} mem" for s in SETS) + " |",
             "|---" * (2 * len(SETS) + 1) + "|"]
    for a in [x for x in ORDER if x in set(alpha["allocator"])]:
        cells = []
        for s in SETS:
            g = alpha[(alpha["allocator"] == a) & (alpha["workload"] == s)]
            cells += [ci_cell(g[f"util_cpu{suffix}"]), ci_cell(g[f"util_mem{suffix}"])]
        lines.append(f"| {a} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def topology_order(key) -> tuple:
    """Channels ascending, then oversubscription from 1:16 to 1:4 (the paper's order)."""
    channels, ovs = key
    return channels, -int(str(ovs).split(":")[1])


def optical(df: pd.DataFrame, metric: str = "acceptance_last20") -> str:
    by = [c for c in ("channels", "oversubscription") if c in df.columns]
    keys = sorted(df.groupby(by).groups, key=topology_order) if by else []
    lines = ["| allocator | " + " | ".join(" ".join(map(str, np.atleast_1d(k))) for k in keys)
             + " |", "|---" * (len(keys) + 1) + "|"]
    for a in [x for x in ORDER if x in set(df["allocator"])]:
        g = df[df["allocator"] == a].groupby(by)[metric]
        lines.append(f"| {a} | " + " | ".join(ci_cell(g.get_group(k)) for k in keys) + " |")
    return "\n".join(lines)


def ranks(df: pd.DataFrame) -> str:
    """Per topology, each allocator's place by mean acceptance over seeds (the 2023
    paper's claim is that the baselines 'frequently trade places')."""
    means = df.groupby(["channels", "oversubscription", "allocator"])[
        "acceptance_last20"].mean().unstack("allocator")
    order = [a for a in ORDER if a in means.columns]
    means = means.loc[sorted(means.index, key=topology_order)]
    place = means[order].rank(axis=1, ascending=False, method="min").astype(int)
    lines = ["| channels, oversubscription | " + " | ".join(order) + " |",
             "|---" * (len(order) + 1) + "|"]
    for k, row in place.iterrows():
        lines.append(f"| {k[0]} {k[1]} | " + " | ".join(str(row[a]) for a in order) + " |")
    return "\n".join(lines)


def ablation(df: pd.DataFrame) -> str:
    """Acceptance of every variant per (set, topology), and its difference from the
    ``<name>+authors`` row of the same baseline (the authors' behaviours, all of them)."""
    cols = [(s, p) for s in SETS for p in PRESETS
            if ((df["workload"] == s) & (df["preset"] == p)).any()]
    mean = df.groupby(["allocator", "workload", "preset"])["acceptance_last20"].mean()
    lines = ["| variant | " + " | ".join(f"{s} {p}" for s, p in cols) + " |",
             "|---" * (len(cols) + 1) + "|"]
    base_names = [b for b in ORDER if b in {a.split("+")[0] for a in df["allocator"]}]
    for base in base_names:
        variants = sorted((a for a in set(df["allocator"]) if a.split("+")[0] == base),
                          key=lambda a: (a != base, a != f"{base}+authors", a))
        for a in variants:
            cells = []
            for s, p in cols:
                g = df[(df["allocator"] == a) & (df["workload"] == s) & (df["preset"] == p)]
                cell = ci_cell(g["acceptance_last20"])
                ref = mean.get((f"{base}+authors", s, p))
                if a != f"{base}+authors" and ref is not None and len(g):
                    cell += f" ({mean[(a, s, p)] - ref:+.2f})"
                cells.append(cell)
            lines.append(f"| {a} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def clock(df: pd.DataFrame) -> str:
    """Per (set, topology) and baseline: acceptance under ``before_arrivals`` and
    ``after_first_step``, and the difference paired by seed."""
    cols = [(s, p) for s in SETS for p in PRESETS
            if ((df["workload"] == s) & (df["preset"] == p)).any()]
    keys = ["allocator", "workload", "preset", "seed"]
    wide = df.pivot_table(index=keys, columns="departures", values="acceptance_last20")
    lines = ["| baseline | " + " | ".join(f"{s} {p}" for s, p in cols) + " |",
             "|---" * (len(cols) + 1) + "|"]
    for a in [x for x in ORDER if x in set(df["allocator"])]:
        cells = []
        for s, p in cols:
            g = wide.xs((a, s, p), level=("allocator", "workload", "preset"))
            before, after = g["before_arrivals"], g["after_first_step"]
            d = ci_cell(after - before)
            cells.append(f"{before.mean():.2f} → {after.mean():.2f} "
                         f"({'' if d.startswith('-') else '+'}{d})")
        lines.append(f"| {a} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


PAPER_TABLE1 = Path(__file__).with_name("paper") / "nara2021_table1.csv"


def spread(df: pd.DataFrame, paper: pd.DataFrame, rollouts: int = 5,
           draws: int = 20_000) -> str:
    """Per Table 1 cell present in ``df``: is the paper's ``rollouts``-rollout mean within
    dcsim's seed-to-seed spread? ``P`` is the share of ``draws`` random sets of ``rollouts``
    distinct seeds whose mean lies at least as far from the mean over all seeds as the
    paper's value (two-sided; a fixed generator, so the table is the same on every run)."""
    rng = np.random.default_rng(0)
    lines = ["| set, topology, baseline | seeds | dcsim mean | sd over seeds | paper | "
             "paper − dcsim | P(5-seed mean that far) |", "|---" * 7 + "|"]
    for row in paper.itertuples(index=False):
        v = df[(df["workload"] == row.set) & (df["preset"] == row.topology)
               & (df["allocator"] == row.allocator)]["acceptance_last20"].to_numpy()
        if v.size < rollouts:
            continue
        idx = np.argsort(rng.random((draws, v.size)), axis=1)[:, :rollouts]
        means = v[idx].mean(axis=1)
        gap = row.paper - v.mean()
        p = float(np.mean(np.abs(means - v.mean()) >= abs(gap) - 1e-12))
        lines.append(f"| {row.set} {row.topology}, {row.allocator} | {v.size} | "
                     f"{v.mean():.3f} | {v.std(ddof=1):.3f} | {row.paper:.2f} | "
                     f"{gap:+.3f} | {'< 0.0001' if p < 1e-4 else f'{p:.4f}'} |")
    return "\n".join(lines)


def table1_figures(df: pd.DataFrame, out: Path) -> list[Path]:
    """Table 1 as a figure: per request set, acceptance per topology, a point per
    baseline with its 95 % interval (:func:`dcsim.report.figures.metric_figure`)."""
    from dcsim.report import describe
    from dcsim.report.figures import metric_figure

    paths = []
    for name, g in df.groupby("workload", sort=False):
        stats = describe(g, "acceptance_last20", ["preset"])
        paths += metric_figure(stats, "acceptance_last20", "acceptance (last 20 %)",
                               "preset", ["preset"], out, stem=f"nara_table1_{name}",
                               xlabel="topology",
                               title=f"Nara 2021 Table 1 with dcsim: the {name} set "
                                     "(mean, 95 % interval over seeds)")
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, default=Path("results"))
    ap.add_argument("--figures", type=Path, default=None,
                    help="draw Table 1 as figures into this folder (e.g. docs/img): "
                         "nara_table1_<set>.png and .svg, one per request set")
    ap.add_argument("--ablation", action="store_true",
                    help="the authors' behaviours one at a time (nara_authors_ablation*)")
    ap.add_argument("--spread", action="store_true",
                    help="the paper's Table 1 cells against dcsim's seed spread "
                         "(nara_seed_spread)")
    args = ap.parse_args()
    if args.spread:
        q = args.results / "nara_seed_spread" / "summary.parquet"
        if not q.exists():
            raise SystemExit(f"no {q}: run `dcsim run experiments/nara_seed_spread.yaml "
                             "--jobs 2` first")
        paper = pd.read_csv(PAPER_TABLE1, comment="#")
        print("\n### Table 1 against dcsim's seed spread (acceptance_last20)\n")
        print(spread(pd.read_parquet(q), paper))
        return
    if args.ablation:
        paths = [args.results / n / "summary.parquet"
                 for n in ("nara_authors_ablation", "nara_authors_ablation_gamma")]
        q = args.results / "nara_clock_ablation" / "summary.parquet"
        if not any(p.exists() for p in [*paths, q]):
            raise SystemExit(f"no {paths[0]}: run `dcsim run "
                             "experiments/nara_authors_ablation.yaml --jobs 2` first")
        if any(p.exists() for p in paths):
            df = pd.concat([pd.read_parquet(p) for p in paths if p.exists()],
                           ignore_index=True)
            print("\n### The authors' behaviours, one at a time: acceptance (change from "
                  "+authors)\n")
            print(ablation(df))
        if q.exists():
            print("\n### The authors' clock: acceptance under departures: before_arrivals "
                  "→ after_first_step (paired difference)\n")
            print(clock(pd.read_parquet(q)))
        return
    tables = {"nara_table1": "", "nara_learned": " with the learned policy (nara: trained "
              "on alpha with each set)"}
    found = {n: args.results / n / "summary.parquet" for n in tables}
    if not any(p.exists() for p in found.values()):
        raise SystemExit(f"no {found['nara_table1']}: run `dcsim run "
                         "experiments/nara_table1.yaml --jobs 2` first")
    for name, what in tables.items():
        if found[name].exists():
            df = pd.read_parquet(found[name])
            print(f"\n### Table 1{what}: acceptance (running ratio over the last 20 % of "
                  "requests)\n")
            print(table1(df))
            if args.figures and name == "nara_table1":
                for p in table1_figures(df, args.figures):
                    print(f"wrote {p}")
            if "util_cpu_last50" in df.columns:
                print(f"\n### Table 2{what}: utilisation on alpha (per-request, last 50 % "
                      "of requests, as the paper)\n")
                print(table2(df))
                print(f"\n### Table 3{what}: utilisation on beta (per-request, last 50 % "
                      "of requests, as the paper)\n")
                print(table2(df, preset="beta"))
            print(f"\n### Table 2{what}: utilisation on alpha (time average over the "
                  "episode)\n")
            print(table2(df, ""))
    for name, title in (("nara_optical", "Optical (2023), 64 servers"),
                        ("nara_optical_scaled", "Optical (2023), scaled to 1024 servers")):
        q = args.results / name / "summary.parquet"
        if not q.exists():
            continue
        df = pd.read_parquet(q)
        presets = df["preset"].unique() if "preset" in df.columns else [None]
        for preset in presets:
            opt = df if preset is None else df[df["preset"] == preset]
            where = title if preset is None else f"{title}, wiring {preset}"
            for metric in ("acceptance_last20", "util_cpu", "util_mem"):
                print(f"\n### {where}: {metric}\n")
                print(optical(opt, metric))
            print(f"\n### {where}: rank of each baseline by acceptance (1 = best)\n")
            print(ranks(opt))


if __name__ == "__main__":
    main()
