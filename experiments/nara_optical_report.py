"""Tables 2 and 3 of the Nara journal paper (Shabka & Zervas 2023) for dcsim's learned agent.

    python experiments/nara_optical_report.py [--results results] [--terms]

Reads ``results/nara_optical_learned/summary.parquet`` (``dcsim run
experiments/nara_optical_learned.yaml``: the agents beside the baselines on the nine 64-server
optical topologies, on dcsim's wiring ``small`` and the authors' ``authors_small``;
``nara_topology`` is one agent per topology, as the paper, ``nara_topology_rules`` the same
agents under the baselines' rules, ``nara`` the one agent for all nine) and, when it
exists, ``results/nara_optical_learned_scaled/summary.parquet`` (the same on 1024 servers:
``scaled`` and ``authors_large``, each at the holding times H = 241, 362, 482). Prints, per
topology (channels per tier-1 link, bottom-to-top oversubscription):

* every allocator's acceptance (``acceptance_last20``), mean ± 95 % CI over seeds;
* **Table 2**: the agent's gain over the best baseline of that topology,
  ``100 × (agent / best − 1)`` of the means over seeds, for the acceptance and the cpu and
  memory utilisation (``util_*_last50``, the paper's per-request sample over the last 50 %
  of requests; the best baseline is taken per metric), the paper's value beside it, and
  the paired acceptance difference from that baseline (same seed, same requests: mean ±
  95 % CI over seeds; ``*`` where the interval excludes zero). The baselines are the
  paper's four (Tetris, NALB, NULB, random, run as the authors' code runs them); "beyond
  the paper" puts the agent against dcsim's stronger references instead (``tetris_dcsim``,
  the Tetris the papers describe, and ``best_fit_multi``);
* **Table 3** as a study: for each wiring and holding time, the agents' and each
  baseline's change from 64 to 1024 servers, ``100 × (1024 / 64 − 1)``, the paper's
  beside the agent's, and per topology for each holding time.

``--terms`` instead reads ``results/nara_optical_terms/summary.parquet`` (``dcsim run
experiments/nara_optical_terms.yaml``) and prints the agent's Table 2 gain under each
reading of the Tetris score (``bandwidth_term``).

``--retrained`` instead reads ``results/nara_rules_retrained/summary.parquet`` (the 20-seed
``dcsim run experiments/nara_optical_learned.yaml --seeds 20 ... --out
results/nara_rules_retrained`` of docs/reproductions.md, "Retrained under the baselines'
rules") and prints, per topology, the four agents' and references' mean acceptance and the
retrained agents' paired differences (:func:`retrained`).

Where a table says the agent is "above on k of n" topologies it also gives how many of the
n paired acceptance differences are above zero with their 95 % interval (``clearly``) and
how many of those survive Holm's correction over the n topologies (:func:`survive`: the
one-sample t-test of each difference, :func:`dcsim.report.numbers.p_values`, adjusted by
:func:`dcsim.report.numbers.adjust`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from dcsim.report.numbers import ALPHA, adjust, p_values
from dcsim.results.stats import mean_ci

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nara_report import optical, topology_order  # noqa: E402

#: one agent per topology (the paper's), the same under the baselines' rules, one for all
AGENTS = ["nara_topology", "nara_topology_rules", "nara"]
#: the 2023 paper's own baselines (its Sec. IV: Tetris, NALB, NULB and random)
PAPER_BASELINES = ["tetris", "nalb", "nulb", "random_multi"]
#: dcsim's stronger references: the Tetris the papers describe, and network-aware best fit
STRONG = ["tetris_dcsim", "best_fit_multi"]
BASELINES = PAPER_BASELINES + STRONG
#: each 64-server wiring and its 1024-server version
WIRINGS = {"small": "scaled", "authors_small": "authors_large"}
METRICS = ["acceptance_last20", "util_cpu_last50", "util_mem_last50"]
SHORT = {"acceptance_last20": "acc.", "util_cpu_last50": "cpu", "util_mem_last50": "mem"}
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
PAPER_MEAN2 = [sum(v[i] for v in PAPER_TABLE2.values()) / 9 for i in range(3)]
PAPER_MEAN3 = [sum(v[i] for v in PAPER_TABLE3.values()) / 9 for i in range(3)]
#: the labels of the 20-seed comparison of the agents retrained under the baselines' rules
#: (the command in docs/reproductions.md): the retrained agents, the shipped per-topology
#: agents under the same rules and under their own, and dcsim's strongest Tetris
RETRAINED = ["nara_retrained_rules", "nara_topology_rules", "nara_topology", "tetris_dcsim"]


def survive(mean, half, n, method: str = "holm") -> int:
    """How many of a family of paired differences (one per topology: mean, 95 % half-width
    and count of each) are above zero with the p-value of their one-sample t-test
    (:func:`~dcsim.report.numbers.p_values`), adjusted over the family by ``method``
    (:func:`~dcsim.report.numbers.adjust`: ``none``, ``holm`` or ``bonferroni``), below
    :data:`~dcsim.report.numbers.ALPHA`. A difference without spread is no test."""
    mean = np.asarray(mean, float)
    p = adjust(p_values(mean, half, n), method)
    return int(((mean > 0) & (p < ALPHA)).sum())


def paired(df: pd.DataFrame, a: str, b: str, metric: str = "acceptance_last20"
           ) -> tuple[float, float, int]:
    """``a − b`` of ``metric`` per seed (same seed, same requests): mean, 95 % half-width
    and the number of seeds both ran."""
    per_seed = df.pivot_table(index="seed", columns="allocator", values=metric)
    return mean_ci((per_seed[a] - per_seed[b]).dropna())


def counts(g: pd.DataFrame) -> str:
    """``c clearly, h after Holm`` for the paired columns of :func:`gains`' rows."""
    clear = survive(g["paired"], g["paired_ci"], g["paired_n"], "none")
    holm = survive(g["paired"], g["paired_ci"], g["paired_n"], "holm")
    return f"{clear} clearly, {holm} after Holm"


