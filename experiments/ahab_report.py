"""Tables and Fig. 3a of the AHAB reproduction, made from the Parquet results.

    python experiments/ahab_report.py [--results results] [--figures docs/img]

Reads ``results/ahab_lambda{4,12,20}/summary.parquet`` (whichever exist) and, if present,
``results/ahab_lookahead`` (Fig. 6a), ``results/ahab_sequences`` (Fig. 6b) and
``results/ahab_host_capacity`` (Fig. 9); prints Markdown tables of mean and 95 %
confidence interval over seeds (Student t) of used-CU fraction, footprint, concurrent VCs
and acceptance; the acceptance by VC size of Fig. 4 (N in the paper's bins 3-8, 9-14, ...)
and by S/B of Fig. 5 at lambda = 20, with the values the paper's text states beside them;
and, with ``--figures DIR``, draws Fig. 3a/3b/3c (used CU, footprint and concurrent VCs
against lambda, one line per configuration with its 95 % band) as
``DIR/ahab_fig3{a,b,c}.png`` and ``.svg`` (needs matplotlib: ``pip install -e ".[plot]"``).
``--heat-only`` prints just Fig. 4/5 (for ``results/ahab_lambda20`` or ``--heat DIR``).
``--paired`` prints just the paired differences the reproduction quotes (:data:`PAIRED`:
the first configuration's used CU minus the second's, seed by seed, mean ± 95 % CI and the
seeds where the first is ahead), per λ and, where their results exist, per lookahead and
per host capacity.
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
    """The three λ experiments' summaries (:func:`dcsim.report.load`), with a ``lam``
    column."""
    from dcsim.report import load as load_results

    frames = []
    for lam in (4, 12, 20):
        p = results / f"ahab_lambda{lam}"
        if (p / "summary.parquet").exists():
            frames.append(load_results(p).summary.assign(lam=lam))
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


#: the paired differences docs/reproductions.md quotes: (results folder, or None for the λ
#: experiments; the grouping columns; the column naming the configurations; the pairs
#: (first, second), each ``first − second`` per seed)
PAIRED = [
    (None, ["lam"], "allocator",
     [("vc_tetris", "oktopus"), ("vc_tetris", "kraken"), ("vc_tetris", "strawman(kraken)"),
      ("strawman(kraken)", "oktopus"), ("strawman(kraken)", "kraken"),
      ("ahab(vc_tetris)", "ahab(oktopus)"), ("ahab(vc_tetris)", "vc_tetris")]),
    ("ahab_lookahead", ["lookahead"], "embed", [("vc_tetris", "oktopus"), ("vc_tetris", "kraken")]),
    ("ahab_host_capacity", ["topology_server_cpu", "host_link"], "allocator",
     [("vc_tetris", "oktopus"), ("vc_tetris", "kraken"), ("oktopus", "kraken")]),
]


def paired(df: pd.DataFrame, first: str, second: str, by: list[str],
           label: str = "allocator", metric: str = "util_cpu") -> pd.DataFrame:
    """Per combination of the ``by`` columns: ``first − second`` of ``metric`` seed by seed
    (the configurations named in the ``label`` column; same seed, same VCs): its mean, the
    half-width of its 95 % Student-t interval, the number of seeds and the seeds where
    ``first`` is ahead (its value is larger)."""
    rows = []
    for key, g in df[df[label].isin([first, second])].groupby(by, sort=True):
        per_seed = g.pivot_table(index="seed", columns=label, values=metric)
        if first not in per_seed or second not in per_seed:
            continue
        d = (per_seed[first] - per_seed[second]).dropna()
        m, h, n = mean_ci(d)
        rows.append({**dict(zip(by, key if isinstance(key, tuple) else (key,), strict=True)),
                     "first": first, "second": second, "mean": m, "half_width": h, "n": n,
                     "ahead": int((d > 0).sum())})
    return pd.DataFrame(rows)


def paired_table(df: pd.DataFrame, by: list[str], label: str,
                 pairs: list[tuple[str, str]], metric: str = "util_cpu") -> str | None:
    """The :func:`paired` rows of every pair as a Markdown table, or None without any."""
    frames = [paired(df, a, b, by, label, metric) for a, b in pairs]
    frames = [f for f in frames if len(f)]
    if not frames:
        return None
    t = pd.concat(frames, ignore_index=True).sort_values(by, kind="stable")
    lines = ["| " + " | ".join(by) + " | pair | difference (mean ± 95 % CI) | first ahead in |",
             "|---" * (len(by) + 3) + "|"]
    for _, r in t.iterrows():
        half = "" if np.isnan(r["half_width"]) else f" ± {r['half_width']:.3f}"
        lines.append("| " + " | ".join(str(r[c]) for c in by)
                     + f" | {r['first']} − {r['second']} | {r['mean']:+.3f}{half} | "
                     f"{r['ahead']} of {r['n']} seeds |")
    return "\n".join(lines)


def paired_tables(results: Path) -> list[tuple[str, str]]:
    """(title, table) of each :data:`PAIRED` family whose results exist."""
    from dcsim.report import load as load_results

    out = []
    for name, by, label, pairs in PAIRED:
        if name is None:
            df, where = load(results), "the λ experiments"
        elif (results / name / "summary.parquet").exists():
            df, where = load_results(results / name).summary, name
        else:
            continue
        t = paired_table(df, by, label, pairs) if len(df) else None
        if t:
            out.append((f"Paired differences of used CU, {where}", t))
    return out


#: Fig. 4 bins of N: "grouped into bins of size 6" from N = 3 ("3 ≤ N < 9" is the first)
N_EDGES = list(range(3, 58, 6)) + [61]

#: what the paper's text (Sec. V-D/E) states about Fig. 4/5 at lambda = 20
PAPER_HEAT = [
    ("kraken", "S = 1, B = 1, 3 ≤ N < 9", "≈ 0.80"),
    ("kraken", "S ≤ 2, B ≤ 2: every N bin", "≥ 0.4"),
    ("kraken", "S = 1, B = 1: the N bins with ≥ 0.6", "N < 27 only"),
    ("vc_tetris", "S = 1, B = 1: every N bin", "≥ 0.6"),
    ("vc_tetris", "S = 8: every bin", "≤ 0.4"),
    ("ahab(kraken)", "S/B < 1 (all VCs with that ratio)", "0.23"),
    ("ahab(kraken)", "S/B > 1", "0.45"),
]


def requests_of(run_dir: Path) -> pd.DataFrame | None:
    p = run_dir / "requests"
    if not p.exists():
        return None
    r = pd.read_parquet(p, columns=["allocator", "N", "S", "B", "accepted"])
    bins = [f"{a}-{b - 1}" for a, b in zip(N_EDGES[:-1], N_EDGES[1:], strict=True)]
    r["N_bin"] = pd.cut(r["N"], N_EDGES, right=False, labels=bins)
    return r


def heat_tables(r: pd.DataFrame) -> str:
    """Fig. 4 (acceptance per B, S and N bin, all requests of all runs, as the paper) per
    allocator, Fig. 5 (acceptance per S/B), and the cells the paper's text quotes."""
    out = []
    for label in [a for a in ORDER if a in set(r["allocator"])] + sorted(
            set(r["allocator"]) - set(ORDER)):
        g = r[r["allocator"] == label]
        heat = g.groupby(["B", "S", "N_bin"], observed=True)["accepted"].mean().unstack("N_bin")
        out.append(f"\n#### Fig. 4: acceptance of {label} by B, S and N\n")
        cols = list(heat.columns)
        out.append("| B | S | " + " | ".join(str(c) for c in cols) + " |")
        out.append("|---|---|" + "---|" * len(cols))
        for (bb, ss), row in heat.iterrows():
            cells = ["" if np.isnan(v) else f"{v:.2f}" for v in row]
            out.append(f"| {bb:g} | {ss:g} | " + " | ".join(cells) + " |")
    ratio = r.assign(rho=r["S"] / r["B"])
    t = ratio.groupby(["rho", "allocator"], observed=True)["accepted"].mean().unstack()
    out.append("\n#### Fig. 5: acceptance by S/B\n")
    out.append("| S/B | " + " | ".join(t.columns) + " |")
    out.append("|---" * (len(t.columns) + 1) + "|")
    for rho, row in t.iterrows():
        out.append(f"| {rho:g} | " + " | ".join(f"{v:.2f}" for v in row) + " |")
    out.append("\n#### The paper's statements on Fig. 4/5 beside dcsim\n")
    out.append("| allocator | cells | paper | dcsim |")
    out.append("|---|---|---|---|")
    for label, what, paper in PAPER_HEAT:
        g = r[r["allocator"] == label]
        if g.empty:
            continue
        out.append(f"| {label} | {what} | {paper} | {_heat_value(g, what)} |")
    return "\n".join(out)


