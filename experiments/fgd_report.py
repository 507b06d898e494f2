"""FGD (Weng et al., ATC'23) tables beside the paper's, and its Fig. 9a.

    python experiments/fgd_report.py [--results results] [--figures docs/img]

Reads, under ``--results`` (each may be missing):

* ``fgd_default/`` (``experiments/fgd_default.yaml``): the share of the cluster's GPUs
  allocated at 130 % arrived per policy, mean ± 95 % interval over seeds, beside the
  authors' published mean (their ``analysis_allo_discrete.csv``, seeds 42-51), the
  difference, the ordering, and the fragmented and unallocated GPUs;
* ``fgd_variants/`` (``experiments/fgd_variants.yaml``): the same per workload variant, and
  the ``cpu200`` comparison of the paper's abstract (FGD's unallocated GPUs against GPU
  packing's);
* ``fgd_ablation/`` and ``fgd_ablation_workload/``: each of the authors' unstated behaviours
  switched off, as the paired difference (same seeds, same pods) against the authors'
  setting;
* ``fgd_departures/`` (``experiments/fgd_departures.yaml``): pods that come and go, the
  time-averaged allocated share, GPU acceptance and fragmentation per offered load;
* ``fgd_power/`` (``experiments/fgd_power.yaml``): the cluster's power draw at 40, 80 and
  130 % arrived per policy and draw model, with the GPU allocated there and the paired
  difference against FGD (same seeds, same pods);
* ``fgd_failures/`` (``experiments/fgd_failures.yaml``): pods that come and go on nodes
  that fail, per failure rate and ``on_failure``: GPU request placed, the paired difference
  of FGD against best fit, GPU time lost, availability and mean power.

With ``--figures DIR``: the allocated share and the fragmented GPUs against the arrived
GPU request (Fig. 9a and 9b) from ``fgd_default``'s time series, ``DIR/fgd_fig9a.png`` /
``.svg`` and ``DIR/fgd_fig9b.png`` / ``.svg`` (the ``plot`` extra).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from dcsim.report import load
from dcsim.results.stats import ci_cell, mean_ci

POLICIES = ["random", "dot_product", "gpu_clustering", "gpu_packing", "best_fit", "fgd"]
#: the authors' published means (% of GPUs allocated at 130 % arrived, seeds 42-51), from
#: their repository's experiments/analysis/expected_results/analysis_allo_discrete.csv
PAPER = {
    "default": (87.47, 90.85, 91.88, 92.00, 93.08, 95.39),
    "cpu050": (91.24, 93.27, 93.79, 93.72, 93.79, 95.21),
    "cpu100": (89.11, 91.96, 92.64, 92.72, 93.44, 95.35),
    "cpu200": (83.77, 87.70, 89.92, 90.22, 92.40, 95.05),
    "cpu250": (80.41, 83.81, 87.99, 88.28, 91.45, 93.41),
    "gpushare40": (86.00, 89.56, 90.02, 90.03, 91.69, 94.15),
    "gpushare60": (83.65, 87.12, 87.20, 87.45, 89.36, 91.40),
    "gpushare80": (81.22, 84.49, 84.85, 85.00, 87.01, 89.31),
    "gpushare100": (79.44, 82.42, 82.65, 82.57, 85.01, 86.90),
    "gpuspec10": (87.43, 90.39, 92.18, 92.46, 93.31, 94.95),
    "gpuspec20": (87.24, 89.97, 92.25, 92.94, 93.30, 94.84),
    "gpuspec25": (86.94, 89.63, 92.08, 92.98, 93.23, 94.74),
    "gpuspec33": (86.46, 89.14, 92.12, 93.22, 93.09, 94.55),
    "multigpu20": (88.69, 92.06, 93.56, 93.71, 93.93, 95.65),
    "multigpu30": (89.27, 93.28, 94.72, 94.87, 94.72, 96.46),
    "multigpu40": (90.09, 94.19, 95.50, 95.74, 95.24, 96.99),
    "multigpu50": (90.28, 94.85, 95.81, 96.18, 95.74, 97.18),
}
#: the paper's cpu200 numbers (abstract, §6.4): unallocated GPUs at 130 % arrived
PAPER_CPU200_UNALLOC = {"fgd": 308, "gpu_packing": 607}


def _summary(results: Path, name: str) -> pd.DataFrame | None:
    path = results / name
    if not (path / "summary.parquet").is_file():
        return None
    return load(path).summary


def _row(policy: str, g: pd.DataFrame, paper: float | None) -> list[str]:
    m, h, n = mean_ci(g["alloc_gpu_share"] * 100)
    diff = "—" if paper is None else f"{m - paper:+.2f}"
    return [policy, ci_cell(g["alloc_gpu_share"] * 100, 2),
            "—" if paper is None else f"{paper:.2f}", diff, ci_cell(g["frag_gpus"], 1),
            ci_cell(g["unalloc_gpus"], 1), str(n)]


def _md(head: list[str], rows: list[list[str]]) -> str:
    return "\n".join(["| " + " | ".join(head) + " |", "|---" * len(head) + "|",
                      *("| " + " | ".join(r) + " |" for r in rows)])


def _ordering(means: dict[str, float]) -> str:
    got = sorted(means, key=means.get)
    return " < ".join(got)


def default_table(s: pd.DataFrame) -> str:
    rows, means = [], {}
    for i, p in enumerate(POLICIES):
        g = s[s["allocator"] == p]
        if len(g):
            rows.append(_row(p, g, PAPER["default"][i]))
            means[p] = float(g["alloc_gpu_share"].mean())
    head = ["policy", "GPU allocated, % (dcsim)", "paper", "difference", "fragmented GPUs",
            "unallocated GPUs", "seeds"]
    out = ["Default trace, 130 % arrived: share of the cluster's GPUs allocated", "",
           _md(head, rows), "", f"dcsim's order: {_ordering(means)}",
           "the paper's:   random < dot_product < gpu_clustering ≈ gpu_packing < best_fit "
           "< fgd"]
    return "\n".join(out)


def _variant_column(s: pd.DataFrame) -> str:
    for c in ("pods", "gpu_pods"):
        if c in s.columns:
            return c
    raise KeyError("no sweep column for the pod lists (pods) in fgd_variants")


def variants_table(s: pd.DataFrame) -> str:
    col = _variant_column(s)
    head = ["trace", *POLICIES, "largest |difference|"]
    rows = []
    for v in [v for v in PAPER if v in set(s[col])]:
        cells, worst = [v], 0.0
        for i, p in enumerate(POLICIES):
            g = s[(s[col] == v) & (s["allocator"] == p)]
            if not len(g):
                cells.append("—")
                continue
            m = float(g["alloc_gpu_share"].mean() * 100)
            worst = max(worst, abs(m - PAPER[v][i]))
            cells.append(f"{m:.2f} ({PAPER[v][i]:.2f})")
        cells.append(f"{worst:.2f}")
        rows.append(cells)
    out = ["Workload variants, 130 % arrived: % of GPUs allocated, dcsim (paper)", "",
           _md(head, rows)]
    c = s[s[col] == "cpu200"]
    if len(c):
        f = c[c["allocator"] == "fgd"]["unalloc_gpus"]
        k = c[c["allocator"] == "gpu_packing"]["unalloc_gpus"]
        if len(f) and len(k):
            cut = 1 - f.mean() / k.mean()
            out += ["", "cpu200, unallocated GPUs at 130 % arrived: "
                    f"fgd {ci_cell(f, 1)} (paper {PAPER_CPU200_UNALLOC['fgd']}), "
                    f"gpu_packing {ci_cell(k, 1)} (paper "
                    f"{PAPER_CPU200_UNALLOC['gpu_packing']}): fgd leaves {cut:.1%} fewer "
                    f"(paper {1 - 308 / 607:.1%})"]
    return "\n".join(out)


def _base(label: str) -> str:
    return label.split("(")[0]


def ablation_table(s: pd.DataFrame) -> str:
    """Each labelled variant against its policy's default label, paired by seed."""
    rows = []
    pivot = s.pivot_table(index="seed", columns="allocator", values="alloc_gpu_share")
    for label in s["allocator"].unique():
        base = _base(label)
        if label == base or base not in pivot.columns:
            continue
        d = (pivot[label] - pivot[base]).dropna() * 100
        rows.append([label, ci_cell(pivot[base] * 100, 2), ci_cell(pivot[label] * 100, 2),
                     ci_cell(d, 2)])
    head = ["variant", "authors' setting, %", "variant, %", "difference (paired), points"]
    return "\n".join(["Unstated scheduler behaviours: GPU allocated at 130 % arrived", "",
                      _md(head, rows)])


