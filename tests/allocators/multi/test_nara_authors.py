"""The Nara authors' unstated behaviours (``zawaki/nara_revision``), each a named option of the
Nara baselines, hand-worked on tiny topologies."""

from __future__ import annotations

import numpy as np
import pytest

from dcsim import plugins
from dcsim.allocators.multi.baselines import (
    NALB,
    NARA_ALLOCATORS,
    NULB,
    RandomMulti,
    Tetris,
    bandwidth_scores,
)
from dcsim.allocators.multi.step import Partial
from dcsim.model import ClusterState, StateView
from dcsim.model.topologies import build_topology
from dcsim.modes.loss import Engine
from tests.helpers.multi import AUTHOR_OPTIONS, make, request
from tests.helpers.sources import ListSource
from tests.helpers.trees import racks_topology

#: The options the shipped Nara experiments select to run the baselines as the authors did.
AUTHORS = {
    Tetris: {"anchor": "carried", "demand": "full", "bandwidth_term": "authors_misaligned",
             "eligible": "any_free", "ties": "name"},
    NALB: {"anchor": "carried", "demand": "full", "bandwidth_term": "authors_misaligned",
           "eligible": "any_free", "search": "authors", "path_weight": "free", "ties": "name"},
    RandomMulti: {"eligible": "any_free"},
}
AUTHORS[NULB] = AUTHORS[NALB]


def fresh(topo):
    state = ClusterState(topo)
    return state, StateView(state)


# ------------------------------------------------------------------------ eligibility
def test_any_free_lets_a_server_join_with_a_zero_share_and_it_still_needs_paths():
    """Only cpu is still needed; h1 has only memory free. ``needed`` never offers h1;
    ``any_free`` does, h1 gives nothing, yet its path to h0 is checked and reserved."""
    topo = racks_topology(1, 3)
    state, view = fresh(topo)
    state.free[1] = [0.0, 10.0]
    req = request([12, 2], 1.0)
    for eligible, expect in [("needed", [0, 2]), ("any_free", [0, 1, 2])]:
        order = iter([0, 1, 2])
        alloc = make(RandomMulti, topo, view, eligible=eligible)

        def choose(partial, _view, order=order):
            for s in order:
                if partial.eligible()[s]:
                    return s
            return None
        alloc.choose = choose
        p = alloc.allocate(req, view)
        assert p.servers.tolist() == expect
        if eligible == "any_free":
            assert p.amounts.tolist() == [[10, 2], [0, 0], [2, 0]]
            assert topo.link_index("h1", "r0") in p.links.tolist()


# ------------------------------------------------------------------------ the Tetris score
def test_bandwidth_term_own_link_prefers_the_server_whose_link_is_freer():
    """Equal cpu/mem free: ``none`` ties to the lowest index, ``own_link`` takes h1, whose
    link has more free bandwidth (score + free/cap x B/cap)."""
    topo = racks_topology(1, 2, sr=2.0)
    state, view = fresh(topo)
    state.link_free[topo.link_index("h0", "r0")] = 0.5
    req = request([5, 5], 1.0)
    assert make(Tetris, topo, view, bandwidth_term="none").allocate(req, view).servers[0] == 0
    p = make(Tetris, topo, view, bandwidth_term="own_link").allocate(req, view)
    assert p.servers[0] == 1
    part = Partial(req, view, "union", True)
    assert bandwidth_scores(part, view, "own_link").tolist() == [0.5 / 2 * 1 / 2, 1 / 2]


def test_bandwidth_term_authors_misaligned_puts_links_on_rows_in_name_order():
    """12 servers h0..h11, names in lexicographic order h0 h1 h10 h11 h2 .. h9. The authors'
    rows follow that order, their link values follow server indices over the eligible servers
    only, padded with zeros in front."""
    topo = racks_topology(1, 12, sr=1.0)
    state, view = fresh(topo)
    own = np.linspace(0.1, 1.0, 12).round(2)
    for i in range(12):
        state.link_free[topo.link_index(f"h{i}", "r0")] = own[i]
    req = request([5, 5], 1.0)
    lex = [0, 1, 10, 11, 2, 3, 4, 5, 6, 7, 8, 9]
    part = Partial(req, view, "union", True)
    got = bandwidth_scores(part, view, "authors_misaligned")
    want = np.zeros(12)
    want[lex] = own  # rank k gets eligible server k
    assert np.allclose(got, want)
    # two servers ineligible (h3, h5): two leading zeros, the rest shift along
    state.free[[3, 5]] = 0.0
    part = Partial(req, StateView(state), "union", True)
    got = bandwidth_scores(part, view, "authors_misaligned")
    valid = [i for i in range(12) if i not in (3, 5)]
    want = np.zeros(12)
    want[lex[2:]] = own[valid]
    assert np.allclose(got, want)


