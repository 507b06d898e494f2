"""The scale of the Tetris score (issue #32): dcsim's scale-free reading (``own_link``,
``authors_misaligned``: every term divided by the capacity squared) against the Nara
authors' arithmetic (``own_raw``, ``authors_raw``: node terms / 100, raw free channels),
hand-worked on a tiny optical topology; the two coincide on the 2021 topologies."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dcsim.allocators.multi.baselines import (
    AUTHORS_NODE_SCALE,
    NALB,
    NULB,
    RandomMulti,
    Tetris,
    bandwidth_scores,
    node_weights,
)
from dcsim.allocators.multi.rack_search import TetrisSearch
from dcsim.allocators.multi.step import Partial
from dcsim.cli import main
from dcsim.model import ClusterState, StateView
from dcsim.model.topologies import build_topology
from dcsim.modes.loss import EngineConfig
from tests.helpers.engine import checked, run
from tests.helpers.multi import make, request
from tests.helpers.sources import ListSource

EXPERIMENTS = Path(__file__).resolve().parents[3] / "experiments"


def tiny_optical(servers: int = 2, channels: int = 8):
    """One rack of ``servers`` 16-unit servers, ``channels`` per server link."""
    return build_topology({"kind": "optical", "pods": 1, "racks": 1, "servers": servers,
                           "tier2": 1, "tier3": 1, "channels": channels})


def fresh(topo):
    state = ClusterState(topo)
    return state, StateView(state)


# ------------------------------------------------------------------------ hand-worked
def test_raw_scale_lets_free_channels_outweigh_free_cpu_on_an_optical_topology():
    """Request: 8 cpu, 8 mem, 1 channel. h0: all 16/16 free, 2 of its 8 channels free; h1:
    12/12 free, all 8 channels free.

    own_link: h0 = (16·8 + 16·8)/16² + 2/8 · 1/8 = 1.03125, h1 = (12·8 + 12·8)/16² + 8/8 ·
    1/8 = 0.875: h0, the emptier server, wins (the link term is at most 1/8).
    own_raw: h0 = (16·8 + 16·8)/100 + 2·1 = 4.56, h1 = 1.92 + 8 = 9.92: h1, the server whose
    link is free, wins (the authors' code: free channels count one each)."""
    topo = tiny_optical()
    state, view = fresh(topo)
    state.free[1] = [12.0, 12.0]
    state.link_free[topo.link_index("h0", "r0")] = 2.0
    req = request([8, 8], 1.0)
    part = Partial(req, view, "per_pair_channel", True)
    assert bandwidth_scores(part, view, "own_link").tolist() == [2 / 8 / 8, 1 / 8]
    assert bandwidth_scores(part, view, "own_raw").tolist() == [2.0, 8.0]
    # two servers: names h0, h1 sort as their indices, so the authors' rows line up
    assert bandwidth_scores(part, view, "authors_raw").tolist() == [2.0, 8.0]
    picks = {}
    for term in ("none", "own_link", "authors_misaligned", "own_raw", "authors_raw"):
        alloc = make(Tetris, topo, view, bandwidth_term=term, demand="full",
                     reservation="per_pair_channel")
        picks[term] = alloc.allocate(req, view).servers[0]
    assert picks == {"none": 0, "own_link": 0, "authors_misaligned": 0, "own_raw": 1,
                     "authors_raw": 1}


def test_raw_node_term_is_free_times_demand_over_100_whatever_the_capacity():
    """16-unit servers: the node factor is the authors' constant (1/10)², not 1/16²; so a
    request of 8/8 scores 16·8·2/100 = 2.56 on an empty server (no bandwidth)."""
    topo = tiny_optical()
    _, view = fresh(topo)
    assert np.array_equal(node_weights(view, "own_raw"), np.full((2, 2), 0.1 ** 2))
    assert np.array_equal(node_weights(view, "own_link"), np.full((2, 2), 1 / 256))
    from dcsim.allocators.multi.baselines import tetris_scores

    part = Partial(request([8, 8], 0.0), view, "per_pair_channel", False)
    got = tetris_scores(part, view, node_weights(view, "authors_raw"), demand="full",
                        bandwidth_term="authors_raw", anchor="none")
    assert got.tolist() == pytest.approx([2.56, 2.56])


def test_authors_raw_puts_the_raw_link_values_on_rows_in_name_order():
    """12 servers, names sorted h0 h1 h10 h11 h2 .. h9; two ineligible (h3, h5): rank k
    gets eligible server k - 2's raw free channels (zero for the first two ranks), exactly as
    authors_misaligned places own_link's values."""
    topo = tiny_optical(servers=12, channels=32)
    state, view = fresh(topo)
    free_ch = np.arange(12, dtype=float) + 10.0
    for i in range(12):
        state.link_free[topo.link_index(f"h{i}", "r0")] = free_ch[i]
    state.free[[3, 5]] = 0.0
    part = Partial(request([5, 5], 2.0), StateView(state), "union", True)
    lex = [0, 1, 10, 11, 2, 3, 4, 5, 6, 7, 8, 9]
    valid = [i for i in range(12) if i not in (3, 5)]
    want = np.zeros(12)
    want[lex[2:]] = free_ch[valid] * 2.0
    assert bandwidth_scores(part, view, "authors_raw").tolist() == want.tolist()
    scaled = np.zeros(12)
    scaled[lex[2:]] = free_ch[valid] / 32 * (2.0 / 32)
    assert np.allclose(bandwidth_scores(part, view, "authors_misaligned"), scaled)


def test_nalb_first_pick_follows_the_raw_scale_too():
    """NALB and NULB take their first server by the Tetris score: under own_raw the server
    with free channels, under own_link the emptier one."""
    topo = tiny_optical()
    state, view = fresh(topo)
    state.free[1] = [12.0, 12.0]
    state.link_free[topo.link_index("h0", "r0")] = 2.0
    req = request([20, 20], 1.0)
    for cls in (NALB, NULB):
        for term, first in (("own_link", 0), ("own_raw", 1)):
            p = make(cls, topo, view, bandwidth_term=term, demand="full",
                     reservation="per_pair_channel").allocate(req, view)
            assert p.servers[0] == first, (cls.name, term)


def test_rack_search_leaves_the_raw_terms_to_the_full_scan():
    topo = build_topology({"kind": "optical", "preset": "scaled", "channels": 8})
    _, view = fresh(topo)
    for term, indexed in (("own_link", True), ("none", True), ("own_raw", False),
                          ("authors_raw", False), ("authors_misaligned", False)):
        alloc = make(Tetris, topo, view, bandwidth_term=term)
        assert (TetrisSearch.build(alloc, view) is not None) == indexed, term


# ------------------------------------------------------------------------ 2021 topologies
def test_on_ten_unit_servers_the_raw_node_factor_is_the_same_float():
    view = StateView(ClusterState(build_topology({"kind": "fabric", "preset": "alpha"})))
    assert AUTHORS_NODE_SCALE == 0.1
    assert np.array_equal(node_weights(view, "authors_raw"), view.inv_capacity ** 2)


@pytest.mark.parametrize("preset", ["alpha", "beta"])
def test_authors_raw_gives_exactly_the_rows_of_authors_misaligned_on_2021_topologies(
        tmp_path, preset):
    """10-unit servers and capacity-1 server links: the authors' arithmetic and dcsim's
    scale-free one are the same floats, so Table 1's experiment gives the same rows (every
    request's servers, amounts and links) for Tetris, NALB and NULB, both request sets."""
    d = yaml.safe_load((EXPERIMENTS / "nara_table1.yaml").read_text())
    (key,) = d["matrix"]
    d["matrix"] = {key: [row for row in d["matrix"][key] if row[1] == preset
                         and row[0]["name"] in ("uniform", "azure")]}
    for row in d["matrix"][key]:
        row[0] = dict(row[0])
        if "trace" in row[0]:
            trace = row[0]["trace"]
            trace["path"] = str((EXPERIMENTS / trace["path"]).resolve())
    allocators = []
    for a in d["allocators"]:
        if isinstance(a, dict) and a["name"] in ("tetris", "nalb", "nulb"):
            assert a["options"]["bandwidth_term"] == "authors_misaligned"
            allocators.append(a)
            allocators.append({**a, "label": a["label"] + "_raw",
                               "options": {**a["options"], "bandwidth_term": "authors_raw"}})
    d["allocators"] = allocators
    d["seeds"] = 2
    cfg = tmp_path / "t1.yaml"
    cfg.write_text(yaml.safe_dump(d, sort_keys=False))
    r = CliRunner().invoke(main, ["run", str(cfg), "--out", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    rows = pd.read_parquet(tmp_path / "out" / "requests")
    key = ["workload", "seed", "id"]
    cols = [*key, "accepted", "start", "end", "servers", "n_servers", "footprint",
            "locality"]
    for name in ("tetris", "nalb", "nulb"):
        a = rows[rows["allocator"] == name][cols].sort_values(key).reset_index(drop=True)
        b = rows[rows["allocator"] == name + "_raw"][cols].sort_values(key).reset_index(
            drop=True)
        assert len(a) == len(b) > 200
        assert a.astype(str).equals(b.astype(str)), name
        assert a["accepted"].mean() < 1.0   # some requests fail: the scores were tested


# ------------------------------------------------------------------------ properties
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 50),
       cls=st.sampled_from([Tetris, NALB, NULB, RandomMulti]),
       term=st.sampled_from(["own_raw", "authors_raw"]),
       reservation=st.sampled_from(["union", "per_pair_channel"]),
       eligible=st.sampled_from(["needed", "any_free"]),
       pair_paths=st.sampled_from(["all", "authors_sticky"]),
       departures=st.sampled_from(["before_arrivals", "after_first_step"]))
def test_raw_terms_never_over_commit_and_release_each_request_once(
        seed, n, cls, term, reservation, eligible, pair_paths, departures):
    """The authors' arithmetic on a tiny optical topology (2 racks of 3 16-unit servers, 2
    channels per server link), on the authors' clock or dcsim's: free cpu, memory and
    channels stay within [0, capacity] at every choice, every accepted request is released
    exactly once, and the cluster ends empty."""
    topo = build_topology({"kind": "optical", "pods": 1, "racks": 2, "servers": 3,
                           "tier2": 1, "tier3": 1, "channels": 2, "oversubscription": "1:4"})
    rng = np.random.default_rng(seed)
    src = ListSource(np.arange(n, dtype=float), rng.integers(1, 8, n).astype(float),
                     rng.integers(0, 40, (n, 2)), rng.choice([0.0, 1.0], n))
    options = {"reservation": reservation, "eligible": eligible, "pair_paths": pair_paths}
    if cls is not RandomMulti:
        options |= {"bandwidth_term": term, "demand": "full", "ties": "name",
                    "anchor": "carried"}
    alloc_cls = checked(cls)
    alloc = alloc_cls(alloc_cls.Options(**options), rng=np.random.default_rng(seed + 1),
                      topology=topo)
    eng, summary, rec = run(topo, src, alloc,
                            EngineConfig(capacity="wait", departures=departures))
    rows = pd.DataFrame(rec)
    assert eng.released == eng.accepted == int(rows["accepted"].sum())
    assert np.allclose(eng.state.free, topo.server_capacity)
    assert np.allclose(eng.state.link_free, topo.link_capacity)
    assert summary["received"] == n
