"""Installing a plugin package in a test, offline."""

from __future__ import annotations

import importlib.util
from importlib.metadata import version


def can_build_offline() -> bool:
    """Whether this environment's setuptools can build a wheel without fetching anything.

    setuptools builds wheels by itself from 70.1; before that it needs the ``wheel`` package.
    Otherwise pip builds in an isolated environment, fetching setuptools from the index.
    """
    if importlib.util.find_spec("wheel") is not None:
        return True
    major, minor = (int(x) for x in version("setuptools").split(".")[:2])
    return (major, minor) >= (70, 1)
