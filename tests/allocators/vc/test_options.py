"""The AHAB paper's unstated details as options: host-link reservation (every embedder),
TETRIS's ρ at zero remaining bandwidth, OKTOPUS's host cap.

Here: the options and their defaults, hand-worked host-link reservations on tiny trees, the
no-over-commit / released-exactly-once properties in the engine under every option, and the
DP optimum under every host-link rule. The hand-worked cases of one embedder's own option
are beside it (``test_tetris.py``: zero bandwidth; ``test_oktopus.py``: host counts).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dcsim.allocators.vc.ahab import Ahab
from dcsim.allocators.vc.embedder import VCAllocator, make_embedder
from dcsim.allocators.vc.kraken import kraken_embed
from dcsim.allocators.vc.kraken.batch import hose_loads_batch
from dcsim.allocators.vc.oktopus import Oktopus, oktopus_embed
from dcsim.allocators.vc.strawman import Strawman
from dcsim.allocators.vc.tetris import ZERO_BANDWIDTH, VCTetris, tetris_embed
from dcsim.errors import ConfigError
from dcsim.model import ClusterState, StateView
from dcsim.model.topologies import build_topology
from dcsim.model.vc import HOST_LINK_RULES
from dcsim.modes.loss import EngineConfig
from dcsim.workload.spec import build_source
from tests.helpers.engine import run
from tests.helpers.trees import fat_tree
from tests.helpers.vc import VC_TREE, fresh, random_vc_state, vc_cases, vc_workload
from tests.naive import optimal_footprint

RULES = list(HOST_LINK_RULES)


# ------------------------------------------------------------------ options exist
def test_option_values_and_defaults():
    """Every embedder has host_link (default hose); vc_tetris zero_bandwidth (default
    least_preferred, dcsim's −inf); oktopus host_counts (default exact)."""
    assert RULES == ["hose", "per_vm", "per_vm_strict"]
    for cls in (Oktopus, VCTetris, Strawman, Ahab, make_embedder("kraken", "t").__class__):
        assert issubclass(cls, VCAllocator)
        assert cls.Options.model_fields["host_link"].default == "hose"
        with pytest.raises(ConfigError, match="host_link"):
            cls.parse_options({"host_link": "per_link"})
    assert VCTetris.Options.model_fields["zero_bandwidth"].default == "least_preferred"
    assert ZERO_BANDWIDTH == ("least_preferred", "most_preferred", "infeasible",
                              "infeasible_if_stranded")
    assert Oktopus.Options.model_fields["host_counts"].default == "exact"


def test_composers_pass_host_link_and_embed_options_on():
    """ahab/strawman give the embedder their own host_link and its embed_options; host_link
    inside embed_options is an error; labels name what differs from the defaults."""
    topo = build_topology({"kind": "fat_tree", "preset": "ahab_fig1"})
    a = Ahab(Ahab.parse_options({"embed": "vc_tetris", "host_link": "per_vm", "lookahead": 0,
                                 "embed_options": {"zero_bandwidth": "most_preferred"}}),
             topology=topo)
    assert a.label == "ahab(vc_tetris,host_link=per_vm,zero_bandwidth=most_preferred)"
    a.setup(StateView(ClusterState(topo)))
    assert a.embedder.options.host_link == "per_vm"
    assert a.embedder.options.zero_bandwidth == "most_preferred"
    s = Strawman(Strawman.parse_options({"host_link": "per_vm_strict"}), topology=topo)
    assert s.label == "strawman(kraken,host_link=per_vm_strict)"
    s.setup(StateView(ClusterState(topo)))
    assert s.embedder.options.host_link == "per_vm_strict"
    bad = Ahab(Ahab.parse_options({"embed_options": {"host_link": "per_vm"}}), topology=topo)
    with pytest.raises(ConfigError, match="host_link"):
        bad.setup(StateView(ClusterState(topo)))
    bad = Ahab(Ahab.parse_options({"embed": "kraken",
                                   "embed_options": {"zero_bandwidth": "infeasible"}}),
               topology=topo)
    with pytest.raises(ConfigError, match="zero_bandwidth"):
        bad.setup(StateView(ClusterState(topo)))


# ------------------------------------------------------------------ host-link reservation
def test_host_link_reservations_by_hand(fig1):
    """3 VMs on h0 and 1 on h4 (N = 4, B = 2): the host links reserve min(m, N − m)·B under
    hose (2 and 2), m·B per VM (6 and 2) otherwise; the links above are hose links (2)."""
    topo, levels = fig1
    counts = np.array([3, 0, 0, 0, 1, 0, 0, 0])
    h0, h4 = levels.uplink[0][0], levels.uplink[0][4]
    for rule, (a, c) in {"hose": (2, 2), "per_vm": (6, 2), "per_vm_strict": (6, 2)}.items():
        loads = levels.hose_loads(counts, 4, 2.0, rule)
        assert (loads[h0], loads[h4]) == (a, c)
        assert loads[levels.uplink[1][0]] == 2 and loads[levels.uplink[2][1]] == 2
        assert loads.sum() == a + c + 8
        batch = hose_loads_batch(levels, counts[None], np.array([4]), np.array([2.0]), rule)
        np.testing.assert_array_equal(batch[0], loads)
    one = np.array([4, 0, 0, 0, 0, 0, 0, 0])  # the whole VC on one host
    assert levels.hose_loads(one, 4, 2.0, "hose").sum() == 0
    assert levels.hose_loads(one, 4, 2.0, "per_vm").sum() == 0  # "no reservation needed"
    assert levels.hose_loads(one, 4, 2.0, "per_vm_strict")[levels.uplink[0][0]] == 8
    p = levels.placement(counts, np.array([1.0]), 4, 2.0, "per_vm")
    assert p.footprint == 16


def test_kraken_under_each_host_link_rule_by_hand(fig1):
    """VC (6, 1, 2) on fresh Fig. 1 hosts: hose puts 4 + 2 in a rack (host links 4 + 4);
    per VM a host takes at most ⌊6/2⌋ = 3, so 3 + 3 (6 + 6 BU). VC (4, 1, 2) fits one host:
    free under hose/per_vm; per_vm_strict needs 8 > 6 BU there, so 3 + 1 (6 + 2 BU)."""
    topo, levels = fig1
    free, lf = fresh(topo)
    want = {"hose": ([4, 2, 0, 0, 0, 0, 0, 0], 8), "per_vm": ([3, 3, 0, 0, 0, 0, 0, 0], 12),
            "per_vm_strict": ([3, 3, 0, 0, 0, 0, 0, 0], 12)}
    for rule, (counts, foot) in want.items():
        got = kraken_embed(levels, free, lf, 6, 1, 2, rule)
        assert got.tolist() == counts
        assert levels.hose_loads(got, 6, 2, rule).sum() == foot
        assert optimal_footprint(levels, free, lf, 6, 1, 2, rule) == foot
    for rule in ("hose", "per_vm"):
        assert kraken_embed(levels, free, lf, 4, 1, 2, rule).tolist() == [4, 0, 0, 0, 0, 0, 0, 0]
    got = kraken_embed(levels, free, lf, 4, 1, 2, "per_vm_strict")
    assert got.tolist() == [3, 1, 0, 0, 0, 0, 0, 0]
    assert levels.hose_loads(got, 4, 2, "per_vm_strict").sum() == 8


def test_oktopus_and_tetris_under_per_vm_by_hand(fig1):
    """Per VM, OKTOPUS's hosts take ⌊residual/B⌋ VMs at most: (6, 1, 2) goes 3 + 3, not
    4 + 2. TETRIS's ρ becomes the paper's (C_h − S)/(B_h − B): (4, 1, 3) on two 3-CU hosts
    with 6-BU links goes 3 + 1 under hose and 2 + 2 per VM (worked in the comments)."""
    topo, levels = fig1
    free, lf = fresh(topo)
    assert oktopus_embed(levels, free, lf, 6, 1, 2).tolist() == [4, 2, 0, 0, 0, 0, 0, 0]
    for rule in ("per_vm", "per_vm_strict"):
        assert oktopus_embed(levels, free, lf, 6, 1, 2, rule).tolist() == [3, 3, 0, 0, 0, 0,
                                                                              0, 0]
    # a VC that fits one host: free there, except per_vm_strict (8 > 6 BU: next level)
    assert oktopus_embed(levels, free, lf, 4, 1, 2, "per_vm").tolist() == [4, 0, 0, 0, 0, 0,
                                                                           0, 0]
    assert oktopus_embed(levels, free, lf, 4, 1, 2, "per_vm_strict").tolist() == [3, 1, 0, 0,
                                                                                  0, 0, 0, 0]
    topo2, lv2 = fat_tree(1, 1, 2, cpu=3, link=6)
    f2, l2 = fresh(topo2)
    # hose (m = 1, 2, 3 reserve 3, 6, 3): VM1 h0 (2/3 each); VM2 h1 (h0: 1/0 stranded, −inf);
    # VM3 both −inf, h0 (lowest index); VM4 h0 (0 CU, 3 BU left: ρ = 0) beats h1's −inf
    assert tetris_embed(lv2, f2, l2, 4, 1, 3, None, "hose").tolist() == [3, 1]
    # per VM (m reserve 3m): VM1 h0; VM2 h1 (h0 −inf); VM3 both −inf: h0; VM4 h0 would
    # need 9 > 6 BU, so h1 (−inf but feasible)
    for rule in ("per_vm", "per_vm_strict"):
        assert tetris_embed(lv2, f2, l2, 4, 1, 3, None, rule).tolist() == [2, 2]
    # a single host: no bandwidth, except per_vm_strict (N·B on the uplink)
    assert tetris_embed(lv2, f2, l2, 3, 1, 3, None, "per_vm").tolist() == [3, 0]
    assert tetris_embed(lv2, f2, l2, 2, 1, 3, None, "per_vm_strict").tolist() == [2, 0]
    assert tetris_embed(lv2, f2, l2, 3, 1, 3, None, "per_vm_strict").tolist() == [2, 1]


# ------------------------------------------------------------------ properties
@pytest.mark.parametrize("rule", RULES)
@settings(max_examples=60, deadline=None)
@given(**vc_cases(hosts=3, max_n=12))
def test_every_embedder_fits_under_its_rule_and_kraken_is_optimal(rule, shape, seed, n, s,
                                                                   b):
    """Under each host-link rule: every embedder's reservation (by the same rule) fits the
    links and hosts; KRAKEN's footprint is the DP optimum; exact OKTOPUS fails only when
    nothing fits; none beats the optimum."""
    topo, levels = fat_tree(*shape)
    free, lf = random_vc_state(topo, seed)
    opt = optimal_footprint(levels, free, lf, n, s, b, rule)
    variants = [("kraken", {}), ("oktopus", {}), ("oktopus", {"host_counts": "interval"})]
    variants += [("vc_tetris", {"zero_bandwidth": zb}) for zb in ZERO_BANDWIDTH]
    for name, extra in variants:
        e = make_embedder(name, "test", topo, options=extra, host_link=rule)
        e.setup(StateView(ClusterState(topo)))
        counts = e.embed(free, lf, n, s, b)
        if name == "kraken" or (name == "oktopus" and not extra):
            assert (counts is None) == (opt == np.inf), (name, extra)
        if counts is None:
            continue
        loads = levels.hose_loads(counts, n, b, rule)
        assert counts.sum() == n and (counts * s <= free + 1e-9).all()
        assert (loads <= lf + 1e-9).all(), (name, extra)
        assert loads.sum() >= opt - 1e-9
        if name == "kraken":
            assert loads.sum() == pytest.approx(opt)


def configurations():
    """(class, options) for every option value of every VC allocator."""
    out = []
    for rule in RULES:
        out.append((make_embedder("kraken", "t").__class__, {"host_link": rule}))
        out.append((Strawman, {"host_link": rule}))
        for hc in ("exact", "interval"):
            out.append((Oktopus, {"host_link": rule, "host_counts": hc}))
        for zb in ZERO_BANDWIDTH:
            out.append((VCTetris, {"host_link": rule, "zero_bandwidth": zb}))
    for rule, (embed, extra) in itertools.product(
            RULES, [("kraken", {}), ("oktopus", {"host_counts": "interval"}),
                    ("vc_tetris", {"zero_bandwidth": "most_preferred"}),
                    ("vc_tetris", {"zero_bandwidth": "infeasible"}),
                    ("vc_tetris", {"zero_bandwidth": "infeasible_if_stranded"})]):
        out.append((Ahab, {"embed": embed, "host_link": rule, "embed_options": extra,
                           "sequences": 3, "lookahead": 3}))
    return out


def make_checked(cls, options, topo, seed):
    """The allocator ``cls`` with ``options``, wrapped to check at every decision and
    departure that no host or link is over-committed, that each placement reserves by the
    allocator's host-link rule, and to count releases per request."""
    inner = cls(cls.parse_options(options), rng=np.random.default_rng(seed), topology=topo)

    class Wrapper(cls):
        name = "checked"

        def setup(self, view):
            inner.setup(view)

        def allocate(self, request, view):
            check(view, self.held, topo)
            choice = inner.allocate(request, view)
            if choice is not None:
                # the reservation follows the allocator's own rule
                n, b = int(request.attrs["N"]), float(request.attrs["B"])
                counts = np.zeros(topo.n_servers, dtype=np.int64)
                counts[choice.servers] = np.rint(choice.amounts[:, 0] / (request.demand[0] / n))
                want = inner.levels.hose_loads(counts, n, b, options["host_link"])
                got = np.zeros(topo.n_links)
                got[choice.links] = choice.bandwidth
                np.testing.assert_allclose(got, want)
                self.held[request.id] = choice
            return choice

        def released(self, request, placement, view):
            self.release_count[request.id] = self.release_count.get(request.id, 0) + 1
            del self.held[request.id]
            check(view, self.held, topo)

    w = Wrapper(cls.parse_options(options), topology=topo)
    w.held, w.release_count = {}, {}
    return w


def check(view, held, topo):
    """free = capacity − Σ held placements, never below 0, for hosts and links."""
    assert (view.free[:, 0] >= -1e-9).all() and (view.link_free >= -1e-9).all()
    used = np.zeros(topo.n_servers)
    link_used = np.zeros(topo.n_links)
    for p in held.values():
        used[p.servers] += p.amounts[:, 0]
        link_used[p.links] += p.bandwidth
    np.testing.assert_allclose(view.free[:, 0] + used, topo.server_capacity[:, 0], atol=1e-9)
    np.testing.assert_allclose(view.link_free + link_used, topo.link_capacity, atol=1e-9)


@pytest.mark.parametrize("cls,options", configurations(),
                         ids=lambda x: x.name if isinstance(x, type) else
                         ",".join(f"{v}" for k, v in x.items() if k in (
                             "embed", "host_link", "host_counts", "zero_bandwidth",
                             "embed_options")))
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(20, 80), rate=st.floats(1, 12))
def test_no_over_commit_and_every_reservation_released_once(cls, options, seed, n, rate):
    """Under every option: hosts and links never over-committed, each placement reserves by
    its allocator's host-link rule, each accepted VC is released exactly once, and the
    cluster ends empty."""
    topo = build_topology(VC_TREE)
    source = build_source(vc_workload(n, rate), topo)
    alloc = make_checked(cls, options, topo, seed)
    eng, _, rows = run(topo, source, alloc, EngineConfig(warmup_requests=0), seed)
    accepted = {i for i, a in zip(rows["id"], rows["accepted"], strict=True) if a}
    assert set(alloc.release_count) == accepted
    assert all(c == 1 for c in alloc.release_count.values())
    assert not alloc.held
    np.testing.assert_allclose(eng.state.free, topo.server_capacity)
    np.testing.assert_allclose(eng.state.link_free, topo.link_capacity)
