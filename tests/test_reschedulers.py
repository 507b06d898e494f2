"""VM reschedulers: hand-computed greedy and α-VBPP steps, MIP ≤ greedy on small instances,
move sequencing with cycles, the static ``reschedule`` logic and registration."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from scipy.optimize import OptimizeResult

from dcsim.errors import ConfigError, PluginError
from dcsim.modes.reschedule.command import MIGRATION_COLUMNS, reschedule_file, rescheduler_class
from dcsim.reschedulers import Plan, Rescheduler, sequence_moves
from dcsim.reschedulers import mip as rmip
from dcsim.reschedulers.builtin import (
    MIP,
    RESCHEDULERS,
    AlphaVBPP,
    Greedy,
    insertion_gains,
    register_reschedulers,
    removal_gains,
)
from dcsim.vm import BOTH, VM, Host, MappingState, Migration
from dcsim.vm.mapping_io import load_mapping, parse_mapping
from dcsim.vm.synthetic import synthetic_mapping, synthetic_preset

DATA = Path(__file__).parent / "data" / "vmr"


def hosts3():
    return [Host(f"h{i}", (44, 44), (100, 100)) for i in range(3)]


def greedy_state(order=("v0", "w")) -> MappingState:
    """Free cpu per (host, NUMA):
        h0: NUMA0 12 (big28 + v0 4), NUMA1 0 (big44)
        h1: NUMA0 4 (big40),          NUMA1 8 (big36)
        h2: NUMA0 12 (big28b + w 4), NUMA1 44 (empty)
    Fragment = 12+0+4+8+12+12 = 48 of 80 free -> FR 0.6.
    v0 and w (4 cores each) both gain 12 when removed (12 -> 16); the big VMs are > 16
    cores so the greedy never picks them. ``order`` sets v0/w's input order."""
    small = {"v0": (VM("v0", 4, 0), (0, 0)), "w": (VM("w", 4, 0), (2, 0))}
    vms = [VM("big28", 28, 0), VM("big44", 44, 0), VM("big40", 40, 0), VM("big36", 36, 0),
           VM("big28b", 28, 0)]
    place = [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0)]
    for name in order:
        vms.append(small[name][0])
        place.append(small[name][1])
    s = MappingState(hosts3(), vms, place)
    assert s.free_cpu.tolist() == [[12, 0], [4, 8], [16 - 4 * ("w" in order), 44]]
    return s


def test_gains_by_hand():
    s = greedy_state()
    k = s.vm_index["v0"]
    assert removal_gains(s)[k] == 12  # h0 NUMA0 12 -> 16: 12 - 0
    assert removal_gains(s)[s.vm_index["big28"]] == 4  # 12 -> 40: 12 - 8
    g = insertion_gains(s, k)
    # own host h0 excluded; h1 NUMA0 4 -> 0: +4; h1 NUMA1 8 -> 4: +4;
    # h2 NUMA0 12 -> 8: +4; h2 NUMA1 44 -> 40: 12 - 8 = +4
    assert g[1:].tolist() == [[4, 4], [4, 4]]
    assert (g[0] < -10**9).all()


def test_greedy_hand_computed_and_early_stop():
    s = greedy_state()
    plan = Greedy().reschedule(s, 5)
    # step 1: v0 and w tie at +12; v0 comes first in input order. Destinations all +4;
    #   first is h1 NUMA0. Fragment 48 -> 32: (h0N0 16, h1N0 0).
    # step 2: v0 now gains -4 (h1N0 0 -> 4), w still +12: w. Destinations: h0 NUMA0
    #   16 -> 12 gives 0 - 12 = -12, h1 NUMA1 8 -> 4: +4 (the best) -> total 16 > 0: move.
    #   Fragment 32 -> 16. Free: h0 [16, 0], h1 [0, 4], h2 [16, 44].
    # step 3: candidates v0 on h1N0 (0 -> 4: -4), w on h1N1 (4 -> 8: -4): v0 first;
    #   best destination +4 at most (h2 NUMA1 44 -> 40: 12 - 8) -> total 0: early stop.
    assert list(plan) == [Migration(s.vm_index["v0"], 1, 0), Migration(s.vm_index["w"], 1, 1)]
    assert plan.status == "early_stop"
    r = Greedy().run(s, 5)
    assert r.fr_before == pytest.approx(48 / 80) and r.fr_after == pytest.approx(16 / 80)
    assert s.fragment() == 48  # reschedule did not touch its input