def test_full_demand_scores_the_whole_request_not_what_remains():
    """After h0 gave all its cpu, 2 mem remain. Remaining: h1 (mem 10) beats h2 (cpu 10,
    mem 3). Full request (cpu 12): h2 scores 12*10 + 2*3 = 126 > h1's 2*10 + 12*0 = 20."""
    topo = racks_topology(1, 3)
    state, view = fresh(topo)
    state.free[0] = [10, 10]
    state.free[1] = [0, 10]
    state.free[2] = [10, 3]
    req = request([12, 4], 0.0)
    rem = make(Tetris, topo, view, demand="remaining").allocate(req, view)
    full = make(Tetris, topo, view, demand="full").allocate(req, view)
    assert rem.servers.tolist()[:2] == [0, 2]  # cpu still needed: h1 gives none
    assert full.servers.tolist()[:2] == [0, 2]
    # with any_free h1 may be picked: remaining prefers it (mem), full does not
    rem = make(Tetris, topo, view, demand="remaining", eligible="any_free")
    full = make(Tetris, topo, view, demand="full", eligible="any_free")
    state.free[0] = [12, 2]
    assert rem.allocate(req, view).servers.tolist() == [0, 1]
    assert full.allocate(req, view).servers.tolist() == [0, 2]


# ------------------------------------------------------------------------ carried anchor
def test_tetris_carried_anchor_penalises_racks_other_than_the_last_chosen_server():
    """Rack 1's servers score a little more. With the first-server anchor a new request starts
    there; with ``carried`` (the authors' last_action) a request that follows one placed in
    rack 0 stays in rack 0 (x0.9 outside it)."""
    topo = racks_topology(2, 2)
    state, view = fresh(topo)
    state.free[:2] = [9.8, 9.8]
    first = make(Tetris, topo, view, bandwidth_term="none")
    carried = make(Tetris, topo, view, bandwidth_term="none", anchor="carried")
    carried.last_tetris = 0  # as if the previous request ended on h0
    req = request([5, 5])
    assert first.allocate(req, view).servers.tolist() == [2]
    assert carried.allocate(req, view).servers.tolist() == [0]
    assert carried.last_tetris == 0


@pytest.mark.parametrize("cls", [NALB, NULB])
def test_search_first_server_carries_the_previous_requests_first_server(cls):
    """NALB/NULB's first server: with ``anchor: carried`` it is penalised outside the rack of
    the previous request's first server (the authors' tetris() keeps last_action)."""
    topo = racks_topology(2, 2)
    state, view = fresh(topo)
    state.free[:2] = [9.8, 9.8]
    plain = make(cls, topo, view, bandwidth_term="none")
    carried = make(cls, topo, view, bandwidth_term="none", anchor="carried")
    state.free[2:] = [10, 10]
    assert plain.allocate(request([5, 5], rid=1), view).servers.tolist() == [2]
    carried.last_tetris = 1
    assert carried.allocate(request([5, 5], rid=1), view).servers.tolist() == [0]
    assert carried.last_tetris == 0


# ------------------------------------------------------------------------ the authors' search
@pytest.mark.parametrize("cls", [NALB, NULB])
def test_authors_search_is_depth_first_and_offers_the_plan_backwards(cls):
    """Fabric alpha, everything free, 105 cpu from h0. Breadth-first: h0's rack (h0..h9),
    then the next rack of the pod (h10). The authors' stack pops the last pushed switch first:
    from r0 it goes up to f0_1, then to the spine and down into the other pod's last rack,
    so the 11th server is h30; the plan is then offered last found first, each server giving
    min(free, remaining), so h0 (found first) gives the last 5."""
    topo = build_topology({"kind": "fabric", "preset": "alpha"})
    state, view = fresh(topo)
    req = request([105, 10], 0.0)
    bfs = make(cls, topo, view, bandwidth_term="none", search="bfs").allocate(req, view)
    assert bfs.servers.tolist() == list(range(11))
    assert bfs.amounts[:, 0].tolist() == [10] * 10 + [5]
    auth = make(cls, topo, view, bandwidth_term="none", search="authors").allocate(req, view)
    assert auth.servers.tolist() == [30, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0]
    assert auth.amounts[:, 0].tolist() == [10] * 10 + [5]
    assert auth.amounts[:, 1].tolist() == [10] + [0] * 10


def test_authors_search_lists_servers_with_anything_free():
    """The plan lists servers with a free amount of anything (h1: memory only) even when the
    request needs cpu only; under ``eligible: any_free`` h1 joins with a zero share."""
    topo = racks_topology(1, 3)
    state, view = fresh(topo)
    state.free[1] = [0, 10]
    req = request([15, 0], 1.0)
    alloc = make(NULB, topo, view, bandwidth_term="none", search="authors", eligible="any_free")
    p = alloc.allocate(req, view)
    assert p.servers.tolist() == [2, 1, 0]
    assert p.amounts[:, 0].tolist() == [10, 0, 5]
    alloc = make(NULB, topo, view, bandwidth_term="none", search="authors")
    assert alloc.allocate(req, view).servers.tolist() == [2, 0]


