"""docs/reproductions.md: every table names the command that prints it (#48 part 6), the
commands it names exist, and the report scripts' functions behind the tables it added
(the 20-seed retrained comparison, AHAB's paired differences, the Holm counts)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).parents[1]
DOC = ROOT / "docs" / "reproductions.md"
EXPERIMENTS = ROOT / "experiments"

#: a command that runs or prints something: a report or benchmark script, or dcsim itself
COMMAND = re.compile(r"\b(python (experiments|benchmarks)/[\w./-]+\.py|dcsim (run|report|train)\b)")
#: how far from a table its command may be named (lines before its first row, after its last)
BEFORE, AFTER = 12, 6
#: a table that reports no measurement says so just above it
NO_COMMAND = "<!-- no command:"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, EXPERIMENTS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(EXPERIMENTS))
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(EXPERIMENTS))
    return mod


def tables(lines: list[str]) -> list[tuple[int, int]]:
    """(first, last) line index of each table block: consecutive lines starting with ``|``
    (indented ones too, inside a list)."""
    out, i = [], 0
    while i < len(lines):
        if lines[i].lstrip().startswith("|"):
            j = i
            while j + 1 < len(lines) and lines[j + 1].lstrip().startswith("|"):
                j += 1
            out.append((i, j))
            i = j + 1
        else:
            i += 1
    return out


def command_lines(text: str) -> set[int]:
    """The line indices that name a command: a line of a fenced code block, or a line an
    inline code span (which may wrap) starts or ends on."""
    lines = text.splitlines()
    named: set[int] = set()
    fenced = False
    prose = []
    for i, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            prose.append("")
            continue
        if fenced:
            if COMMAND.search(line):
                named.add(i)
            prose.append("")
        else:
            prose.append(line)
    body = "\n".join(prose)
    for m in re.finditer(r"`([^`]+)`", body):
        if COMMAND.search(" ".join(m.group(1).split())):
            named.add(body.count("\n", 0, m.start()))
            named.add(body.count("\n", 0, m.end()))
    return named


def _joins(between: list[str]) -> bool:
    """Whether the lines between two tables keep them under one command: only blank lines,
    headings and whole-line bold captions."""
    return all(not s.strip() or s.lstrip().startswith("#")
               or re.fullmatch(r"\s*\*\*[^*].*\*\*:?\s*", s) for s in between)


def uncommanded(text: str) -> list[str]:
    """The first row of each table with no command named near it (nor near the table it
    follows under one caption) and no ``<!-- no command: ... -->`` just above it."""
    lines = text.splitlines()
    named = command_lines(text)
    missing, previous, previous_ok = [], None, False
    for first, last in tables(lines):
        ok = any(first - BEFORE <= i <= last + AFTER for i in named)
        ok |= any(NO_COMMAND in lines[i] for i in range(max(0, first - 3), first))
        if not ok and previous is not None and previous_ok:
            ok = _joins(lines[previous + 1:first])
        if not ok:
            missing.append(f"line {first + 1}: {lines[first].strip()[:70]}")
        previous, previous_ok = last, ok
    return missing


# ------------------------------------------------------------------------ the document
def test_every_table_names_the_command_that_prints_it():
    assert uncommanded(DOC.read_text(encoding="utf-8")) == []


def test_the_checker_finds_a_table_without_a_command():
    doc = ("Some prose.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n" + "filler\n" * 20
           + "`python experiments/deeprm_report.py` prints this one:\n\n"
           "| c |\n|---|\n| 3 |\n\n**A caption**\n\n| d |\n|---|\n| 4 |\n"
           + "filler\n" * 20 + "<!-- no command: a list of options -->\n\n| e |\n|---|\n")
    assert uncommanded(doc) == ["line 3: | a | b |"]
    wrapped = "(`python\nexperiments/ahab_report.py --paired`)\n\n| x |\n|---|\n"
    assert uncommanded(wrapped) == []


def _named_scripts(text: str):
    for m in re.finditer(r"python ((?:experiments|benchmarks)/[\w./-]+\.py)((?:\s+--[\w-]+)*)",
                         " ".join(text.split())):
        yield m.group(1), re.findall(r"--[\w-]+", m.group(2))


def test_the_scripts_and_options_the_document_names_exist():
    text = DOC.read_text(encoding="utf-8")
    named = list(_named_scripts(text))
    assert ("experiments/nara_optical_report.py", ["--retrained"]) in named
    assert ("experiments/ahab_report.py", ["--paired"]) in named
    for script, options in named:
        path = ROOT / script
        assert path.is_file(), script
        source = path.read_text(encoding="utf-8")
        for option in options:
            assert f'"{option}"' in source, f"{script} has no {option}"


def test_the_experiments_the_document_runs_exist():
    text = " ".join(DOC.read_text(encoding="utf-8").split())
    for m in re.finditer(r"dcsim (?:run|train \w+) (experiments/[\w{},./-]+\.yaml)", text):
        name = m.group(1)
        alternatives = re.search(r"\{([^}]*)\}", name)
        names = ([name.replace(alternatives.group(0), a)
                  for a in alternatives.group(1).split(",")] if alternatives else [name])
        for n in names:
            assert (ROOT / n).is_file(), n


def test_no_interval_is_pooled_over_the_topologies():
    text = " ".join(DOC.read_text(encoding="utf-8").split())
    assert "over 180 pairs" not in text and "180 (topology, seed) pairs" not in text


def _printed_family(lines: list[str], mean_row: int) -> tuple[np.ndarray, np.ndarray]:
    """The paired column (mean, half-width) of the per-topology rows above a mean row."""
    means, halves = [], []
    i = mean_row - 1
    while lines[i].startswith("| ") and re.match(r"\| \d+ \|", lines[i]):
        cell = lines[i].split("|")[6].strip().rstrip("*")
        m, h = cell.split("±")
        means.append(float(m))
        halves.append(float(h))
        i -= 1
    return np.array(means[::-1]), np.array(halves[::-1])


def test_the_holm_counts_of_table2_follow_from_its_printed_differences():
    """Each per-topology Table 2 gives 'above on k of 9 (c clearly, h after Holm)'; with 5
    seeds, c and h are what survive() gives on the printed differences."""
    mod = _load("nara_optical_report")
    lines = DOC.read_text(encoding="utf-8").splitlines()
    rows = [i for i, s in enumerate(lines)
            if s.startswith("| mean | | | | | above on") and "after Holm" in s]
    assert len(rows) == 4
    for i in rows:
        m, h = _printed_family(lines, i)
        assert len(m) == 9
        clear, holm = map(int, re.search(r"\((\d+) clearly, (\d+) after Holm\)",
                                         lines[i]).groups())
        n = np.full(9, 5)
        assert mod.survive(m, h, n, "holm") == holm, lines[i]
        # the uncorrected count is the unrounded values': within the printed rounding
        low = mod.survive(np.sign(m) * (np.abs(m) - 5e-4), h + 5e-4, n, "none")
        high = mod.survive(np.sign(m) * (np.abs(m) + 5e-4), h - 5e-4, n, "none")
        assert low <= clear <= high, lines[i]


# --------------------------------------------------------------- nara_optical_report
def test_survive_counts_positive_differences_that_pass_the_correction():
    mod = _load("nara_optical_report")
    from dcsim.report.numbers import p_values

    mean = np.array([0.10, 0.10, 0.03, -0.10, 0.0])
    half = np.array([0.01, 0.05, 0.029, 0.01, 0.0])   # the last: no spread, no test
    n = np.array([5, 5, 5, 5, 5])
    p = p_values(mean, half, n)
    assert p[2] < 0.05 and np.isnan(p[4])
    assert mod.survive(mean, half, n, "none") == 3            # the negative one is not above
    assert mod.survive(mean, half, n, "bonferroni") == int((p[:3] * 4 < 0.05).sum())
    holm = mod.survive(mean, half, n, "holm")
    assert mod.survive(mean, half, n, "bonferroni") <= holm <= 3
    with pytest.raises(ValueError):
        mod.survive(mean, half, n, "sidak")


def _retrained_rows() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    rows = []
    for c, o, lead in ((8, "1:16", 0.10), (32, "1:4", -0.02)):
        for s in range(20):
            base = 0.7 + rng.normal(0, 0.02)
            for a, v in (("nara_retrained_rules", base + lead + rng.normal(0, 0.005)),
                         ("nara_topology_rules", base), ("nara_topology", base - 0.01),
                         ("tetris_dcsim", base - 0.05)):
                rows.append({"channels": c, "oversubscription": o, "seed": s, "allocator": a,
                             "acceptance_last20": v})
    return pd.DataFrame(rows)


def test_retrained_table_gives_per_topology_differences_and_counts(tmp_path):
    mod = _load("nara_optical_report")
    df = _retrained_rows()
    d = mod.paired(df[df["channels"] == 8], "nara_retrained_rules", "nara_topology_rules")
    assert d[2] == 20 and abs(d[0] - 0.10) < 0.01
    text = mod.retrained(df)
    lines = text.splitlines()
    assert lines[0].startswith("| topology | retrained under the rules | shipped, under the "
                               "rules | shipped, own rules | `tetris_dcsim` |")
    assert lines[2].startswith("| 8 1:16 | ") and lines[3].startswith("| 32 1:4 | ")
    assert "± " in lines[2].split("|")[6]
    assert "retrained − the shipped agents under the same rules: above on 1 of 2 topologies "\
           "(1 with the interval above zero, 1 after Holm over the 2)" in text
    assert "retrained − `tetris_dcsim`: above on 2 of 2 topologies (2 with the interval above "\
           "zero, 2 after Holm over the 2)" in text
    out = tmp_path / "nara_rules_retrained"
    out.mkdir()
    df.to_parquet(out / "summary.parquet")
    printed = subprocess.run([sys.executable, str(EXPERIMENTS / "nara_optical_report.py"),
                              "--results", str(tmp_path), "--retrained"],
                             capture_output=True, text=True, check=True).stdout
    assert text in printed


def test_table2_mean_row_gives_the_holm_count():
    mod = _load("nara_optical_report")
    rows = []
    for c, o in ((8, "1:16"), (16, "1:8")):
        for s in range(5):
            for a, v in (("nara_topology", 0.9 + 0.01 * s), ("tetris", 0.8 + 0.011 * s),
                         ("nalb", 0.7), ("nulb", 0.6), ("random_multi", 0.5)):
                rows.append({"channels": c, "oversubscription": o, "seed": s,
                             "allocator": a, "acceptance_last20": v,
                             "util_cpu_last50": v, "util_mem_last50": v})
    g = mod.gains(pd.DataFrame(rows), "nara_topology", mod.PAPER_BASELINES)
    assert list(g["paired_n"]) == [5, 5]
    assert "above on 2 of 2 (2 clearly, 2 after Holm)" in mod.table2(g)


# ------------------------------------------------------------------------ ahab_report
def _ahab_rows() -> pd.DataFrame:
    rows = []
    for lam in (12, 20):
        for s in range(6):
            for a, v in (("oktopus", 0.80), ("kraken", 0.79), ("vc_tetris", 0.82),
                         ("strawman(kraken)", 0.81), ("ahab(oktopus)", 0.90),
                         ("ahab(vc_tetris)", 0.87)):
                wobble = 0.002 * ((s * 7 + len(a)) % 5) if a == "vc_tetris" else 0.0
                rows.append({"lam": lam, "seed": s, "allocator": a,
                             "util_cpu": v + wobble - (0.03 if s == 0 and a == "vc_tetris"
                                                       else 0.0)})
    return pd.DataFrame(rows)


def test_ahab_paired_is_first_minus_second_seed_by_seed():
    mod = _load("ahab_report")
    df = _ahab_rows()
    p = mod.paired(df, "vc_tetris", "oktopus", ["lam"])
    assert list(p["lam"]) == [12, 20] and list(p["n"]) == [6, 6]
    per_seed = (df[(df.allocator == "vc_tetris") & (df.lam == 12)].set_index("seed")["util_cpu"]
                - df[(df.allocator == "oktopus") & (df.lam == 12)].set_index("seed")["util_cpu"])
    assert abs(p["mean"].iloc[0] - per_seed.mean()) < 1e-12
    assert p["ahead"].iloc[0] == int((per_seed > 0).sum()) == 5
    assert mod.paired(df, "vc_tetris", "nobody", ["lam"]).empty


def test_ahab_paired_table_prints_every_quoted_pair():
    mod = _load("ahab_report")
    t = mod.paired_table(_ahab_rows(), ["lam"], "allocator", mod.PAIRED[0][3])
    lines = t.splitlines()
    assert lines[0] == "| lam | pair | difference (mean ± 95 % CI) | first ahead in |"
    assert len(lines) == 2 + 2 * len(mod.PAIRED[0][3])          # every pair at both rates
    assert "| 12 | vc_tetris − oktopus | +0." in t
    assert "| 20 | ahab(vc_tetris) − vc_tetris | +0.0" in t
    assert "| 12 | strawman(kraken) − kraken | +0.020 ± 0.000 | 6 of 6 seeds |" in t
    assert mod.paired_table(_ahab_rows(), ["lam"], "allocator", [("a", "b")]) is None
