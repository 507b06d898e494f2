"""Which code made a result: dcsim's own source, the plugin distributions a run used and the
versions of the libraries that shape results, folded into one short ``code_id`` per run.

- dcsim: its version; the git commit and whether the package's files differ from it, when
  the package sits in a git checkout (None otherwise); and a sha256 of the package's files
  either way (every file under ``dcsim/`` but ``__pycache__``, shipped checkpoints
  included), so an edit shows even without git.
- a plugin from another distribution: its name, version and a hash of its module files
  (:func:`modules_hash`); built-in plugins are covered by dcsim's hash.
- :data:`LIBRARIES`: the installed versions (None when not installed), read from the
  package metadata, so nothing is imported to learn them.

dcsim's fingerprint, the versions and each plugin's hash are computed once per process
(:func:`reset` forgets them). The runner decides which plugins a run uses
(``dcsim.runner.fingerprint``); this module only hashes.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import subprocess
from collections.abc import Iterable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

#: the libraries whose version can change a run's rows
LIBRARIES = ("numpy", "scipy", "pandas", "pyarrow", "simpy", "numba", "torch", "networkx")

#: the ``dcsim`` package directory
PACKAGE_DIR = Path(__file__).resolve().parents[1]

#: how long a ``git`` call may take before the commit is recorded as unknown
GIT_TIMEOUT_S = 5.0


@functools.cache
def installed_version(dist: str) -> str | None:
    """The installed version of distribution ``dist``; None if it is not installed."""
    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def _files(root: Path) -> list[Path]:
    """Every file under ``root`` except compiled Python (``__pycache__``, ``*.pyc``)."""
    return [p for p in root.rglob("*")
            if p.is_file() and "__pycache__" not in p.relative_to(root).parts
            and p.suffix != ".pyc"]


def _update(digest: Any, name: str, path: Path) -> None:
    digest.update(name.encode() + b"\0")
    digest.update(hashlib.sha256(path.read_bytes()).digest())


def tree_hash(root: str | os.PathLike) -> str:
    """sha256 of the files under ``root`` (see :func:`_files`): each file's path relative to
    ``root`` and content, in order of path. Where ``root`` sits does not matter."""
    root = Path(root)
    digest = hashlib.sha256()
    for rel, path in sorted((p.relative_to(root).as_posix(), p) for p in _files(root)):
        _update(digest, rel, path)
    return digest.hexdigest()


def git_state(folder: str | os.PathLike) -> dict[str, Any]:
    """``{"commit", "dirty"}`` of the git checkout ``folder`` is tracked in: the commit
    checked out, and whether files under ``folder`` differ from it (untracked ones
    included). Both None when ``folder`` is not tracked by git (an installed copy, no
    ``git`` program, a call that fails or takes longer than :data:`GIT_TIMEOUT_S`)."""
    unknown: dict[str, Any] = {"commit": None, "dirty": None}
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}  # never take the index lock

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", *args], cwd=folder, env=env, capture_output=True,
                                  text=True, timeout=GIT_TIMEOUT_S)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout if done.returncode == 0 else None

    # the folder's own files must be tracked: a package installed into a virtual
    # environment that happens to sit inside some other checkout is not that checkout's
    if not git("ls-files", "--error-unmatch", "--", "."):
        return unknown
    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--", ".")
    if commit is None or status is None:
        return unknown
    return {"commit": commit.strip(), "dirty": bool(status.strip())}


@functools.cache
def dcsim_code() -> dict[str, Any]:
    """dcsim's fingerprint: ``version``, ``commit``, ``dirty``, ``source_hash``."""
    return {"version": installed_version("dcsim") or "0.0.0", **git_state(PACKAGE_DIR),
            "source_hash": tree_hash(PACKAGE_DIR)}


@functools.cache
def libraries() -> dict[str, str | None]:
    """The installed version of each of :data:`LIBRARIES` (None: not installed)."""
    return {name: installed_version(name) for name in LIBRARIES}


def module_files(module: str) -> list[tuple[str, Path]]:
    """The files of ``module``'s code, each with its name for hashing: every file of a
    package (as :func:`tree_hash` takes them, named ``module/relative path``), or the file
    of a plain module (named ``module``); empty when it has none (built into Python, made
    at run time, not found)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return []
    if spec is None:
        return []
    if spec.submodule_search_locations is not None:  # a package (a namespace one: all parts)
        return sorted((f"{module}/{p.relative_to(root).as_posix()}", p)
                      for root in map(Path, spec.submodule_search_locations)
                      for p in _files(root))
    if spec.origin and os.path.isfile(spec.origin):
        return [(module, Path(spec.origin))]
    return []


@functools.cache
def modules_hash(modules: tuple[str, ...]) -> str | None:
    """sha256 of the code of ``modules`` (:func:`module_files`); None when none of them
    has files."""
    files = sorted(f for module in set(modules) for f in module_files(module))
    if not files:
        return None
    digest = hashlib.sha256()
    for name, path in files:
        _update(digest, name, path)
    return digest.hexdigest()


def code_id(dcsim_hash: str, plugins: Iterable[dict[str, Any]],
            library_versions: dict[str, str | None]) -> str:
    """12 hex digits of a sha256 over dcsim's source hash, the hashes of the plugins a run
    used (by kind, name and distribution) and the library versions."""
    key = {
        "dcsim": dcsim_hash,
        "plugins": sorted([p["kind"], p["name"], p["distribution"], p["source_hash"]]
                          for p in plugins),
        "libraries": dict(sorted(library_versions.items())),
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]


def reset() -> None:
    """Forget the fingerprints computed so far (tests; after editing code at run time)."""
    installed_version.cache_clear()
    dcsim_code.cache_clear()
    libraries.cache_clear()
    modules_hash.cache_clear()