# ------------------------------------------------------------------------ end to end
@pytest.mark.parametrize("cls", list(AUTHORS))
@pytest.mark.parametrize("reservation", ["union", "per_pair_channel"])
def test_engine_runs_with_the_authors_options_and_releases_everything(cls, reservation):
    """Uniform requests on alpha with every authors' option set: some span servers, some are
    rejected, nothing over-commits, and every reservation is released exactly once."""
    topo = build_topology({"kind": "fabric", "preset": "alpha"})
    rng = np.random.default_rng(3)
    n = 80
    src = ListSource(np.arange(n, dtype=float), rng.integers(1, 20, n).astype(float),
                     rng.integers(1, 51, (n, 2)), rng.uniform(0.1, 1.0, n))
    alloc = cls(cls.Options(reservation=reservation, **AUTHORS[cls]),
                rng=np.random.default_rng(1), topology=topo)
    eng = Engine(topo, src, alloc, np.random.default_rng(0))
    summary = eng.run()
    assert 0 < summary["accepted"] < n
    assert np.allclose(eng.state.free, topo.server_capacity)
    assert np.allclose(eng.state.link_free, topo.link_capacity)


def test_every_authors_option_is_a_declared_option_and_in_the_yaml_schema():
    """The options the property test draws exist on the allocators, with the documented
    default first (dcsim's own behaviour, or the aligned one for the accident)."""
    defaults = {"demand": "remaining", "bandwidth_term": "own_link", "search": "bfs",
                "path_weight": "inverse_free"}
    for cls, opts in AUTHOR_OPTIONS.items():
        fields = cls.Options.model_fields
        for name, values in opts.items():
            assert name in fields
            want = defaults.get(name, values[0])
            assert fields[name].default == want
    for cls in NARA_ALLOCATORS:
        assert plugins.get_allocator_class(cls.name) is cls
        assert cls.Options.model_fields["eligible"].default == "needed"


def test_authors_plan_that_cannot_cover_the_request_fails_cleanly():
    """Not enough cpu anywhere the search reaches: the plan runs out; servers it lists that
    give nothing needed are skipped under ``eligible: needed``, and the request fails."""
    topo = racks_topology(1, 3)
    state, view = fresh(topo)
    state.free[1] = [0, 10]
    state.free[2] = [0, 10]
    for eligible in ("needed", "any_free"):
        alloc = make(NALB, topo, view, search="authors", eligible=eligible)
        assert alloc.allocate(request([15, 0], 1.0), view) is None


def test_ties_go_to_the_lowest_index_or_the_first_name():
    """11 equal servers: ``index`` takes h1, h2, h3; ``name`` follows the authors'
    rows, names sorted as strings: h1, h10, h11, h2, ... (h0, nearly full, scores less)."""
    topo = racks_topology(1, 12)
    state, view = fresh(topo)
    state.free[0] = [1, 1]
    req = request([25, 5])
    by_index = make(Tetris, topo, view, bandwidth_term="none").allocate(req, view)
    by_name = make(Tetris, topo, view, bandwidth_term="none", ties="name").allocate(req, view)
    assert by_index.servers.tolist() == [1, 2, 3]
    assert by_name.servers.tolist() == [1, 10, 11]


# ------------------------------------------------------------------------ pair paths
def _three_servers_two_without_cpu():
    """h0 gives cpu (and 2 memory); h1 and h2 have memory only; h2's link is full, so any
    pair with h2 that needs a path fails."""
    topo = racks_topology(1, 3)
    state, view = fresh(topo)
    state.free[0] = [10, 2]
    state.free[1] = [0, 10]
    state.free[2] = [0, 10]
    state.link_free[topo.link_index("h2", "r0")] = 0.0
    return topo, view


@pytest.mark.parametrize(("pair_paths", "order", "accepted"), [
    ("all", [0, 1, 2], False),            # h2 needs a path to h0 and h1: none
    ("cpu", [0, 1, 2], False),            # h2-h0 still needs one (h0 gives cpu)
    ("authors_sticky", [1, 2], True),     # h2-h1: neither gives cpu, no path needed
    ("cpu", [1, 2], True),
    ("all", [1, 2], False),
    ("authors_sticky", [0, 1, 2], False),  # h0 checked first (gives cpu): fails
    ("authors_sticky", [1, 0, 2], True),   # h1 first sets the flag: h0 is skipped too
    ("cpu", [1, 0, 2], False),             # as meant, h2-h0 is still checked
])
def test_pair_paths_exempts_pairs_that_give_no_cpu(pair_paths, order, accepted):
    """The authors' 2022 code checks no path between two servers that both give no cpu
    (``cpu``); their loop never resets its flag, so once one earlier server gave no cpu,
    the later ones are not checked either (``authors_sticky``)."""
    topo, view = _three_servers_two_without_cpu()
    alloc = make(RandomMulti, topo, view, eligible="any_free", pair_paths=pair_paths)
    it = iter(order)
    alloc.choose = lambda partial, _view: next(it, None)
    with_h0 = 0 in order
    mem = (2 if with_h0 else 0) + 10 * (len(order) - with_h0) - 1  # the last one is needed
    p = alloc.allocate(request([10 if with_h0 else 0, mem], 1.0), view)
    assert p is None or p.servers.tolist() == order
    assert (p is not None) == accepted
    if p is not None:
        assert topo.link_index("h2", "r0") not in p.links.tolist()
