"""Installing a plugin package in a test, offline."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path


def can_build_offline() -> bool:
    """Whether this environment's setuptools can build a wheel without fetching anything.

    A virtual environment of Python 3.12 or later has no setuptools unless installed (the
    ``dev`` extra does); setuptools builds wheels by itself from 70.1, before that with the
    ``wheel`` package. Otherwise pip builds in an isolated environment, fetching setuptools
    from the index.
    """
    if importlib.util.find_spec("setuptools") is None:
        return False
    if importlib.util.find_spec("wheel") is not None:
        return True
    major, minor = (int(x) for x in version("setuptools").split(".")[:2])
    return (major, minor) >= (70, 1)


def install_into(src: Path, target: Path) -> Path:
    """``pip install`` the package in ``src`` into the folder ``target`` (no dependencies,
    offline where the environment can build without fetching); ``target``."""
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
           str(target), str(src)]
    if can_build_offline():
        cmd.insert(-1, "--no-build-isolation")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return target


def run_with(site: Path, cwd: Path, *args: str, **env: str):
    """``python *args`` in ``cwd`` with the folder ``site`` (an installed plugin) first on
    PYTHONPATH and ``DCSIM_PLUGINS`` unset unless ``env`` sets it."""
    import os

    environ = {k: v for k, v in os.environ.items() if k != "DCSIM_PLUGINS"}
    environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    environ.update(env)
    return subprocess.run([sys.executable, *args], cwd=cwd, env=environ, capture_output=True,
                          text=True, timeout=120)


def install_copy(plugin: Path, tmp: Path) -> Path:
    """Install the plugin package in the folder ``plugin`` from a copy of its source in
    ``tmp`` (so that no build/ is left in the repository); the folder it went into."""
    import shutil

    src = tmp / "src"
    shutil.copytree(plugin, src, ignore=shutil.ignore_patterns(
        "build", "*.egg-info", "__pycache__", ".pytest_cache"))
    return install_into(src, tmp / "site")
