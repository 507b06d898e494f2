"""Reading a finished ``dcsim run`` output directory back (:func:`load`).

Every table comes back as one DataFrame: the sweep parameters are columns of it (each run's
files carry them as constants, :mod:`dcsim.results.writer`), ``allocator`` and ``seed`` are
plain columns (not categoricals), and the summary keeps the plan's row order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from dcsim.errors import ConfigError
from dcsim.report import integrity
from dcsim.report.integrity import ResultsError
from dcsim.results.schema import STREAMED

#: the per-request (per-job, per-VM) table of each mode
ITEM_TABLE = {"loss": "requests", "queue": "jobs", "vm_online": "vms",
              "reschedule": "migrations", "gpu": "pods"}


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
    #: what the folder lacks (planned runs not finished, a summary not written), said once
    notes: list[str] = field(default_factory=list)
    #: planned runs that did not finish: their left-over files are not read
    unfinished: set[str] = field(default_factory=set)

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
        if name not in self._tables:
            self._tables[name] = self._read(name) if self.has(name) else pd.DataFrame()
        return self._tables[name]

    def _read(self, name: str) -> pd.DataFrame:
        """Only the files of the summary's runs (:func:`integrity.run_files`); a folder
        whose summary names no runs (written by hand) is read whole."""
        folder = self.path / name
        if "run_id" not in self.summary.columns:
            try:
                return _read_table(folder)
            except (OSError, ValueError) as e:
                raise ResultsError(f"{folder}: unreadable ({integrity.one_line(e)})") \
                    from None
        files = integrity.run_files(folder, self.summary, self.unfinished)
        return _plain(integrity.read_files(folder, files, self.mode)) if files \
            else pd.DataFrame()

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
    return _plain(pd.read_parquet(folder))


def _plain(df: pd.DataFrame) -> pd.DataFrame:
    for c in ("allocator", "seed"):
        if c in df.columns and isinstance(df[c].dtype, pd.CategoricalDtype):
            df[c] = df[c].astype(df[c].cat.categories.dtype)
    if "seed" in df.columns:
        df["seed"] = df["seed"].astype("int64")
    return df


def load(path: str | Path) -> Results:
    """The results in ``path`` (a ``dcsim run`` output directory): only what its
    ``runs/`` and ``manifest.json`` say belong to its experiment (:mod:`.integrity`), with
    notes on what is missing. A :class:`ConfigError` (:class:`ResultsError`) saying what is
    wrong, naming the file, when it is not one, holds another experiment's data or cannot
    be read."""
    path = Path(path)
    manifest = integrity.read_manifest(path)
    config = integrity.read_config(path)
    if manifest.get("experiment") and config.get("name") \
            and str(config["name"]) != manifest["experiment"]:
        raise ResultsError(f"{path}: manifest.json is of experiment "
                           f"{manifest['experiment']!r}, experiment.yaml of "
                           f"{str(config['name'])!r}; one of them is another experiment's")
    known = manifest.get("experiment") or config.get("name")
    mode = str(config.get("mode", "loss"))
    summary, notes, unfinished = integrity.read_summary(
        path, manifest, str(known) if known else None, mode)
    params: list[str] = []
    for run in manifest.get("runs", []):
        for k in run.get("params", {}) or {}:
            if k not in params and k in summary.columns:
                params.append(k)
    name = str(known or path.name)
    return Results(path, summary, params, mode, name, config, manifest, notes, unfinished)