def wiring(df: pd.DataFrame, preset: str) -> pd.DataFrame:
    """The rows of one wiring (results without a ``preset`` column are dcsim's)."""
    if "preset" not in df.columns:
        return df if preset in ("small", "scaled") else df.iloc[:0]
    return df[df["preset"] == preset]


def holding(df: pd.DataFrame, h: int | None) -> pd.DataFrame:
    """The rows of one holding time H (``workload.duration.high``; None: all)."""
    if h is None or "high" not in df.columns:
        return df
    return df[df["high"] == h]


def settings(small: pd.DataFrame, big: pd.DataFrame):
    """Each (64-server wiring, its 1024-server version, holding time) with rows on both
    sides, and those rows: ``(preset, big_preset, h, small rows, big rows)``."""
    hs = sorted(big["high"].unique()) if "high" in big.columns else [None]
    for preset, big_preset in WIRINGS.items():
        s = wiring(small, preset)
        for h in hs:
            b = holding(wiring(big, big_preset), h)
            if len(b) and len(s):
                yield preset, big_preset, h, s, b


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
        diff, half, n = mean_ci(per_seed[agent] - per_seed[row["acceptance_last20:best"]])
        row.update({"paired": diff, "paired_ci": half, "paired_n": n})
        rows.append(row)
    return pd.DataFrame(rows)


def _cell(value: float, paper: float | None = None) -> str:
    s = f"{value:+.1f}"
    return s if paper is None else f"{s} ({paper:+d})"


def _mean_gains(g: pd.DataFrame) -> list[float]:
    return [g[f"{m}:gain"].mean() if f"{m}:gain" in g else float("nan") for m in METRICS]


