"""Rows of every shipped experiment, reduced, recorded before a refactor and compared after
(issue #17: "a refactor changes no result").

    python tests/golden.py [NAME ...]        # (re-)record tests/data/golden/NAME.*.parquet

Each experiment in ``experiments/`` that ``dcsim run`` runs is reduced (one seed, the first
values of each ``matrix:`` key, fewer requests where a run is long; :data:`REDUCE`), run
serially, and its tables are stored with the wall-clock columns dropped
(:func:`stable`): ``NAME.summary.parquet`` and one file per streamed table
(``NAME.requests.parquet``, ``NAME.timeseries.parquet``). ``tests/test_golden_rows.py``
reruns them and requires equal rows. Re-record only for a change that is meant to change
results, and say which in the commit.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parent.parent
EXPERIMENTS = ROOT / "experiments"
GOLDEN = Path(__file__).resolve().parent / "data" / "golden"

#: per experiment: how many values of each matrix key to keep, and ``--set`` overrides
REDUCE: dict[str, dict[str, Any]] = {
    "quickstart": {"sets": ["workload.requests=2000"]},
    "ahab_lambda4": {"sets": ["workload.requests=150", "warmup.requests=20"]},
    "ahab_lambda12": {"sets": ["workload.requests=150", "warmup.requests=20"]},
    "ahab_lambda20": {"sets": ["workload.requests=150", "warmup.requests=20"]},
    "ahab_host_capacity": {"sets": ["workload.requests=120", "warmup.requests=20"]},
    "ahab_lookahead": {"sets": ["workload.requests=60", "warmup.requests=10",
                                "allocators.0.options.sequences=3"]},
    "deeprm_load_sweep": {"sets": ["workload.jobsets=2"]},
    "failures_fabric": {"keep": 3, "sets": ["workload.requests=100"]},
    "energy_consolidation": {"keep": 1, "sets": ["workload.requests=600",
                                                 "warmup.requests=100"]},
    "nara_table1": {"keep": 2},
    "nara_seed_spread": {"keep": 1},
    "nara_clock_ablation": {"keep": 1},
    "nara_authors_ablation": {"keep": 1},
    "nara_authors_ablation_gamma": {"keep": 1, "sets": ["workload.requests=200"]},
    "nara_learned": {"keep": 2},
    "nara_optical": {"keep": 1},
    "nara_optical_learned": {"keep": 1},
    "nara_optical_terms": {"keep": 1},
    "nara_optical_scaled": {"keep": 1, "sets": ["workload.requests=150"]},
    "nara_optical_learned_scaled": {"keep": 1, "sets": ["workload.requests=150"]},
    "vm_online_azure": {"sets": ["vm.workload.trace.limit=400", "vm.mapping.hosts=8"]},
    "vmr_static": {"keep": 2},
    "vmr2l_static": {"keep": 1, "sets": ["vm.mapping.synthetic=production_small",
                                         "vm.mapping.hosts=12"]},
    "fgd_default": {"sets": ["gpu.nodes.limit=60", "gpu.pods.limit=400"]},
    "fgd_variants": {"keep": 2, "sets": ["gpu.nodes.limit=60", "gpu.pods.limit=400"]},
    "fgd_ablation": {"sets": ["gpu.nodes.limit=60", "gpu.pods.limit=400"]},
    "fgd_ablation_workload": {"keep": 2, "sets": ["gpu.nodes.limit=60",
                                                  "gpu.pods.limit=400"]},
    "fgd_departures": {"keep": 1, "sets": ["gpu.nodes.limit=60", "gpu.arrivals.pods=600"]},
    "fgd_power": {"sets": ["gpu.nodes.limit=60", "gpu.pods.limit=400"]},
    "fgd_failures": {"sets": ["gpu.nodes.limit=60", "gpu.arrivals.pods=1500"]},
}

#: columns that measure the machine, not the simulation (and the run's id and the
#: fingerprint of the code that made it, which name rows rather than measure them)
VOLATILE = {"seconds", "wall_time_s", "decision_s", "mean_decision_s", "reschedule_seconds",
            "run_id", "code_id"}


def shipped() -> list[str]:
    """The experiments ``dcsim run`` runs (training configs have no ``allocators``-like
    plugin list and are left out)."""
    names = []
    for p in sorted(EXPERIMENTS.glob("*.yaml")):
        raw = yaml.safe_load(p.read_text())
        if isinstance(raw, dict) and any(k in raw for k in ("allocators", "schedulers",
                                                            "reschedulers", "placers",
                                                            "gpu_allocators")):
            names.append(p.stem)
    return names


def reduced_file(name: str, folder: Path) -> Path:
    """``experiments/NAME.yaml`` with its matrix cut to the first values, written into
    ``folder/experiments/`` (``folder/traces`` links to the repository's, so relative
    trace paths still resolve)."""
    how = REDUCE.get(name, {})
    raw = yaml.safe_load((EXPERIMENTS / f"{name}.yaml").read_text())
    keep = how.get("keep", 2)
    if isinstance(raw.get("matrix"), dict):
        raw["matrix"] = {k: v[:keep] for k, v in raw["matrix"].items()}
    (folder / "experiments").mkdir(parents=True, exist_ok=True)
    link = folder / "traces"
    if not link.exists():
        os.symlink(ROOT / "traces", link)
    out = folder / "experiments" / f"{name}.yaml"
    out.write_text(yaml.safe_dump(raw, sort_keys=False))
    return out


def stable(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` without the wall-clock columns, in a fixed row order, with categorical
    partition columns as plain values; the MIP's ``info`` loses its timings."""
    df = df.drop(columns=[c for c in df.columns if c in VOLATILE], errors="ignore")
    for c in df.columns:
        if isinstance(df[c].dtype, pd.CategoricalDtype):
            df[c] = df[c].astype(df[c].cat.categories.dtype)
    if "info" in df.columns:
        df["info"] = df["info"].map(_strip_times)
    keys = [c for c in ("allocator", "seed", "id", "time", "step", "jobset", "arrived_pct")
            if c in df.columns]
    rest = [c for c in df.columns if c not in keys]
    return df[keys + rest].sort_values(keys, kind="stable").reset_index(drop=True)