def workload_ablation_table(s: pd.DataFrame) -> str:
    keys = [c for c in ("order", "stop", "threshold", "cpu_pods") if c in s.columns]
    points = s[keys].drop_duplicates().to_dict("records")
    base = points[0]
    head = ["policy", *(", ".join(f"{k}={v}" for k, v in p.items() if v != base[k])
                        or "authors" for p in points)]
    rows = []
    for pol in POLICIES:
        g = s[s["allocator"] == pol]
        if not len(g):
            continue
        ref = g
        for k, v in base.items():
            ref = ref[ref[k] == v]
        ref = ref.set_index("seed")["alloc_gpu_share"]
        cells = [pol]
        for j, p in enumerate(points):
            h = g
            for k, v in p.items():
                h = h[h[k] == v]
            h = h.set_index("seed")["alloc_gpu_share"]
            cells.append(ci_cell(h * 100, 2) if j == 0 else
                         f"{ci_cell((h - ref).dropna() * 100, 2)}")
        rows.append(cells)
    return "\n".join(["Unstated workload behaviours: GPU allocated at 130 % arrived "
                      "(the first column in %, the others the paired difference in points)",
                      "", _md(head, rows)])


def departures_table(s: pd.DataFrame) -> str:
    keys = [c for c in s.columns if c in ("load", "holding", "mean_holding")]
    rows = []
    for key, g in s.groupby(keys, sort=False) if keys else [((), s)]:
        key = key if isinstance(key, tuple) else (key,)
        for p in POLICIES:
            h = g[g["allocator"] == p]
            if len(h):
                rows.append([*map(str, key), p, ci_cell(h["alloc_gpu_share"] * 100, 2),
                             ci_cell(h["gpu_acceptance"] * 100, 2), ci_cell(h["frag_gpus"], 1),
                             str(len(h))])
    head = [*keys, "policy", "GPU allocated, % (time average)", "GPU request placed, %",
            "fragmented GPUs (time average)", "seeds"]
    return "\n".join(["Pods that come and go (beyond the paper)", "", _md(head, rows)])