def table2(g: pd.DataFrame, paper: bool = True) -> str:
    """Per topology, the agent's gains (the paper's beside them unless ``paper`` is
    false: against other baselines than the paper's they are not comparable)."""
    head = " (paper)" if paper else ""
    lines = ["| channels | oversub. | agent acc. | best baseline | its acc. | paired acc. "
             f"difference | acceptance %{head} | cpu util. %{head} | mem util. %{head} |",
             "|---|---|---|---|---|---|---|---|---|"]
    for _, r in g.iterrows():
        p = PAPER_TABLE2.get((int(r["channels"]), str(r["oversubscription"]))) if paper \
            else None
        cells = [_cell(r[f"{m}:gain"], p[i] if p else None) if f"{m}:gain" in r else "-"
                 for i, m in enumerate(METRICS)]
        star = "*" if abs(r["paired"]) > r["paired_ci"] else ""
        lines.append(f"| {r['channels']} | {r['oversubscription']} | "
                     f"{r['acceptance_last20:agent']:.3f} | {r['acceptance_last20:best']} | "
                     f"{r['acceptance_last20:best_value']:.3f} | "
                     f"{r['paired']:+.3f} ± {r['paired_ci']:.3f}{star} | "
                     + " | ".join(cells) + " |")
    wins = int((g["acceptance_last20:gain"] > 0).sum())
    lines.append(f"| mean | | | | | above on {wins} of {len(g)} ({counts(g)}) | "
                 + " | ".join(f"{a:+.1f} ({p:+.1f})" if paper else f"{a:+.1f}"
                              for a, p in zip(_mean_gains(g), PAPER_MEAN2, strict=True))
                 + " |")
    return "\n".join(lines)


def table2_summary(small: pd.DataFrame) -> str:
    """One line per wiring, agent and set of baselines: topologies where the agent leads,
    and its mean gains."""
    lines = ["| wiring | agent | against | above on | acceptance % | cpu util. % | "
             "mem util. % | of them clearly, after Holm |", "|---|---|---|---|---|---|---|---|",
             f"| paper | | its four baselines | 9 of 9 | {PAPER_MEAN2[0]:+.1f} | "
             f"{PAPER_MEAN2[1]:+.1f} | {PAPER_MEAN2[2]:+.1f} | |"]
    for preset in WIRINGS:
        df = wiring(small, preset)
        for agent in [a for a in AGENTS if a in set(df["allocator"])]:
            for name, bases in (("the paper's four", PAPER_BASELINES),
                                ("tetris_dcsim, best_fit_multi", STRONG)):
                if not set(bases) <= set(df["allocator"]):
                    continue
                g = gains(df, agent, bases)
                wins = int((g["acceptance_last20:gain"] > 0).sum())
                lines.append(f"| {preset} | {agent} | {name} | {wins} of {len(g)} | "
                             + " | ".join(f"{x:+.1f}" for x in _mean_gains(g))
                             + f" | {counts(g)} |")
    return "\n".join(lines)


def changes(small: pd.DataFrame, big: pd.DataFrame, allocator: str) -> pd.DataFrame:
    """Per topology, ``100 × (1024 / 64 − 1)`` of each metric's mean over seeds."""
    a = means(small[small["allocator"] == allocator], METRICS)
    b = means(big[big["allocator"] == allocator], METRICS)
    rows = []
    for key in sorted({k[:2] for k in b.index}, key=topology_order):
        if (*key, allocator) not in a.index:
            continue
        row = {"channels": key[0], "oversubscription": key[1],
               "acc64": a.loc[(*key, allocator), METRICS[0]],
               "acc1024": b.loc[(*key, allocator), METRICS[0]]}
        for m in METRICS:
            row[m] = 100.0 * (b.loc[(*key, allocator), m] / a.loc[(*key, allocator), m] - 1.0)
        rows.append(row)
    return pd.DataFrame(rows)


