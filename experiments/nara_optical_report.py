"""Tables 2 and 3 of the Nara journal paper (Shabka & Zervas 2023) for dcsim's learned agent.

    python experiments/nara_optical_report.py [--results results]

Reads ``results/nara_optical_learned/summary.parquet`` (``dcsim run
experiments/nara_optical_learned.yaml``: the agents beside the five baselines on the nine
64-server optical topologies; ``nara_topology`` is one agent per topology, as the paper,
``nara`` the one agent for all nine) and, when it exists,
``results/nara_optical_learned_scaled/summary.parquet`` (the same on the 1024-server
versions). Prints, per topology (channels per tier-1 link, bottom-to-top oversubscription):

* every allocator's acceptance (``acceptance_last20``), mean ± 95 % CI over seeds;
* **Table 2**: the agent's gain over the best baseline of that topology (twice: among every
  baseline, and among the paper's four only, without dcsim's ``best_fit_multi``),
  ``100 × (agent / best − 1)`` of the means over seeds, for the acceptance and the cpu and
  memory utilisation (``util_*_last50``, the paper's per-request sample over the last 50 %
  of requests; the best baseline is taken per metric), the paper's value beside it, and
  the paired acceptance difference from that baseline (same seed, same requests: mean ±
  95 % CI over seeds; ``*`` where the interval excludes zero);
* **Table 3**: the agent's change from the 64-server topology to its scaled version,
  ``100 × (scaled / small − 1)``, the same three metrics, the paper's beside it, and the
  agent's gain over the best baseline at scale.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from dcsim.results.stats import mean_ci

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nara_report import optical, topology_order  # noqa: E402

AGENTS = ["nara_topology", "nara"]   # one agent per topology (the paper's), one for all
BASELINES = ["tetris", "nalb", "nulb", "random_multi", "best_fit_multi"]
#: the 2023 paper's own baselines (its Sec. IV: Tetris, NALB, NULB and random); dcsim's
#: best_fit_multi is not among them
PAPER_BASELINES = ["tetris", "nalb", "nulb", "random_multi"]
METRICS = ["acceptance_last20", "util_cpu_last50", "util_mem_last50"]
#: the paper's Table 2 and 3: (acceptance, cpu util., memory util.) in %, per (channels,
#: bottom-to-top oversubscription)
PAPER_TABLE2 = {
    (8, "1:16"): (19, 24, 22), (8, "1:8"): (15, 16, 20), (8, "1:4"): (22, 43, 23),
    (16, "1:16"): (9, 21, 16), (16, "1:8"): (11, 12, 15), (16, "1:4"): (8, 16, 11),
    (32, "1:16"): (17, 17, 21), (32, "1:8"): (19, 12, 10), (32, "1:4"): (6, 3, 3),
}
PAPER_TABLE3 = {
    (8, "1:16"): (6, 4, 0), (8, "1:8"): (6, -12, -2), (8, "1:4"): (4, 13, 6),
    (16, "1:16"): (16, 8, 14), (16, "1:8"): (10, 3, 10), (16, "1:4"): (9, 4, 11),
    (32, "1:16"): (7, 4, 11), (32, "1:8"): (-6, 8, 3), (32, "1:4"): (-1, -1, 6),
}


def means(df: pd.DataFrame, metrics: list[str]) -> pd.DataFrame:
    """Mean over seeds per (channels, oversubscription, allocator)."""
    metrics = [m for m in metrics if m in df.columns]
    return df.groupby(["channels", "oversubscription", "allocator"])[metrics].mean()


def gains(df: pd.DataFrame, agent: str, baselines: list[str] = BASELINES) -> pd.DataFrame:
    """Per topology and metric: the agent's mean, the best of ``baselines`` (name, mean),
    the gain ``100 × (agent / best − 1)`` and, for the acceptance, the paired per-seed
    difference from that baseline (mean, 95 % half-width)."""
    m = means(df, METRICS)
    rows = []
    for key in sorted({k[:2] for k in m.index}, key=topology_order):
        if (*key, agent) not in m.index:
            continue
        row = {"channels": key[0], "oversubscription": key[1]}
        for metric in m.columns:
            base = {b: m.loc[(*key, b), metric] for b in baselines if (*key, b) in m.index}
            best = max(base, key=base.get)
            value = m.loc[(*key, agent), metric]
            row.update({f"{metric}:agent": value, f"{metric}:best": best,
                        f"{metric}:best_value": base[best],
                        f"{metric}:gain": 100.0 * (value / base[best] - 1.0)})
        at = df[(df["channels"] == key[0]) & (df["oversubscription"] == key[1])]
        per_seed = at.pivot_table(index="seed", columns="allocator",
                                  values="acceptance_last20")
        diff, half, _ = mean_ci(per_seed[agent] - per_seed[row["acceptance_last20:best"]])
        row.update({"paired": diff, "paired_ci": half})
        rows.append(row)
    return pd.DataFrame(rows)


def _cell(value: float, paper: float | None = None) -> str:
    s = f"{value:+.1f}"
    return s if paper is None else f"{s} ({paper:+d})"


def table2(g: pd.DataFrame) -> str:
    lines = ["| channels | oversub. | agent acc. | best baseline | its acc. | paired acc. "
             "difference | acceptance % (paper) | cpu util. % (paper) | mem util. % (paper) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for _, r in g.iterrows():
        p = PAPER_TABLE2.get((int(r["channels"]), str(r["oversubscription"])))
        cells = [_cell(r[f"{m}:gain"], p[i] if p else None) if f"{m}:gain" in r else "-"
                 for i, m in enumerate(METRICS)]
        star = "*" if abs(r["paired"]) > r["paired_ci"] else ""
        lines.append(f"| {r['channels']} | {r['oversubscription']} | "
                     f"{r['acceptance_last20:agent']:.3f} | {r['acceptance_last20:best']} | "
                     f"{r['acceptance_last20:best_value']:.3f} | "
                     f"{r['paired']:+.3f} ± {r['paired_ci']:.3f}{star} | "
                     + " | ".join(cells) + " |")
    avg = [g[f"{m}:gain"].mean() if f"{m}:gain" in g else float("nan") for m in METRICS]
    pav = [sum(v[i] for v in PAPER_TABLE2.values()) / 9 for i in range(3)]
    wins = int((g["acceptance_last20:gain"] > 0).sum())
    lines.append(f"| mean | | | | | above on {wins} of {len(g)} | "
                 + " | ".join(f"{a:+.1f} ({p:+.1f})" for a, p in zip(avg, pav, strict=True))
                 + " |")
    return "\n".join(lines)


def table3(small: pd.DataFrame, scaled: pd.DataFrame, agent: str) -> str:
    a = means(small[small["allocator"] == agent], METRICS)
    b = means(scaled[scaled["allocator"] == agent], METRICS)
    gs = gains(scaled, agent).set_index(["channels", "oversubscription"])
    lines = ["| channels | oversub. | agent acc. 64 | agent acc. 1024 | acceptance % (paper) "
             "| cpu util. % (paper) | mem util. % (paper) | gain over best baseline at "
             "1024 (best) |", "|---|---|---|---|---|---|---|---|"]
    deltas = []
    for key in sorted({k[:2] for k in b.index}, key=topology_order):
        if (*key, agent) not in a.index:
            continue
        p = PAPER_TABLE3.get((int(key[0]), str(key[1])))
        d = [100.0 * (b.loc[(*key, agent), m] / a.loc[(*key, agent), m] - 1.0)
             for m in a.columns]
        deltas.append(d)
        g = gs.loc[key]
        lines.append(
            f"| {key[0]} | {key[1]} | {a.loc[(*key, agent), METRICS[0]]:.3f} | "
            f"{b.loc[(*key, agent), METRICS[0]]:.3f} | "
            + " | ".join(_cell(x, p[i] if p else None) for i, x in enumerate(d))
            + f" | {g['acceptance_last20:gain']:+.1f} ({g['acceptance_last20:best']}) |")
    if deltas:
        avg = [sum(d[i] for d in deltas) / len(deltas) for i in range(len(deltas[0]))]
        pav = [sum(v[i] for v in PAPER_TABLE3.values()) / 9 for i in range(3)]
        lines.append("| mean | | | | " + " | ".join(f"{x:+.1f} ({p:+.1f})"
                                                  for x, p in zip(avg, pav, strict=False))
                     + " | |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, default=Path("results"))
    args = ap.parse_args()
    small_p = args.results / "nara_optical_learned" / "summary.parquet"
    scaled_p = args.results / "nara_optical_learned_scaled" / "summary.parquet"
    if not small_p.exists():
        raise SystemExit(f"no {small_p}: run `dcsim run experiments/nara_optical_learned.yaml "
                         "--jobs 2` first")
    small = pd.read_parquet(small_p)
    print("\n### Optical (2023), 64 servers: acceptance_last20 (mean ± 95 % CI over seeds)\n")
    print(optical(small))
    agents = [a for a in AGENTS if a in set(small["allocator"])]
    for agent in agents:
        print(f"\n### Table 2, agent `{agent}`: its gain over the best baseline per topology, "
              "% (the paper's in brackets)\n")
        print(table2(gains(small, agent)))
        print(f"\n### Table 2, agent `{agent}`, against the paper's baselines only (Tetris, "
              "NALB, NULB, random; not dcsim's best_fit_multi)\n")
        print(table2(gains(small, agent, PAPER_BASELINES)))
    if scaled_p.exists():
        scaled = pd.read_parquet(scaled_p)
        print("\n### Optical (2023), 1024 servers: acceptance_last20 (mean ± 95 % CI)\n")
        print(optical(scaled))
        for agent in [a for a in agents if a in set(scaled["allocator"])]:
            print(f"\n### Table 3, agent `{agent}`: its change from 64 to 1024 servers, % "
                  "(the paper's in brackets)\n")
            print(table3(small, scaled, agent))


if __name__ == "__main__":
    main()