def test_greedy_ties_follow_input_order():
    a = Greedy().reschedule(greedy_state(("v0", "w")), 1)
    b = Greedy().reschedule(greedy_state(("w", "v0")), 1)
    sa, sb = greedy_state(("v0", "w")), greedy_state(("w", "v0"))
    assert [sa.vm_ids[m.vm] for m in a] == ["v0"]
    assert [sb.vm_ids[m.vm] for m in b] == ["w"]
    # v0 (on h0) goes to the first +4 destination h1 NUMA0; w (on h2) to h0 NUMA0 (12 -> 8)
    assert (a[0].host, a[0].numa) == (1, 0) and (b[0].host, b[0].numa) == (0, 0)


def test_greedy_stops_at_mnl_and_on_tiny_file_stops_early():
    s = greedy_state()
    assert len(Greedy().reschedule(s, 1)) == 1
    assert Greedy().reschedule(s, 1).status == "mnl_reached"
    # tiny.json: candidates vm-a (removal 0), vm-b (-4), vm-e (-2); vm-a's best destination
    # gains 0 (h1 NUMA0 42 -> 26: 10 -> 10) -> no improving move at all
    tiny = load_mapping(DATA / "tiny.json").state
    plan = Greedy().reschedule(tiny, 50)
    assert list(plan) == [] and plan.status == "early_stop"


def test_greedy_checks_memory_and_max_vm_cpu():
    # greedy_state without w, but big40 uses 60 MB of h1 NUMA0, leaving 40: v0 needs 50
    vms = [VM("big28", 28, 0), VM("big44", 44, 0), VM("big40", 40, 60), VM("big36", 36, 0),
           VM("big28b", 28, 0), VM("v0", 4, 50)]
    s = MappingState(hosts3(), vms, [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (0, 0)])
    g = insertion_gains(s, 5)
    assert g[1, 0] < 0 and g[1, 1] == 4  # h1 NUMA0 has the cpu but not the memory
    assert list(Greedy().reschedule(s, 1)) == [Migration(5, 1, 1)]
    only_tiny = Greedy(Greedy.parse_options({"max_vm_cpu": 2})).reschedule(s, 5)
    assert list(only_tiny) == [] and only_tiny.status == "no_candidate"


def alpha_state() -> MappingState:
    return greedy_state(("v0",))


def test_alpha_vbpp_hand_computed():
    s = alpha_state()  # free h0 [12, 0], h1 [4, 8], h2 [16, 44]; fragment 12+0+4+8+0+12
    assert s.fragment() == 36
    plan = AlphaVBPP(AlphaVBPP.parse_options({"alpha": 1})).reschedule(s, 5)
    # stage 1 removes v0 (gain 12; big28 on the same NUMA gains 12 -> 40: 4). Memory is 0
    # everywhere, so the L2 residual is decided by cpu: h1 NUMA0 (4 -> 0) is tightest.
    # Fragment 36 -> 20: kept. Every later stage removes one big VM (big36 -4, big40 -8,
    # then big28, big44, big28b at -12 in input order), whose tightest option is its own
    # slot (ties with h2 NUMA1 go to the earlier host): no move, not kept. Six stages.
    assert list(plan) == [Migration(s.vm_index["v0"], 1, 0)]
    assert plan.status == "all_tried"
    assert plan.info["kept_stages"] == 1 and plan.info["stages"] == 6


def test_alpha_vbpp_never_worse_and_within_mnl():
    for seed in range(3):
        s = parse_mapping(synthetic_mapping(np.random.default_rng(seed), hosts=12)).state
        for mnl in (0, 3, 10):
            r = AlphaVBPP().run(s, mnl)
            assert len(r.migrations) <= mnl
            assert r.fr_after <= r.fr_before + 1e-12


# -- move sequencing --------------------------------------------------------------------------
def swap_state():
    """h0 NUMA0 and h1 NUMA0 are full (8 of 8 cores) with a and b; h2 NUMA0 has room."""
    hosts = [Host(f"h{i}", (8, 0), (10, 10)) for i in range(3)]
    vms = [VM("a", 8, 0), VM("b", 8, 0)]
    return MappingState(hosts, vms, [(0, 0), (1, 0)])