def _heat_value(g: pd.DataFrame, what: str) -> str:
    cell = g.groupby(["B", "S", "N_bin"], observed=True)["accepted"].mean()
    if what.startswith("S = 1, B = 1, 3"):
        return f"{cell.loc[(1.0, 1.0, '3-8')]:.2f}"
    if what.startswith("S ≤ 2, B ≤ 2"):
        c = cell[(cell.index.get_level_values("B") <= 2) & (cell.index.get_level_values("S") <= 2)]
        return f"min {c.min():.2f}"
    if what.startswith("S = 1, B = 1: the N bins"):
        c = cell.loc[(1.0, 1.0)]
        return "≥ 0.6 in " + ", ".join(str(k) for k, v in c.items() if v >= 0.6)
    if what.startswith("S = 1, B = 1: every"):
        return f"min {cell.loc[(1.0, 1.0)].min():.2f}"
    if what.startswith("S = 8"):
        return f"max {cell[cell.index.get_level_values('S') == 8].max():.2f}"
    rho = g["S"] / g["B"]
    sel = rho < 1 if "< 1" in what else rho > 1
    return f"{g[sel]['accepted'].mean():.2f}"


#: Fig. 3's panels: (metric, axis label)
FIG3 = {"a": ("util_cpu", "fraction of used CUs"), "b": ("mean_footprint", "footprint (BU)"),
        "c": ("mean_concurrent", "concurrent VCs")}


