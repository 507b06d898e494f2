"""Every VC embedder but KRAKEN (OKTOPUS, TETRIS, STRAWMAN): embeddings are valid and never beat
the tree DP's optimum, and all four run in the engine. Each one's own behaviour is tested
beside it (``test_oktopus.py``, ``test_tetris.py``, ``test_strawman.py``, ``test_kraken.py``)."""

from __future__ import annotations

from functools import cache

import numpy as np
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner
from hypothesis import given, settings

from dcsim.allocators.vc.embedder import make_embedder
from dcsim.cli import main
from dcsim.model.state import ClusterState, StateView
from tests.helpers.trees import fat_tree
from tests.helpers.vc import VC_TREE, random_vc_state, vc_cases, vc_workload
from tests.naive import optimal_footprint

EMBEDDERS = ["oktopus", "vc_tetris", "strawman"]


@cache
def embedder(name: str, shape: tuple[int, int, int]):
    topo, _ = fat_tree(*shape)
    e = make_embedder(name, "test", topo)
    e.setup(StateView(ClusterState(topo)))
    return e


def frozen(a: np.ndarray) -> np.ndarray:
    a = a.copy()
    a.flags.writeable = False  # embedders must not write to their inputs
    return a


# ------------------------------------------------------------------ validity (all three)
@pytest.mark.parametrize("name", EMBEDDERS)
@settings(max_examples=200, deadline=None)
@given(**vc_cases())
def test_embeddings_are_valid_and_never_beat_the_optimum(name, shape, seed, n, s, b):
    """Embeddings fit host CU and link BU, hold N VMs, cost ≥ the DP optimum; None if no DP."""
    topo, levels = fat_tree(*shape)
    free, link_free = map(frozen, random_vc_state(topo, seed))
    opt = optimal_footprint(levels, free, link_free, n, s, b)
    counts = embedder(name, shape).embed(free, link_free, n, s, b)
    if name == "oktopus":  # exact feasible-count sets: it fails only if nothing fits
        assert (counts is None) == (opt == np.inf)
    if name == "strawman" and b <= 4:  # KRAKEN underneath, which is exact
        assert (counts is None) == (opt == np.inf)
    if counts is None:
        return
    assert opt < np.inf
    loads = levels.hose_loads(counts, n, b)
    assert counts.dtype == np.int64 and counts.sum() == n and (counts >= 0).all()
    assert (counts * s <= free + 1e-9).all()
    assert (loads <= link_free + 1e-9).all()
    assert loads.sum() >= opt - 1e-9


# ------------------------------------------------------------------ end to end
VC_SMALL = {"name": "vc_small", "seed": 1, "seeds": 1, "topology": VC_TREE,
            "workload": vc_workload(requests=150, offered_load=1.5),
            "warmup": {"requests": 20},
            "allocators": ["kraken", "oktopus", "vc_tetris", "strawman"]}


def test_each_allocator_runs_in_the_engine(tmp_path):
    """The CLI runs all four on a small VC experiment: valid summaries and footprints."""
    cfg = tmp_path / "vc.yaml"
    cfg.write_text(yaml.safe_dump(VC_SMALL, sort_keys=False))
    out = tmp_path / "out"
    r = CliRunner().invoke(main, ["run", str(cfg), "--out", str(out)])
    assert r.exit_code == 0, r.output
    s = pd.read_parquet(out / "summary.parquet")
    assert len(s) == 4
    assert set(s["allocator"]) == {"kraken", "oktopus", "vc_tetris", "strawman(kraken)"}
    assert (s["acceptance_ratio"] > 0).all() and (s["acceptance_ratio"] <= 1).all()
    assert "mean_footprint" in s.columns and s["mean_footprint"].notna().all()
    req = pd.read_parquet(out / "requests")
    acc = req[req["accepted"]]
    assert len(acc) and (acc["footprint"] >= 0).all()