#: the arrived percents of the power table
POWER_AT = (40, 80, 130)


def power_table(results: Path) -> str:
    ts = load(results / "fgd_power").timeseries
    draws = [c for c in ("gpu_draw", "cpu_draw") if c in ts.columns]
    head = [*draws, "policy"]
    for pct in POWER_AT:
        head += [f"kW at {pct} %", f"GPU alloc. % at {pct} %", f"kW − fgd at {pct} %"]
    rows = []
    for key, g in ts.groupby(draws, observed=True) if draws else [((), ts)]:
        key = key if isinstance(key, tuple) else (key,)
        at = {pct: g[g["arrived_pct"] == pct] for pct in POWER_AT}
        ref = {pct: at[pct][at[pct]["allocator"] == "fgd"].set_index("seed")["power_w"]
               for pct in POWER_AT}
        for p in POLICIES:
            cells = [*map(str, key), p]
            for pct in POWER_AT:
                h = at[pct][at[pct]["allocator"] == p].set_index("seed")
                if not len(h):
                    cells += ["—"] * 3
                    continue
                diff = (h["power_w"] - ref[pct].reindex(h.index)).dropna() / 1000
                cells += [ci_cell(h["power_w"] / 1000, 1),
                          ci_cell(h["alloc_gpu_share"] * 100, 2),
                          "—" if p == "fgd" or not len(diff) else ci_cell(diff, 1)]
            rows.append(cells)
    return "\n".join(["Power drawn against the arrived GPU request (beyond the paper; "
                      "Lettich et al.'s model)", "", _md(head, rows)])


