"""Shared fixtures (only fixtures: the builders they use live in ``tests/helpers``)."""

from __future__ import annotations

import os

import pytest

from tests.helpers.entry_points import fake_entry_points
from tests.helpers.trees import star_topology

# cuBLAS reads its workspace setting when CUDA initialises: set before any test touches CUDA,
# so that the trainings' deterministic mode is bit-reproducible on a GPU machine too
# (dcsim train sets it itself; see dcsim.learn.trainer.make_deterministic)
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")


@pytest.fixture
def star():
    return star_topology()


@pytest.fixture
def fake_eps(monkeypatch):
    """The installed ``dcsim`` entry points, as the test makes them (none to start with):
    append :class:`tests.helpers.entry_points.FakeEntryPoint` objects."""
    yield from fake_entry_points(monkeypatch)
