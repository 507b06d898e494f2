"""Fixtures of the virtual-cluster tests."""

from __future__ import annotations

import pytest

from tests.helpers.trees import ahab_tree


@pytest.fixture
def fig1():
    """AHAB Fig. 1: 2 pods x 2 racks x 2 hosts of 4 CU; links 6 / 12 / 24 BU (and its
    TreeLevels)."""
    return ahab_tree("ahab_fig1")
