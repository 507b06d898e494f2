"""Shared fixtures (only fixtures: the builders they use live in ``tests/helpers``)."""

from __future__ import annotations

import pytest

from tests.helpers.trees import star_topology


@pytest.fixture
def star():
    return star_topology()
