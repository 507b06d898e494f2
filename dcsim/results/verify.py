"""A results folder checked before it is trusted: each committed run's files against what
its record says, and no symbolic link inside the folder.

A run's record (``runs/<run_id>.json``) lists, under :data:`FILES_KEY`, each file the run
committed (its path relative to the folder, its size in bytes and its SHA-256), computed
when the file was committed. :func:`verify` compares them with the folder: a file that is
missing, of another size or of other content makes the run **broken**; a record from a
dcsim that did not list files is **unverified**. ``dcsim run --resume`` runs the broken ones
again; ``dcsim report`` refuses a folder with broken runs, naming them and the command that
repairs it. (Files no finished run wrote are the report's and the resume's other check:
:mod:`dcsim.report.integrity`, :func:`dcsim.runner.execute.clean_unfinished`.)

:func:`refuse_links` refuses a folder holding a symbolic link anywhere below it, before
dcsim deletes, renames or writes anything there: a link would let ``--overwrite`` delete,
or a report write, outside the folder the user gave (the folder itself may be a link).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dcsim.errors import ConfigError

#: the key of a run's record that lists its files rather than a summary column
FILES_KEY = "files"


def file_entry(path: Path) -> dict[str, Any]:
    """``{"bytes": size, "sha256": hex digest}`` of the file at ``path``."""
    with open(path, "rb") as f:
        digest = hashlib.file_digest(f, "sha256").hexdigest()
    return {"bytes": os.path.getsize(path), "sha256": digest}


def file_problem(out: Path, rel: str, entry: dict[str, Any]) -> str | None:
    """Why ``out/rel`` is not the file ``entry`` describes, or None."""
    p = Path(out) / rel
    if p.is_symlink():
        return f"{rel} is a symbolic link"
    if not p.is_file():
        return f"{rel} is missing"
    size = p.stat().st_size
    if size != entry.get("bytes"):
        return f"{rel} has {size} bytes, {entry.get('bytes')} when it was written"
    if file_entry(p)["sha256"] != entry.get("sha256"):
        return f"{rel} changed since it was written (its SHA-256 differs)"
    return None


@dataclass
class Verification:
    """What :func:`verify` found: per broken run, why; the runs whose record lists no
    files (written by a dcsim that did not record them)."""

    broken: dict[str, str] = field(default_factory=dict)
    unverified: list[str] = field(default_factory=list)

    def describe(self, limit: int = 3) -> str:
        shown = "; ".join(f"{k}: {v}" for k, v in list(self.broken.items())[:limit])
        more = f"; and {len(self.broken) - limit} more" if len(self.broken) > limit else ""
        return f"{len(self.broken)} finished run(s) lost or changed data ({shown}{more})"


def verify(out: Path, records: dict[str, dict[str, Any]]) -> Verification:
    """Check each of ``records`` (run id → record) against the files of ``out``."""
    v = Verification()
    for run_id, record in records.items():
        files = record.get(FILES_KEY)
        if not isinstance(files, dict):
            v.unverified.append(run_id)
            continue
        for rel, entry in files.items():
            why = file_problem(Path(out), rel, entry if isinstance(entry, dict) else {})
            if why is not None:
                v.broken[run_id] = why
                break
    return v


def refuse_links(out: Path) -> None:
    """A :class:`~dcsim.errors.ConfigError` naming the first symbolic link below ``out``
    (not following any), if there is one."""
    out = Path(out)
    if not out.is_dir():
        return
    for root, dirs, files in os.walk(out, followlinks=False):
        for name in sorted(dirs + files):
            p = Path(root) / name
            if p.is_symlink():
                raise ConfigError(f"{out}: {p.relative_to(out)} is a symbolic link; dcsim "
                                  "neither deletes nor writes through links in a results "
                                  "folder (replace it with a real folder or file)")