def failures_table(s: pd.DataFrame) -> str:
    keys = [c for c in s.columns if c.endswith("ttf_mean") or c == "on_failure"]
    head = [*keys, "policy", "GPU request placed, %", "− best_fit, points",
            "GPU allocated, %", "GPU·h lost", "GPUs up, %", "mean kW", "seeds"]
    rows = []
    for key, g in s.groupby(keys, sort=False) if keys else [((), s)]:
        key = key if isinstance(key, tuple) else (key,)
        ref = g[g["allocator"] == "best_fit"].set_index("seed")["gpu_acceptance"]
        for p in POLICIES:
            h = g[g["allocator"] == p].set_index("seed")
            if not len(h):
                continue
            diff = ((h["gpu_acceptance"] - ref.reindex(h.index)) * 100).dropna()
            rows.append([*map(str, key), p, ci_cell(h["gpu_acceptance"] * 100, 2),
                         "—" if p == "best_fit" else ci_cell(diff, 2),
                         ci_cell(h["alloc_gpu_share"] * 100, 2),
                         ci_cell(h["lost_gpu_time"] / 3600, 0),
                         ci_cell(h["avail_gpu"] * 100, 2),
                         ci_cell(h["mean_power_w"] / 1000, 1), str(len(h))])
    return "\n".join(["Pods that come and go on nodes that fail (beyond the paper)", "",
                      _md(head, rows)])


def figures(results: Path, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    r = load(results / "fgd_default")
    ts = r.timeseries
    written = []
    for col, stem, ylabel in (("alloc_gpu_share", "fgd_fig9a", "GPU allocated (% of GPUs)"),
                              ("frag_gpus", "fgd_fig9b", "fragmented GPUs")):
        fig, ax = plt.subplots(figsize=(6.4, 4.0))
        for p in POLICIES:
            g = ts[ts["allocator"] == p]
            if not len(g):
                continue
            per = g.pivot_table(index="arrived_pct", columns="seed", values=col)
            scale = 100 if col == "alloc_gpu_share" else 1
            stats = [mean_ci(per.loc[x] * scale) for x in per.index]
            m = pd.Series([s[0] for s in stats], index=per.index)
            h = pd.Series([s[1] for s in stats], index=per.index).fillna(0)
            ax.plot(m.index, m.values, label=p)
            ax.fill_between(m.index, m - h, m + h, alpha=0.2, linewidth=0)
        ax.set_xlabel("arrived GPU request (% of the cluster's GPUs)")
        ax.set_ylabel(ylabel)
        if col == "alloc_gpu_share":
            ax.set_xlim(80, 130)
            ax.set_ylim(75, 100)
        ax.legend(fontsize=8)
        ax.set_title(f"default trace, mean over {ts['seed'].nunique()} seeds (95 % band)",
                     fontsize=10)
        out.mkdir(parents=True, exist_ok=True)
        for ext in ("png", "svg"):
            path = out / f"{stem}.{ext}"
            fig.savefig(path, dpi=120, bbox_inches="tight",
                        **({"metadata": {"Date": None}} if ext == "svg" else {}))
            written.append(path)
        plt.close(fig)
    return written


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", type=Path, default=Path("results"))
    ap.add_argument("--figures", type=Path, default=None)
    a = ap.parse_args(argv)
    found = False
    for name, table in (("fgd_default", default_table), ("fgd_variants", variants_table),
                        ("fgd_ablation", ablation_table),
                        ("fgd_ablation_workload", workload_ablation_table),
                        ("fgd_departures", departures_table)):
        s = _summary(a.results, name)
        if s is None:
            continue
        found = True
        print(f"## {name}\n\n{table(s)}\n")
    if _summary(a.results, "fgd_power") is not None:
        found = True
        print(f"## fgd_power\n\n{power_table(a.results)}\n")
    s = _summary(a.results, "fgd_failures")
    if s is not None:
        found = True
        print(f"## fgd_failures\n\n{failures_table(s)}\n")
    if not found:
        print(f"no FGD results under {a.results} (run experiments/fgd_default.yaml first)",
              file=sys.stderr)
        return 1
    if a.figures is not None and (a.results / "fgd_default" / "summary.parquet").is_file():
        for p in figures(a.results, a.figures):
            print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
