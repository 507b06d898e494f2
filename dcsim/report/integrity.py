"""What belongs to a results folder, and nothing else: the checks :func:`dcsim.report.load`
makes so that a report never mixes in or silently drops data.

The truth of a ``dcsim run`` folder is ``runs/<run_id>.json`` (a run is finished exactly
when its json exists, :mod:`dcsim.results.writer`), ``manifest.json`` (the experiment's name
and every planned run) and ``experiment.yaml`` (its mode). From them:

* ``summary.parquet`` must hold only finished runs of the folder's experiment, each once; a
  row of another experiment or of a run not in ``runs/`` refuses the whole file (a summary
  copied in, or concatenated from two experiments);
* finished runs the summary lacks (no summary at all after kill -9, or one written before
  a later, killed ``--resume`` finished more) are read from their ``runs/*.json``, with a
  note;
* planned runs that did not finish are named in a note, with the command that runs them;
* a per-item file (``requests/allocator=…/seed=…/<run_id>.parquet``) is read only if its
  name and partition are those of a finished run; any other one is refused by name, except
  the left-overs of a planned run that never finished, which are not read;
* a finished run whose files are missing, truncated or changed since it wrote them (its
  record lists each file's size and checksum, :mod:`dcsim.results.verify`) refuses the
  folder, naming the runs and the ``--resume`` command that runs them again;
* a declared column stored with the wrong type is an error naming the column and the file,
  and every unreadable file is one :class:`ResultsError` line naming it.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from dcsim.results.reader import (  # noqa: F401  (ResultsError, read_files: re-exported)
    ResultsError,
    one_line,
    read_files,
    read_parquet,
)
from dcsim.results.stats import column
from dcsim.results.verify import verify
from dcsim.results.writer import partition_dir, summary_row

#: how many run ids a note or an error names
EXAMPLES = 3


def examples(ids: Sequence[str]) -> str:
    return ", ".join(ids[:EXAMPLES]) + (", …" if len(ids) > EXAMPLES else "")


# ------------------------------------------------------------------------------ files
def read_manifest(path: Path) -> dict[str, Any]:
    """``manifest.json`` ({} when there is none); refused unless it is a dcsim manifest."""
    f = path / "manifest.json"
    if not f.is_file():
        return {}
    try:
        m = json.loads(f.read_text())
    except (OSError, ValueError, RecursionError) as e:
        raise ResultsError(f"{f}: unreadable ({one_line(e)})") from None
    why = None
    if not isinstance(m, dict):
        why = "not a JSON object"
    elif not isinstance(m.get("runs", []), list) or not all(
            isinstance(r, dict) and isinstance(r.get("run_id"), str)
            and isinstance(r.get("params", {}), dict | None) for r in m.get("runs", [])):
        why = "'runs' is not a list of runs, each with its run_id"
    elif m.get("experiment") is not None and not isinstance(m["experiment"], str):
        why = "'experiment' is not a name"
    if why:
        raise ResultsError(f"{f}: not a dcsim manifest ({why})")
    return m


def read_config(path: Path) -> dict[str, Any]:
    """``experiment.yaml`` ({} when there is none); refused unless it is a mapping."""
    f = path / "experiment.yaml"
    if not f.is_file():
        return {}
    try:
        c = yaml.safe_load(f.read_text())
    except (OSError, ValueError, yaml.YAMLError) as e:
        raise ResultsError(f"{f}: unreadable ({one_line(e)})") from None
    if c is None:
        return {}
    if not isinstance(c, dict):
        raise ResultsError(f"{f}: not an experiment (a YAML mapping)")
    from dcsim.modes import MODES  # a plugin's mode declares its tables when registered

    if str(c.get("mode", "loss")) not in MODES:
        raise ResultsError(f"{f}: no mode {c.get('mode')!r}; the modes are "
                           f"{', '.join(MODES)} (a mode from a plugin package needs it "
                           "installed)")
    return c


def committed_runs(path: Path) -> list[str] | None:
    """The run ids with a ``runs/<run_id>.json`` (sorted), or None without ``runs/``."""
    d = path / "runs"
    if not d.is_dir():
        return None
    return sorted(p.stem for p in d.glob("*.json") if not p.name.startswith("."))


def resume_command(path: Path, manifest: dict[str, Any]) -> str:
    config = manifest.get("config_file")
    config = shlex.quote(str(config)) if config else "<its config>"
    return f"`dcsim run {config} --out {shlex.quote(str(path))} --resume`"


# ------------------------------------------------------------------------------ types
def _numbers(s: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s)


def _fits(declared: str, s: pd.Series) -> bool:
    if s.isna().all():
        return True
    if declared in ("int64", "float64"):
        return _numbers(s)
    if declared == "bool":
        return pd.api.types.is_bool_dtype(s)
    return True


def _held(s: pd.Series) -> str:
    v = s.dropna()
    kind = "text" if pd.api.types.is_object_dtype(s) or pd.api.types.is_string_dtype(s) \
        else str(s.dtype)
    return f"{kind} (e.g. {v.iloc[0]!r})" if len(v) else kind


def check_summary_types(df: pd.DataFrame, mode: str, where: Path | str) -> None:
    """Every declared column of the summary (and ``seed``) holds its declared kind of value;
    else a :class:`ResultsError` naming the column and ``where`` it came from."""
    for c in df.columns:
        decl = column(str(c), mode, "summary")
        want = "int64" if c == "seed" else (decl.type if decl is not None else None)
        if want is not None and not _fits(want, df[c]):
            raise ResultsError(
                f"{where}: column {c!r} holds {_held(df[c])}, not the {want} values "
                f"dcsim/results/schema.py declares for it, so it cannot be reported")


# ------------------------------------------------------------------------------ the summary
def _plan_order(df: pd.DataFrame, order: Sequence[str]) -> pd.DataFrame:
    if "run_id" not in df.columns or not order:
        return df.reset_index(drop=True)
    rank = {r: i for i, r in enumerate(order)}
    key = df["run_id"].map(rank).fillna(len(rank)).to_numpy()
    return df.iloc[np.argsort(key, kind="stable")].reset_index(drop=True)


def rows_from_records(path: Path, run_ids: Iterable[str], name: str | None,
                      mode: str) -> pd.DataFrame:
    """The summary rows of ``run_ids`` from their ``runs/<run_id>.json`` (what
    ``summary.parquet`` is written from), each checked to be a run of experiment ``name``."""
    rows = []
    for rid in run_ids:
        f = path / "runs" / f"{rid}.json"
        try:
            rec = json.loads(f.read_text())
        except (OSError, ValueError, RecursionError) as e:
            raise ResultsError(f"{f}: unreadable ({one_line(e)})") from None
        if not isinstance(rec, dict):
            raise ResultsError(f"{f}: not a run record (a JSON object)")
        row = summary_row(rec)
        if row.get("run_id", rid) != rid:
            raise ResultsError(f"{f}: holds run {row.get('run_id')!r}, not the run its name "
                               "says; it is not a record dcsim wrote")
        if name is not None and row.get("experiment") not in (None, name):
            raise ResultsError(f"{f}: a run of experiment {row.get('experiment')!r}, not of "
                               f"this folder's {name!r}; move it out of {path / 'runs'}")
        rows.append({**row, "run_id": rid})
    df = pd.DataFrame(rows)
    for c in df.columns:  # a column null in every run (NaN is written as null)
        if df[c].isna().all():
            df[c] = df[c].astype("float64")
    check_summary_types(df, mode, path / "runs" / "*.json")
    return df


def check_files(path: Path, committed: Iterable[str], resume: str) -> None:
    """Refuse the folder when a finished run's files are missing or changed since they
    were written (:mod:`dcsim.results.verify`), naming the runs and the command that runs
    them again."""
    records = {}
    for rid in committed:
        f = path / "runs" / f"{rid}.json"
        try:
            rec = json.loads(f.read_text())
        except (OSError, ValueError, RecursionError) as e:
            raise ResultsError(f"{f}: unreadable ({one_line(e)}); {resume} runs that run "
                               "again") from None
        if not isinstance(rec, dict):
            raise ResultsError(f"{f}: not a run record (a JSON object); {resume} runs that "
                               "run again")
        records[rid] = rec
    check = verify(path, records)
    if check.broken:
        raise ResultsError(f"{path}: {check.describe()}; the report would show them "
                           f"incomplete. {resume} runs them again")


def read_summary(path: Path, manifest: dict[str, Any], name: str | None, mode: str
                 ) -> tuple[pd.DataFrame, list[str], set[str]]:
    """The folder's summary, checked (see the module), the notes on what it lacks, and the
    planned runs that did not finish (whose left-over files are not read)."""
    planned = [r["run_id"] for r in manifest.get("runs", [])]
    committed = committed_runs(path)
    if committed is not None:
        finished: set[str] | None = set(committed)
    elif planned:  # no runs/: what the manifest says finished
        finished = {r["run_id"] for r in manifest["runs"] if r.get("finished")}
    else:  # a folder without runs/ or a manifest that lists runs: nothing to check against
        finished = None
    resume = resume_command(path, manifest)
    notes: list[str] = []
    f = path / "summary.parquet"
    if f.is_file():
        summary = read_parquet(f)
        check_summary_types(summary, mode, f)
        _check_rows(summary, f, finished, name, path)
        have = set(summary["run_id"]) if "run_id" in summary.columns else set()
        rank = {r: i for i, r in enumerate(planned)}
        extra = sorted((r for r in committed or [] if r not in have),
                       key=lambda r: rank.get(r, len(rank)))
        if extra:
            more = rows_from_records(path, extra, name, mode)
            summary = _plan_order(pd.concat([summary, more], ignore_index=True), planned)
            notes.append(
                f"summary.parquet lacks {len(extra)} finished run(s) (e.g. "
                f"{examples(extra)}): the `dcsim run` that finished them was stopped before "
                f"its end; they are read from runs/<run_id>.json, and {resume} rewrites "
                "summary.parquet")
    else:
        if not committed:
            if planned:
                raise ResultsError(
                    f"{path}: no run has finished yet (0 of {len(planned)} planned); "
                    f"{resume} runs them")
            why = "no such directory" if not path.is_dir() else "no summary.parquet in it"
            raise ResultsError(f"{path}: not the output of dcsim run ({why})")
        summary = _plan_order(rows_from_records(path, committed, name, mode), planned)
        notes.append(
            f"no summary.parquet: the `dcsim run` that wrote these {len(committed)} finished "
            f"run(s) was stopped before its end (killed?), so they are read from "
            f"runs/<run_id>.json; {resume} writes it")
    done = set(summary["run_id"]) if "run_id" in summary.columns else None
    unfinished: set[str] = set()
    if done is not None and planned:
        missing = [r for r in planned if r not in done]
        unfinished = set(missing)
        if missing:
            failed = [r["run_id"] for r in manifest["runs"]
                      if r["run_id"] in unfinished and r.get("error")]
            why = (f"; {len(failed)} of them failed, see {path / 'failures.jsonl'}"
                   if failed else "")
            notes.append(f"{len(missing)} of {len(planned)} planned runs are missing (e.g. "
                         f"{examples(missing)}{why}); {resume} runs them")
        unlisted = sorted(done - set(planned))
        if unlisted:
            notes.append(
                f"manifest.json does not list {len(unlisted)} finished run(s) (e.g. "
                f"{examples(unlisted)}): a later `dcsim run` into this folder was stopped "
                "before its end, so the runs it planned are not known")
    elif done is not None and not manifest and committed is not None:
        notes.append("no manifest.json: the `dcsim run` that wrote this folder was stopped "
                     "before its end, so which runs it planned is not known; "
                     f"{resume} finishes it")
    if committed:
        check_files(path, committed, resume)
    return summary, notes, unfinished


def _check_rows(summary: pd.DataFrame, f: Path, finished: set[str] | None,
                name: str | None, path: Path) -> None:
    """Every row of ``summary.parquet`` is a finished run of experiment ``name``, once."""
    bad = pd.Series(False, index=summary.index)
    if name is not None and "experiment" in summary.columns:
        bad |= summary["experiment"].astype(str) != name
    if finished is not None:
        if "run_id" not in summary.columns:
            raise ResultsError(f"{f}: no run_id column, so its rows cannot be told to be "
                               "this folder's runs; it is not a summary dcsim run wrote")
        bad |= ~summary["run_id"].isin(finished)
    if bad.any():
        row = summary[bad].iloc[0]
        what = f"run {row['run_id']!r}" if "run_id" in row.index else "a run"
        if "experiment" in row.index:
            what += f" of experiment {row['experiment']!r}"
        theirs = f"experiment {name!r}" if name is not None else "this folder"
        raise ResultsError(
            f"{f}: {int(bad.sum())} of its {len(summary)} rows are not finished runs of "
            f"{theirs} in {path / 'runs'} (e.g. {what}); it is another experiment's summary "
            "or a mix: move it away and the report reads the finished runs from runs/")
    for key in ("allocator", "seed", "run_id"):   # what every row is told apart by
        if key in summary.columns and summary[key].isna().any():
            raise ResultsError(f"{f}: column {key!r} is empty in "
                               f"{int(summary[key].isna().sum())} of its {len(summary)} "
                               "rows; it is not a summary dcsim run wrote: move it away and "
                               "the report reads the finished runs from runs/")
    if "run_id" in summary.columns and summary["run_id"].duplicated().any():
        dup = summary.loc[summary["run_id"].duplicated(), "run_id"].iloc[0]
        raise ResultsError(f"{f}: run {dup!r} has more than one row; it is not a summary "
                           "dcsim run wrote: move it away and the report reads the finished "
                           "runs from runs/")


# ------------------------------------------------------------------------------ item tables
def _hidden(p: Path, folder: Path) -> bool:
    return any(part.startswith((".", "_")) for part in p.relative_to(folder).parts)


def run_files(folder: Path, runs: pd.DataFrame, unfinished: set[str]) -> list[Path]:
    """The Parquet files of ``folder`` (a streamed table) that belong to the finished
    ``runs`` (``run_id``, ``allocator``, ``seed`` columns), in path order; a file of no
    finished run is a :class:`ResultsError`, unless it is a left-over of an ``unfinished``
    planned run (then it is not read)."""
    expected = {folder / partition_dir(str(a), int(s)) / f"{r}.parquet"
                for r, a, s in zip(runs["run_id"], runs["allocator"], runs["seed"],
                                   strict=True)}
    files = []
    for p in sorted(folder.rglob("*.parquet"), key=str):
        if _hidden(p, folder):
            continue  # a run's temporaries, never data (pyarrow skips them too)
        if p in expected:
            files.append(p)
        elif p.stem not in unfinished:
            raise ResultsError(
                f"{p}: not a file of any of this experiment's {len(expected)} finished runs "
                f"(runs/<run_id>.json, each with its files at {folder.name}/allocator="
                "<label>/seed=<i>/<run_id>.parquet); reading it would mix its rows into "
                "theirs: move it out of the results folder")
    return files