def test_sequence_breaks_a_swap_cycle_with_a_detour():
    s = swap_state()
    moves, info = sequence_moves(s, [(0, 1, 0), (1, 0, 0)], budget=3)
    # neither move is valid first; a detours to h2 (which unblocks b -> h0), then a -> h1
    assert moves == [Migration(0, 2, 0), Migration(1, 0, 0), Migration(0, 1, 0)]
    assert info == {"detours": 1, "dropped": 0}
    assert s.placement() == [(1, 0), (0, 0)]
    swap_state().apply_all(moves)  # valid step by step


def test_sequence_drops_a_cycle_when_no_step_is_left():
    s = swap_state()
    moves, info = sequence_moves(s, [(0, 1, 0), (1, 0, 0)], budget=2)
    assert moves == [] and info == {"detours": 0, "dropped": 2}
    assert s.placement() == [(0, 0), (1, 0)]


# -- MIP --------------------------------------------------------------------------------------
def small_instances():
    """≤ 10 hosts, ≤ 40 VMs: 6-7 hosts at 75-90 % cpu."""
    out = []
    for seed, hosts, target in [(0, 6, 0.9), (1, 7, 0.75), (3, 6, 0.8), (4, 6, 0.9)]:
        s = parse_mapping(synthetic_mapping(np.random.default_rng(seed), hosts=hosts,
                                            target_cpu=target)).state
        assert s.n_hosts <= 10 and s.n_vms <= 40
        out.append(s)
    return out


@pytest.mark.parametrize("mnl", [1, 3, 6])
def test_mip_is_at_least_as_good_as_greedy_on_small_instances(mnl):
    for s in small_instances():
        g = Greedy().run(s, mnl)
        m = MIP(MIP.parse_options({"time_limit": 20})).run(s, mnl)  # run() validates
        assert m.status == "optimal"
        assert len(m.migrations) <= mnl
        assert m.fr_after <= g.fr_after + 1e-12
        assert m.bound == pytest.approx(m.fr_after)  # optimal: bound met


def test_mip_aggregated_matches_per_vm_formulation():
    for s in small_instances()[:3]:
        for mnl in (2, 5):
            agg = MIP(MIP.parse_options({"time_limit": 20})).reschedule(s, mnl)
            per = MIP(MIP.parse_options({"time_limit": 20, "formulation": "per_vm"})
                      ).reschedule(s, mnl)
            assert agg.status == per.status == "optimal"
            assert agg.info["fragment_planned"] == per.info["fragment_planned"]
            assert agg.bound == pytest.approx(per.bound)


def tiny_random_state(seed: int) -> MappingState:
    """3 hosts of 2 x 20 cores / 2 x 20 MB, a few VMs placed at random where they fit;
    one VM in five is not migratable."""
    rng = np.random.default_rng(seed)
    hosts = [Host(f"h{i}", (20, 20), (20, 20)) for i in range(3)]
    free_c = np.full((3, 2), 20)
    vms, place = [], []
    while len(vms) < 6:
        double = rng.random() < 0.3
        c = int(rng.choice([4, 8, 16])) if double else int(rng.choice([2, 4, 6, 8, 12]))
        per = c // 2 if double else c
        opts = [(h, BOTH) for h in range(3) if (free_c[h] >= per).all()] if double else \
            [(h, j) for h in range(3) for j in (0, 1) if free_c[h, j] >= per]
        if not opts:
            break
        h, n = opts[rng.integers(len(opts))]
        for j in ((0, 1) if n == BOTH else (n,)):
            free_c[h, j] -= per
        vms.append(VM(f"v{len(vms)}", c, 2 if double else 1, 2 if double else 1,
                      migratable=bool(rng.random() > 0.2)))
        place.append((h, n))
    return MappingState(hosts, vms, place)