def _strip_times(info: Any) -> Any:
    if not isinstance(info, str):
        return info
    try:
        d = json.loads(info)
    except json.JSONDecodeError:
        return info
    if isinstance(d, dict):
        d = {k: v for k, v in d.items() if not (k.endswith("_s") or k in ("seconds", "time"))}
    return json.dumps(d, sort_keys=True)


def run_reduced(name: str, folder: Path) -> dict[str, pd.DataFrame]:
    """Run the reduced experiment serially into ``folder``; its tables, :func:`stable`."""
    from dcsim.runner import load_experiment, run_experiment

    exp = load_experiment(reduced_file(name, folder), seeds=1,
                          sets=REDUCE.get(name, {}).get("sets", []))
    out = folder / "out"
    run_experiment(exp, out=out)
    tables = {"summary": stable(pd.read_parquet(out / "summary.parquet"))}
    for kind in ("requests", "timeseries", "migrations", "vms", "jobs", "component_failures",
                 "pods"):
        if (out / kind).is_dir() and any((out / kind).rglob("*.parquet")):
            tables[kind] = stable(read_files(out / kind))
    return tables


def read_files(folder: Path) -> pd.DataFrame:
    """A hive-partitioned table read file by file, the partition values taken from the
    path: independent of how a dataset read types partition columns, and it also read the
    outputs recorded before #17, whose sweep columns could differ in type between files."""
    from urllib.parse import unquote

    frames = []
    for f in sorted(folder.rglob("*.parquet")):
        df = pd.read_parquet(f)
        for part in f.relative_to(folder).parts[:-1]:
            key, _, value = part.partition("=")
            df[key] = int(value) if key == "seed" else unquote(value)
        frames.append(df)
    return pd.concat(frames, ignore_index=True)


def record(names: list[str]) -> None:
    import tempfile

    GOLDEN.mkdir(parents=True, exist_ok=True)
    for name in names:
        with tempfile.TemporaryDirectory() as tmp:
            tables = run_reduced(name, Path(tmp))
        for old in GOLDEN.glob(f"{name}.*.parquet"):
            old.unlink()
        for kind, df in tables.items():
            df.to_parquet(GOLDEN / f"{name}.{kind}.parquet", index=False, compression="zstd")
        print(f"{name}: " + ", ".join(f"{k} {len(v)} rows" for k, v in tables.items()))


if __name__ == "__main__":
    record(sys.argv[1:] or shipped())