def _signs_as_paper(d: pd.DataFrame) -> int:
    """Topologies where the acceptance change has the paper's sign."""
    return sum((r["acceptance_last20"] > 0) == (PAPER_TABLE3[(int(r["channels"]),
                                                             str(r["oversubscription"]))][0] > 0)
               for _, r in d.iterrows())


def table3(small: pd.DataFrame, big: pd.DataFrame, agent: str) -> str:
    d = changes(small, big, agent).set_index(["channels", "oversubscription"])
    gs = gains(big, agent, PAPER_BASELINES).set_index(["channels", "oversubscription"])
    lines = ["| channels | oversub. | agent acc. 64 | agent acc. 1024 | acceptance % (paper) "
             "| cpu util. % (paper) | mem util. % (paper) | gain over the paper's baselines "
             "at 1024 (best) |", "|---|---|---|---|---|---|---|---|"]
    for key, r in d.iterrows():
        p = PAPER_TABLE3.get((int(key[0]), str(key[1])))
        g = gs.loc[key]
        lines.append(f"| {key[0]} | {key[1]} | {r['acc64']:.3f} | {r['acc1024']:.3f} | "
                     + " | ".join(_cell(r[m], p[i] if p else None)
                                  for i, m in enumerate(METRICS))
                     + f" | {g['acceptance_last20:gain']:+.1f} "
                       f"({g['acceptance_last20:best']}) |")
    if len(d):
        lines.append("| mean | | | | " + " | ".join(
            f"{d[m].mean():+.1f} ({p:+.1f})" for m, p in zip(METRICS, PAPER_MEAN3, strict=True))
            + f" | {gs['acceptance_last20:gain'].mean():+.1f} |")
    return "\n".join(lines)