def brute_force_fragment(s: MappingState, mnl: int) -> int:
    """The least fragment over every end state in which each VM stays or sits on another
    host, at most ``mnl`` VMs moved, capacities respected (what the MIP optimises)."""
    import itertools

    options = []
    for k in range(s.n_vms):
        h0, n0 = int(s.vm_host[k]), int(s.vm_numa[k])
        opts = [(h0, n0)]
        if s.vm_migratable[k]:
            for h in range(s.n_hosts):
                if h != h0:
                    opts += [(h, BOTH)] if s.vm_double[k] else [(h, 0), (h, 1)]
        options.append(opts)
    best = None
    for combo in itertools.product(*options):
        moved = sum(c != o[0] for c, o in zip(combo, options, strict=True))
        if moved > mnl:
            continue
        fc, fm = s.cap_cpu.copy(), s.cap_mem.copy()
        for k, (h, n) in enumerate(combo):
            for j in ((0, 1) if n == BOTH else (n,)):
                fc[h, j] -= s.vm_cpu[k]
                fm[h, j] -= s.vm_mem[k]
        if (fc < 0).any() or (fm < 0).any():
            continue
        frag = int((fc % 16).sum())
        best = frag if best is None else min(best, frag)
    return best


@pytest.mark.parametrize("seed", range(6))
def test_mip_matches_brute_force_on_tiny_instances(seed):
    s = tiny_random_state(seed)
    total = s.total_free_cpu()
    for mnl in (1, 2, 3):
        want = brute_force_fragment(s, mnl)
        for formulation in ("aggregated", "per_vm"):
            r = MIP(MIP.parse_options({"formulation": formulation})).run(s, mnl)
            assert r.status == "optimal"
            assert r.info["fragment_planned"] == want, (formulation, mnl)
            assert r.bound == pytest.approx(want / total)
            assert r.fr_after == pytest.approx(want / total)  # realised in <= mnl steps
            assert len(r.migrations) <= mnl


def test_mip_without_a_feasible_point_returns_its_warm_start(monkeypatch):
    """No feasible point within the limit: the warm start's plan (greedy's here), or no
    migrations without a warm start."""
    def no_solution(*a, **k):
        return OptimizeResult(x=None, status=1, fun=None, success=False,
                              message="Time limit reached", mip_dual_bound=-np.inf)

    monkeypatch.setattr(rmip, "milp", no_solution)
    s = greedy_state()
    r = MIP().run(s, 5)
    g = Greedy().run(s, 5)
    assert r.status == "no_solution" and r.bound is None
    assert r.info["source"] == "greedy" and r.info["mip_fr"] is None
    assert r.migrations == g.migrations and r.fr_after == g.fr_after < r.fr_before
    r = MIP(MIP.parse_options({"warm_start": False})).run(s, 5)
    assert r.migrations == [] and r.status == "no_solution" and r.info["source"] == "none"
    assert r.fr_after == r.fr_before and r.bound is None


def test_mip_time_limit_reports_status_and_bound():
    s = parse_mapping(synthetic_preset("medium", 0)).state
    r = MIP(MIP.parse_options({"time_limit": 0.3})).run(s, 50)
    assert r.status in {"time_limit", "optimal", "no_solution", "time_limit+dropped"}
    assert len(r.migrations) <= 50
    if r.bound is not None:
        assert r.bound <= r.fr_after + 1e-12


# -- plugin contract and registration ---------------------------------------------------------
def test_registration_and_metadata():
    found = []
    register_reschedulers(found.append)
    assert found == RESCHEDULERS
    assert [c.name for c in found] == ["greedy", "alpha_vbpp", "mip"]
    for cls in found:
        assert issubclass(cls, Rescheduler) and cls.kind == "rescheduler" and cls.description
    assert rescheduler_class("mip") is MIP
    with pytest.raises(PluginError, match="unknown rescheduler 'nope'; available: alpha_vbpp"):
        rescheduler_class("nope")
    assert AlphaVBPP.label_for(AlphaVBPP.parse_options({"alpha": 5})) == "alpha_vbpp(alpha=5)"
    with pytest.raises(ConfigError, match="options.alpha"):
        AlphaVBPP.parse_options({"alpha": 0})
    with pytest.raises(ConfigError, match="options.bogus"):
        MIP.parse_options({"bogus": 1})


