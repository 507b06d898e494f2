"""Reading a finished ``dcsim run`` output directory back (:func:`load`).

Every table comes back as one DataFrame: the sweep parameters are columns of it (each run's
files carry them as constants, :mod:`dcsim.results.writer`), ``allocator`` and ``seed`` are
plain columns (not categoricals), and the summary keeps the plan's row order.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from dcsim.errors import ConfigError
from dcsim.results.schema import STREAMED

#: the per-request (per-job, per-VM) table of each mode
ITEM_TABLE = {"loss": "requests", "queue": "jobs", "vm_online": "vms",
              "reschedule": "migrations"}


@dataclass
class Results:
    """One experiment's results: ``summary`` (one row per run), the other tables on first
    use (:meth:`table`, :attr:`requests`, :attr:`timeseries`), the sweep parameters'
    column names (``params``, in matrix order), the mode, and the run's records."""

    path: Path
    summary: pd.DataFrame
    params: list[str]
    mode: str
    name: str
    config: dict[str, Any] = field(default_factory=dict)
    manifest: dict[str, Any] = field(default_factory=dict)

    @property
    def allocators(self) -> list[str]:
        """The labels, in the plan's order."""
        return list(dict.fromkeys(self.summary["allocator"]))

    @property
    def seeds(self) -> int:
        return int(self.summary["seed"].nunique()) if len(self.summary) else 0

    def has(self, table: str) -> bool:
        d = self.path / table
        return d.is_dir() and any(d.rglob("*.parquet"))

    def table(self, name: str) -> pd.DataFrame:
        """A streamed table (``requests``, ``timeseries``, ``jobs``, ``vms``,
        ``migrations``, ``component_failures``); an empty frame when the run wrote none."""
        if name not in STREAMED:
            raise ConfigError(f"no table {name!r}; the tables are {', '.join(STREAMED)}")
        return self._tables.setdefault(name, _read_table(self.path / name)
                                       if self.has(name) else pd.DataFrame())

    @cached_property
    def _tables(self) -> dict[str, pd.DataFrame]:
        return {}

    @property
    def requests(self) -> pd.DataFrame:
        """The mode's per-item table: requests (loss), jobs (queue), vms (vm_online) or
        migrations (reschedule)."""
        return self.table(ITEM_TABLE[self.mode])

    @property
    def timeseries(self) -> pd.DataFrame:
        return self.table("timeseries")


def _read_table(folder: Path) -> pd.DataFrame:
    df = pd.read_parquet(folder)
    for c in ("allocator", "seed"):
        if c in df.columns and isinstance(df[c].dtype, pd.CategoricalDtype):
            df[c] = df[c].astype(df[c].cat.categories.dtype)
    if "seed" in df.columns:
        df["seed"] = df["seed"].astype("int64")
    return df


def load(path: str | Path) -> Results:
    """The results in ``path`` (a ``dcsim run`` output directory); a :class:`ConfigError`
    saying what is missing when it is not one."""
    path = Path(path)
    summary_file = path / "summary.parquet"
    if not summary_file.is_file():
        why = "no such directory" if not path.is_dir() else "no summary.parquet in it"
        raise ConfigError(f"{path}: not the output of dcsim run ({why})")
    summary = pd.read_parquet(summary_file)
    manifest: dict[str, Any] = {}
    if (path / "manifest.json").is_file():
        manifest = json.loads((path / "manifest.json").read_text())
    config: dict[str, Any] = {}
    if (path / "experiment.yaml").is_file():
        config = yaml.safe_load((path / "experiment.yaml").read_text()) or {}
    params: list[str] = []
    for run in manifest.get("runs", []):
        for k in run.get("params", {}):
            if k not in params and k in summary.columns:
                params.append(k)
    name = str(manifest.get("experiment") or config.get("name") or path.name)
    return Results(path, summary, params, str(config.get("mode", "loss")), name, config,
                   manifest)