def study(small: pd.DataFrame, big: pd.DataFrame) -> str:
    """Table 3 as a study: per wiring and holding time, each agent's mean change (the
    paper's sign on how many topologies) and its gain over the paper's baselines at 1024,
    and each baseline's mean acceptance change."""
    agents = [a for a in AGENTS if a in set(big["allocator"])]
    bases = [b for b in BASELINES if b in set(big["allocator"])]
    lines = ["| wiring (64 → 1024) | H | " + " | ".join(
        f"{a} acc. / cpu / mem % (paper's sign)" for a in agents) + " | "
        + " | ".join(f"{b} acc. %" for b in bases) + " |",
        "|---" * (2 + len(agents) + len(bases)) + "|",
        "| paper | ? | " + " | ".join(
            f"{PAPER_MEAN3[0]:+.1f} / {PAPER_MEAN3[1]:+.1f} / {PAPER_MEAN3[2]:+.1f}"
            for _ in agents) + " | " + " | ".join("-" for _ in bases) + " |"]
    for preset, big_preset, h, s, b in settings(small, big):
        cells = []
        for a in agents:
            d = changes(s, b, a)
            cells.append(" / ".join(f"{d[m].mean():+.1f}" for m in METRICS)
                         + f" ({_signs_as_paper(d)} of {len(d)})")
        for x in bases:
            d = changes(s, b, x)
            cells.append(f"{d['acceptance_last20'].mean():+.1f}")
        lines.append(f"| {preset} → {big_preset} | {h} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def baseline_changes(small: pd.DataFrame, big: pd.DataFrame) -> str:
    """Per allocator and topology, the acceptance change from 64 to 1024 servers, %."""
    allocs = [a for a in AGENTS + BASELINES if a in set(big["allocator"])]
    keys = sorted({(c, o) for c, o in zip(big["channels"], big["oversubscription"],
                                          strict=True)}, key=topology_order)
    lines = ["| allocator | " + " | ".join(f"{c} {o}" for c, o in keys) + " | mean |",
             "|---" * (len(keys) + 2) + "|"]
    for a in allocs:
        d = changes(small, big, a).set_index(["channels", "oversubscription"])
        lines.append(f"| {a} | " + " | ".join(
            f"{d.loc[k, 'acceptance_last20']:+.1f}" if k in d.index else "-" for k in keys)
            + f" | {d['acceptance_last20'].mean():+.1f} |")
    return "\n".join(lines)


def terms(df: pd.DataFrame) -> str:
    """The agent's Table 2 gain against the paper's four baselines under each reading of
    the Tetris score, and each score-based baseline's mean acceptance."""
    variants = sorted({a.split("-", 1)[1] for a in df["allocator"] if "-" in a},
                      key=["authors_raw", "own_raw", "authors_misaligned", "own_link"].index)
    lines = ["| bandwidth_term | above on | acceptance % | cpu util. % | mem util. % | "
             "tetris acc. | nalb acc. | nulb acc. | of them clearly, after Holm |",
             "|---|---|---|---|---|---|---|---|---|",
             f"| paper | 9 of 9 | {PAPER_MEAN2[0]:+.1f} | {PAPER_MEAN2[1]:+.1f} | "
             f"{PAPER_MEAN2[2]:+.1f} | | | | |"]
    for v in variants:
        sub = df[df["allocator"].isin(["nara_topology", "random_multi"])
                 | df["allocator"].str.endswith("-" + v)].copy()
        sub["allocator"] = sub["allocator"].str.replace("-" + v, "", regex=False)
        g = gains(sub, "nara_topology", PAPER_BASELINES)
        wins = int((g["acceptance_last20:gain"] > 0).sum())
        acc = sub.groupby("allocator")["acceptance_last20"].mean()
        lines.append(f"| {v} | {wins} of {len(g)} | "
                     + " | ".join(f"{x:+.1f}" for x in _mean_gains(g)) + " | "
                     + " | ".join(f"{acc[b]:.3f}" for b in ("tetris", "nalb", "nulb"))
                     + f" | {counts(g)} |")
    return "\n".join(lines)


def retrained(df: pd.DataFrame) -> str:
    """The 20-seed comparison (:data:`RETRAINED`'s labels): per topology, each one's mean
    acceptance (``acceptance_last20``) and the retrained agents' paired differences (mean ±
    95 % half-width over seeds) from the shipped agents under the same rules and from
    ``tetris_dcsim``; then, for each difference, on how many topologies it is above zero,
    with its interval, and after Holm's correction over the topologies."""
    new, shipped, own, tetris = RETRAINED
    lines = ["| topology | retrained under the rules | shipped, under the rules | shipped, own "
             "rules | `tetris_dcsim` | retrained − shipped under the rules | retrained − "
             "`tetris_dcsim` |", "|---|---|---|---|---|---|---|"]
    diffs: dict[str, list[tuple[float, float, int]]] = {shipped: [], tetris: []}
    keys = sorted({(c, o) for c, o in zip(df["channels"], df["oversubscription"],
                                          strict=True)}, key=topology_order)
    for c, o in keys:
        at = df[(df["channels"] == c) & (df["oversubscription"] == o)]
        acc = at.groupby("allocator")["acceptance_last20"].mean()
        cells = [f"{acc[a]:.3f}" if a in acc.index else "—" for a in RETRAINED]
        for b in (shipped, tetris):
            d = paired(at, new, b) if {new, b} <= set(acc.index) else (np.nan, np.nan, 0)
            diffs[b].append(d)
            cells.append(f"{d[0]:+.3f} ± {d[1]:.3f}" if d[2] else "—")
        lines.append(f"| {c} {o} | " + " | ".join(cells) + " |")
    lines.append("")
    for b, words in ((shipped, "the shipped agents under the same rules"),
                     (tetris, "`tetris_dcsim`")):
        m, h, n = (np.array(x, float) for x in zip(*diffs[b], strict=True))
        lines.append(f"- retrained − {words}: above on {int((m > 0).sum())} of {len(m)} "
                     f"topologies ({survive(m, h, n, 'none')} with the interval above zero, "
                     f"{survive(m, h, n, 'holm')} after Holm over the {len(m)})")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, default=Path("results"))
    ap.add_argument("--terms", action="store_true",
                    help="the agent's gain under each bandwidth_term (nara_optical_terms)")
    ap.add_argument("--retrained", action="store_true",
                    help="the 20-seed comparison of the agents retrained under the "
                         "baselines' rules (nara_rules_retrained)")
    args = ap.parse_args()
    sections = {  # option: (experiment, how to make it, heading, table)
        "retrained": ("nara_rules_retrained", "run the 20-seed command of docs/reproductions.md "
                      "(\"Retrained under the baselines' rules\") first",
                      "Retrained under the baselines' rules, 20 seeds: acceptance_last20 "
                      "(means; paired differences mean ± 95 % CI over seeds)", retrained),
        "terms": ("nara_optical_terms", "run `dcsim run experiments/nara_optical_terms.yaml "
                  "--jobs 2` first", "Table 2 under each reading of the Tetris score "
                  "(nara_topology against the paper's four baselines)", terms),
    }
    for option, (name, how, heading, table) in sections.items():
        if getattr(args, option):
            p = args.results / name / "summary.parquet"
            if not p.exists():
                raise SystemExit(f"no {p}: {how}")
            print(f"\n### {heading}\n")
            print(table(pd.read_parquet(p)))
            return
    small_p = args.results / "nara_optical_learned" / "summary.parquet"
    scaled_p = args.results / "nara_optical_learned_scaled" / "summary.parquet"
    if not small_p.exists():
        raise SystemExit(f"no {small_p}: run `dcsim run experiments/nara_optical_learned.yaml "
                         "--jobs 2` first")
    small = pd.read_parquet(small_p)
    print("\n### Table 2 in one line per wiring and agent\n")
    print(table2_summary(small))
    for preset in WIRINGS:
        df = wiring(small, preset)
        if not len(df):
            continue
        print(f"\n### Optical (2023), 64 servers, wiring {preset}: acceptance_last20 "
              "(mean ± 95 % CI over seeds)\n")
        print(optical(df))
        for agent in [a for a in AGENTS if a in set(df["allocator"])]:
            print(f"\n### Table 2, wiring {preset}, agent `{agent}`: its gain over the best "
                  "of the paper's baselines (Tetris, NALB, NULB, random), % (the paper's in "
                  "brackets)\n")
            print(table2(gains(df, agent, PAPER_BASELINES)))
            if set(STRONG) <= set(df["allocator"]):
                print(f"\n### Beyond the paper, wiring {preset}, agent `{agent}`: against "
                      "dcsim's stronger references (tetris_dcsim, best_fit_multi)\n")
                print(table2(gains(df, agent, STRONG), paper=False))
    if not scaled_p.exists():
        return
    big = pd.read_parquet(scaled_p)
    print("\n### Table 3 as a study: mean change from 64 to 1024 servers, % (topologies "
          "with the paper's sign of the acceptance change)\n")
    print(study(small, big))
    for preset, big_preset, h, s, b in settings(small, big):
        print(f"\n### 1024 servers, wiring {big_preset}, H = {h}: acceptance_last20 "
              "(mean ± 95 % CI)\n")
        print(optical(b))
        print(f"\n### Each allocator's acceptance change from 64 ({preset}) to 1024 "
              f"({big_preset}) servers, H = {h}, %\n")
        print(baseline_changes(s, b))
        for agent in [a for a in AGENTS if a in set(b["allocator"])]:
            print(f"\n### Table 3, {preset} → {big_preset}, H = {h}, agent `{agent}`: "
                  "its change from 64 to 1024 servers, % (the paper's in brackets)\n")
            print(table3(s, b, agent))


if __name__ == "__main__":
    main()
