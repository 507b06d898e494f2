"""Installed ``dcsim`` entry points as a test makes them, without installing anything."""

from __future__ import annotations

import types

from dcsim import plugins


class FakeEntryPoint:
    """An installed ``dcsim`` entry point: its name, what loading it gives (or raises) and
    the distribution it belongs to."""

    def __init__(self, name, module, dist="fake-dist"):
        self.name = name
        self._module = module
        self.dist = types.SimpleNamespace(name=dist)

    def load(self):
        if isinstance(self._module, Exception):
            raise self._module
        return self._module


def fake_entry_points(monkeypatch):
    """Make the installed entry points a list the test fills (none to start with), with
    the registry forgotten before and after (the ``fake_eps`` fixture of conftest.py)."""
    eps: list[FakeEntryPoint] = []
    monkeypatch.setattr(plugins, "entry_points", lambda group: eps if group == "dcsim" else [])
    plugins.reset()
    yield eps
    plugins.reset()
