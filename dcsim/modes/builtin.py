"""The built-in simulation families, registered through ``register_modes`` like a plugin's."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from dcsim.hookspecs import hookimpl

#: the built-in mode packages, in the order messages list them (``loss`` is the default)
PACKAGES = ("loss", "queue", "reschedule", "vm_online", "gpu")


@hookimpl
def register_modes(register: Callable[[object], None]) -> None:
    for package in PACKAGES:
        register(importlib.import_module(f"dcsim.modes.{package}.mode").MODE)