def figures(df: pd.DataFrame, out: Path) -> list[Path]:
    """Fig. 3a/3b/3c: used CUs, footprint and concurrent VCs against λ, a line per
    configuration with its 95 % band (:func:`dcsim.report.figures.metric_figure`)."""
    from dcsim.report import describe
    from dcsim.report.figures import metric_figure
    from dcsim.report.tables import in_order

    df = in_order(df, ORDER)
    paths = []
    for panel, (metric, label) in FIG3.items():
        paths += metric_figure(describe(df, metric, ["lam"]), metric, label, "lam", ["lam"],
                               out, stem=f"ahab_fig3{panel}", xlabel="arrival rate λ",
                               title=f"AHAB Fig. 3{panel} with dcsim (mean, 95 % band over "
                                     "seeds)")
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, default=Path("results"))
    ap.add_argument("--figures", type=Path, default=None,
                    help="draw Fig. 3a/3b/3c into this folder (e.g. docs/img)")
    ap.add_argument("--heat", type=Path, default=None,
                    help="results folder for Fig. 4/5 (default: <results>/ahab_lambda20)")
    ap.add_argument("--heat-only", action="store_true", help="print only Fig. 4/5")
    ap.add_argument("--paired", action="store_true",
                    help="print only the paired differences the reproduction quotes")
    args = ap.parse_args()
    if args.paired:
        tables = paired_tables(args.results)
        if not tables:
            raise SystemExit(f"no AHAB results under {args.results}")
        for title, t in tables:
            print(f"\n### {title}\n")
            print(t)
        return
    heat = requests_of(args.heat or args.results / "ahab_lambda20")
    if args.heat_only:
        if heat is None:
            raise SystemExit("no requests/ for Fig. 4/5")
        print(heat_tables(heat))
        return
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
    if heat is not None:
        print("\n### Fig. 4/5: acceptance by VC size (all requests of all runs)")
        print(heat_tables(heat))
    if args.figures:
        for p in figures(df, args.figures):
            print(f"wrote {p}")


if __name__ == "__main__":
    main()
