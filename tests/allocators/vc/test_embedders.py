"""OKTOPUS, TETRIS (VC) and STRAWMAN: validity, the paper's behaviour, and runs in the engine."""

from __future__ import annotations

from functools import cache

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from dcsim.allocators.vc.embedder import make_embedder
from dcsim.allocators.vc.kraken import kraken_embed
from dcsim.allocators.vc.oktopus import oktopus_embed
from dcsim.allocators.vc.strawman import Strawman
from dcsim.allocators.vc.tetris import tetris_embed, tetris_rho
from dcsim.cli import main
from dcsim.errors import ConfigError
from dcsim.model.state import ClusterState, StateView
from dcsim.model.topologies import build_topology
from dcsim.model.vc import TreeLevels
from tests.helpers.trees import fat_tree
from tests.helpers.vc import random_vc_state
from tests.naive import optimal_footprint

EMBEDDERS = ["oktopus", "vc_tetris", "strawman"]


tree = fat_tree


@cache
def embedder(name: str, shape: tuple[int, int, int]):
    topo, _ = tree(*shape)
    e = make_embedder(name, "test", topo)
    e.setup(StateView(ClusterState(topo)))
    return e


def frozen(a: np.ndarray) -> np.ndarray:
    a = a.copy()
    a.flags.writeable = False  # embedders must not write to their inputs
    return a


@pytest.fixture(scope="module")
def fig1():
    topo = build_topology({"kind": "fat_tree", "preset": "ahab_fig1"})
    return topo, TreeLevels(topo)


# ------------------------------------------------------------------ validity (all three)
@pytest.mark.parametrize("name", EMBEDDERS)
@settings(max_examples=200, deadline=None)
@given(
    shape=st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(1, 4)),
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 14),
    s=st.sampled_from([1.0, 2.0, 4.0, 8.0]),
    b=st.sampled_from([0.0, 1.0, 2.0, 4.0, 8.0]),
)
def test_embeddings_are_valid_and_never_beat_the_optimum(name, shape, seed, n, s, b):
    """Embeddings fit host CU and link BU, hold N VMs, cost ≥ the DP optimum; None if no DP."""
    topo, levels = tree(*shape)
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


# ------------------------------------------------------------------ OKTOPUS
def test_oktopus_takes_the_first_subtree_that_fits(fig1):
    """Host 0 if it fits there, else the first rack, else the first pod (AHAB Fig. 1 tree)."""
    topo, levels = fig1
    free, lf = topo.server_capacity[:, 0].copy(), topo.link_capacity.copy()
    assert oktopus_embed(levels, free, lf, 2, 2, 1).tolist() == [2, 0, 0, 0, 0, 0, 0, 0]
    assert oktopus_embed(levels, free, lf, 2, 4, 2).tolist() == [1, 1, 0, 0, 0, 0, 0, 0]
    assert oktopus_embed(levels, free, lf, 3, 4, 2).tolist() == [1, 1, 1, 0, 0, 0, 0, 0]
    free[0] = 0  # host 0 busy: the next host, the rack with room, ...
    assert oktopus_embed(levels, free, lf, 2, 2, 1).tolist() == [0, 2, 0, 0, 0, 0, 0, 0]
    assert oktopus_embed(levels, free, lf, 2, 4, 2).tolist() == [0, 0, 1, 1, 0, 0, 0, 0]


def test_oktopus_fills_children_greedily_in_index_order(fig1):
    """Inside the chosen pod, the first rack takes all it can before the next gets any."""
    topo, levels = fig1
    free, lf = np.full(8, 4.0), topo.link_capacity.copy()
    counts = oktopus_embed(levels, free, lf, 10, 1, 1)  # 10 VMs of 1 CU: a pod holds 16
    assert counts.tolist() == [4, 4, 2, 0, 0, 0, 0, 0]


def test_oktopus_respects_gaps_in_the_feasible_counts(fig1):
    """A host that can take {0, 1, 4} of 5 VMs never gets the gap count 2 (interval M_v would)."""
    topo, levels = fig1
    free, lf = np.full(8, 4.0), topo.link_capacity.copy()
    free[0] = 3
    lf[levels.uplink[0][0]] = 2  # host 0: 3 slots, any of 0..3 VMs (min(3, 2) = 2)
    lf[levels.uplink[0][1]] = 1  # host 1: {0, 1, 4}
    naive = np.array([3, 2, 0, 0, 0, 0, 0, 0])  # host 0 takes its max 3, host 1 the rest
    assert levels.hose_loads(naive, 5, 1)[levels.uplink[0][1]] > 1
    assert oktopus_embed(levels, free, lf, 5, 1, 1).tolist() == [1, 4, 0, 0, 0, 0, 0, 0]


def test_oktopus_rejects_only_when_nothing_fits(fig1):
    """Too little compute, or VMs that must spread over links with no bandwidth: None."""
    topo, levels = fig1
    assert oktopus_embed(levels, np.zeros(8), topo.link_capacity.copy(), 2, 1, 1) is None
    assert oktopus_embed(levels, np.full(8, 4.0), np.zeros(14), 2, 4, 1) is None
    assert oktopus_embed(levels, np.full(8, 4.0), np.zeros(14), 2, 2, 1) is not None