def test_run_rejects_an_invalid_plan():
    class Bad(Rescheduler):
        name = "bad"

        def reschedule(self, view, mnl):
            return Plan([Migration(0, 0, 0)])

    s = greedy_state()
    with pytest.raises(PluginError, match=r"'bad' returned an invalid migration list: "
                                          r"migration step 1 \(VM 'big28'\)"):
        Bad().run(s, 5)


def test_greedy_is_fast_on_the_medium_set():
    s = parse_mapping(synthetic_preset("medium", 0)).state
    t0 = time.perf_counter()
    r = Greedy().run(s, 50)
    assert time.perf_counter() - t0 < 1.0
    assert r.fr_after < r.fr_before


# -- the static reschedule command's logic ----------------------------------------------------
def test_reschedule_file_writes_parquet_and_summary(tmp_path):
    doc = synthetic_mapping(np.random.default_rng(5), hosts=10, target_cpu=0.85,
                            non_migratable=0.1, disabled=1)
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    out = tmp_path / "out"
    summary = reschedule_file(path, "greedy", 10, None, out)
    assert summary["algorithm"] == "greedy" and summary["mnl"] == 10
    assert summary["fr_after"] <= summary["fr_before"]
    assert summary["skipped_hosts"] == 1 and summary["free_mismatches"] == 0
    assert summary["bound"] is None and summary["status"] in {"early_stop", "mnl_reached"}
    table = pq.read_table(out / "migrations.parquet")
    assert table.schema.names == list(MIGRATION_COLUMNS)
    assert table.num_rows == summary["migrations"] <= 10
    assert table.column("step").to_pylist() == list(range(1, table.num_rows + 1))
    assert json.loads((out / "summary.json").read_text()) == json.loads(json.dumps(summary))
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temp files left
    # replaying the table through the model reproduces fr_after
    loaded = load_mapping(path)
    s = loaded.state
    moves = [Migration(s.vm_index[r["vm_id"]], s.host_index[r["to_host"]], r["to_numa"])
             for r in table.to_pylist()]
    s.apply_all(moves, mnl=10)
    assert s.fragment_rate() == pytest.approx(summary["fr_after"])


def test_reschedule_file_mip_and_errors(tmp_path):
    summary = reschedule_file(DATA / "tiny.json", "mip", 3, {"node_limit": 1000}, tmp_path)
    assert summary["status"] == "optimal" and summary["bound"] is not None
    assert summary["label"] == "mip"
    assert summary["fr_after"] <= summary["fr_before"]
    with pytest.raises(PluginError, match="unknown rescheduler"):
        reschedule_file(DATA / "tiny.json", "nope", 3)
    with pytest.raises(ConfigError, match="options.alpha"):
        reschedule_file(DATA / "tiny.json", "alpha_vbpp", 3, {"alpha": -1})
    with pytest.raises(ConfigError, match="bad_cpu.json: cluster_list"):
        reschedule_file(DATA / "bad_cpu.json", "greedy", 3)
    with pytest.raises(PluginError, match="mnl"):
        reschedule_file(DATA / "tiny.json", "greedy", -1)


@pytest.mark.slow
def test_medium_set_mip_beats_heuristics_and_meets_its_bound():
    s = parse_mapping(synthetic_preset("medium", 1)).state
    g = Greedy().run(s, 50)
    a = AlphaVBPP().run(s, 50)
    m = MIP(MIP.parse_options({"time_limit": 60})).run(s, 50)
    assert m.status == "optimal" and len(m.migrations) <= 50
    assert m.fr_after <= min(g.fr_after, a.fr_after) + 1e-12
    assert m.bound == pytest.approx(m.fr_after)
    assert g.fr_after < g.fr_before and a.fr_after < a.fr_before


def test_an_empty_mapping_is_no_candidate_for_every_rescheduler():
    """An online mapping whose VMs have all left is rescheduled to nothing (hypothesis
    found greedy's argmax over no VMs)."""
    from dcsim.plugins import get_plugin_class
    from dcsim.vm.model import Host, MappingState

    state = MappingState([Host("h0", (20, 20), (100, 100))], [], [])
    for name in ("greedy", "alpha_vbpp", "mip"):
        cls = get_plugin_class(name, "rescheduler")
        res = cls().run(state, 5)
        assert res.migrations == [] and res.status == "no_candidate"
        assert res.fr_after == res.fr_before
