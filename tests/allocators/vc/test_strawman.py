"""STRAWMAN: a bandwidth threshold in front of an embedder (KRAKEN unless ``embed`` says)."""

from __future__ import annotations

import numpy as np
import pytest

from dcsim.allocators.vc.embedder import make_embedder
from dcsim.allocators.vc.kraken import kraken_embed
from dcsim.allocators.vc.strawman import Strawman
from dcsim.errors import ConfigError
from dcsim.model.state import ClusterState, StateView


def test_strawman_rejects_high_bandwidth_and_delegates_the_rest(fig1):
    """B > 4 is rejected even where KRAKEN fits; otherwise the counts are KRAKEN's."""
    topo, levels = fig1
    straw = make_embedder("strawman", "test", topo)
    straw.setup(StateView(ClusterState(topo)))
    rng = np.random.default_rng(3)
    for _ in range(30):
        free = rng.integers(0, 5, 8).astype(float)
        lf = np.floor(topo.link_capacity * rng.random(topo.n_links))
        n, s = int(rng.integers(1, 8)), float(rng.choice([1, 2, 4]))
        for b in (1.0, 2.0, 4.0):
            k, got = kraken_embed(levels, free, lf, n, s, b), straw.embed(free, lf, n, s, b)
            assert (k is None and got is None) or k.tolist() == got.tolist()
    full = topo.link_capacity.copy()
    assert kraken_embed(levels, np.full(8, 4.0), full, 3, 4, 6) is not None
    assert straw.embed(np.full(8, 4.0), full, 3, 4, 6) is None
    assert straw.embed(np.full(8, 4.0), full, 1, 1, 8) is None  # even on one host


def test_strawman_options_and_label(fig1):
    """Label strawman(<embed>), threshold shown only when not 4; unknown embed names it."""
    assert Strawman.label_for(Strawman.Options()) == "strawman(kraken)"
    opts = Strawman.parse_options({"threshold": 2, "embed": "oktopus"})
    assert Strawman.label_for(opts) == "strawman(oktopus,threshold=2)"
    topo, _ = fig1
    s = Strawman(Strawman.parse_options({"threshold": 8}), topology=topo)
    s.setup(StateView(ClusterState(topo)))
    assert s.embed(np.full(8, 4.0), topo.link_capacity.copy(), 3, 4, 6) is not None
    bad = Strawman(Strawman.parse_options({"embed": "nope"}), topology=topo)
    with pytest.raises(ConfigError, match="embed"):
        bad.setup(StateView(ClusterState(topo)))