# ------------------------------------------------------------------ TETRIS
def run_sequence(embed, levels, topo, vcs):
    """Embed VCs one after another, applying each embedding; final free CU and uplink BU."""
    free, lf = topo.server_capacity[:, 0].copy(), topo.link_capacity.copy()
    out = []
    for n, s, b in vcs:
        counts = embed(levels, free, lf, n, s, b)
        out.append(counts.tolist())
        free -= counts * s
        lf -= levels.hose_loads(counts, n, b)
    return out, free, lf[levels.uplink[0]]


def test_tetris_avoids_the_fragmentation_of_paper_fig2():
    """Fig. 2 (six 6-CU/6-BU hosts, R1 = (9, 1, 2) then R2 = (9, 2, 1)): KRAKEN leaves a host
    with free CU but no uplink bandwidth; TETRIS leaves none with only one resource.

    The paper's figure numbers are not in its text (only "KRAKEN puts R1 on three hosts"; our
    exact KRAKEN finds the cheaper 6 + 3), so the per-host counts asserted are this
    implementation's, worked by hand from the documented ρ rules."""
    topo, levels = tree(1, 1, 6, cpu=6, link=6)
    vcs = [(9, 1, 2), (9, 2, 1)]
    placed, free, up = run_sequence(tetris_embed, levels, topo, vcs)
    assert placed == [[2, 2, 2, 2, 1, 0], [2, 2, 2, 2, 1, 0]]
    assert not ((free > 0) & (up == 0)).any() and not ((free == 0) & (up > 0)).any()
    placed, free, up = run_sequence(kraken_embed, levels, topo, vcs)
    assert placed[0] == [6, 3, 0, 0, 0, 0]
    assert ((free > 0) & (up == 0)).any()  # stranded compute


def test_tetris_rho_edge_cases():
    """ρ = C'/B'; 0/0 = +inf (perfect fit); x/0 = -inf when B > 0; x/0 = +inf when B = 0."""
    c = np.array([3.0, 0.0, 0.0, 2.0, 4.0])
    bw = np.array([2.0, 5.0, 0.0, 0.0, 8.0])
    assert tetris_rho(c, bw, 1.0).tolist() == [1.5, 0.0, np.inf, -np.inf, 0.5]
    assert tetris_rho(c, bw, 0.0).tolist() == [1.5, 0.0, np.inf, np.inf, 0.5]


def test_tetris_rho_rules_drive_placement():
    """B = 0 spreads by C'/B_h but fills an exhausted uplink first; -inf hosts stay usable."""
    topo, levels = tree(1, 1, 2, cpu=6, link=6)
    free, lf = np.full(2, 6.0), topo.link_capacity.copy()
    assert tetris_embed(levels, free, lf, 8, 1, 0).tolist() == [4, 4]  # 5/6 vs 5/6, ...
    lf0 = lf.copy()
    lf0[levels.uplink[0][0]] = 0
    assert tetris_embed(levels, free, lf0, 8, 1, 0).tolist() == [6, 2]
    lf0 = lf.copy()
    lf0[levels.uplink[0][1]] = 0
    assert tetris_embed(levels, free, lf0, 8, 1, 0).tolist() == [2, 6]
    # (4, 1, 3) on 3-CU hosts: VM 1 -> h0 (2/3 each); VM 2 -> h1 (h0 would leave 1 CU, 0 BU:
    # -inf); VM 3: both -inf -> lowest index h0; VM 4: h0 leaves 0 CU, 3 BU (ρ = 0) > -inf
    assert tetris_embed(levels, np.full(2, 3.0), lf, 4, 1, 3).tolist() == [3, 1]


def test_tetris_single_host_then_racks_by_free_fraction(fig1):
    """Single host with most free CU, else racks by free-CU fraction; reject if CU < N·S."""
    topo, levels = fig1
    lf = topo.link_capacity.copy()
    free = np.array([2.0, 3.0, 4.0, 2.0, 4.0, 4.0, 1.0, 1.0])
    assert tetris_embed(levels, free, lf, 2, 2, 1).tolist() == [0, 0, 2, 0, 0, 0, 0, 0]
    counts = tetris_embed(levels, free, lf, 2, 4, 1)  # two hosts: rack 2 (8/8 free) first
    assert counts.tolist() == [0, 0, 0, 0, 1, 1, 0, 0]
    assert tetris_embed(levels, free, lf, 11, 2, 0) is None


# ------------------------------------------------------------------ STRAWMAN
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


# ------------------------------------------------------------------ end to end
VC_SMALL = """
name: vc_small
seed: 1
seeds: 1
topology: {kind: fat_tree, pods: 2, racks: 2, hosts: 3, server: {cpu: 8}, host_link: 8}
workload:
  requests: 150
  arrival: {process: poisson, rate: 4}
  attrs:
    N: {dist: exponential, mean: 6, integer: true, min: 2, max: 12}
    S: {dist: discrete, values: [1, 2, 4, 8], probs: [0.45, 0.30, 0.20, 0.05]}
    B: {dist: discrete, values: [1, 2, 4, 8], probs: [0.45, 0.30, 0.20, 0.05]}
  demand: {cpu: "N*S"}
  bandwidth: B
  duration: {dist: exponential, offered_load: 1.5, load_resource: cpu}
warmup: {requests: 20}
allocators: [kraken, oktopus, vc_tetris, strawman]
"""


def test_each_allocator_runs_in_the_engine(tmp_path):
    """The CLI runs all four on a small VC experiment: valid summaries and footprints."""
    cfg = tmp_path / "vc.yaml"
    cfg.write_text(VC_SMALL)
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
