"""GPU-sharing clusters (``mode: gpu``, FGD ATC'23): the per-device state (reserve, release,
``reason``, ``check``, copy and view), the fragmentation measure worked by hand on two
servers and checked against a naive reading of its definition and against recomputation on
random states (hypothesis), the typical pods, arrival order and inflation, and bad node and
pod lists (each error naming the file, the line and the field)."""

from __future__ import annotations

import itertools
import math
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dcsim.errors import ConfigError, StateError
from dcsim.gpu import (
    MILLI,
    FragModel,
    GpuCluster,
    GpuNodes,
    GpuPod,
    check_against,
    read_nodes,
    read_pods,
    typical_pods,
)
from dcsim.gpu.workload import arrival_order, by_name, inflate
from dcsim.gpu_allocators import GpuContext
from dcsim.gpu_allocators.fgd import Fgd, fgd_score
from tests.helpers.gpu import gpu_nodes, make_cluster, pod_table, typical_of


# -- more builders (tests/helpers/gpu.py has the common ones) ----------------------------------
def fgd_for(cluster, typical, rows, **options) -> Fgd:
    a = Fgd(Fgd.Options(**options), rng=np.random.default_rng(0))
    a.setup(cluster.view(), GpuContext(pod_table(rows), typical,
                                       FragModel(typical, cluster.models)))
    return a


def naive_node_frag(c: GpuCluster, typ, node: int) -> float:
    """The fragmentation of ``node`` read straight off the definition (frag.py's docstring)."""
    devs = [int(x) for x in c.gpu_free[node, :c.gpu_count[node]]]
    F = sum(devs)
    model = c.nodes.model[node]
    total = 0.0
    for j in range(len(typ)):
        cpu, milli, num, types = (int(typ.cpu[j]), int(typ.gpu_milli[j]), int(typ.num_gpu[j]),
                                  typ.types[j])
        if num == 0 or not model or (types and model not in types):
            amount = F
        elif c.cpu_free[node] >= cpu and sum(x >= milli for x in devs) >= num:
            amount = sum(x for x in devs if x < milli)
        else:
            amount = F
        total += typ.freq[j] * amount
    return total


# -- reserve / release -------------------------------------------------------------------------
def two_by_two() -> GpuCluster:
    # n0: 2 × T4, n1: 2 × V100, n2: CPU-only; 32 cores, 1000 MiB each
    return GpuCluster(gpu_nodes([(2, "T4", 32000), (2, "V100", 32000), (0, "", 32000)],
                                mem=1000))


def test_reserve_and_release_account_device_by_device():
    c = two_by_two()
    assert c.gpu_cap.tolist() == [[1000, 1000], [1000, 1000], [0, 0]]
    assert c.models == ("T4", "V100") and c.model_code.tolist() == [0, 1, -1]
    share = GpuPod(1, 4000, 100, 1, 300)
    whole = GpuPod(2, 8000, 200, 2, 1000)
    cpu = GpuPod(3, 1000, 50, 0, 0)
    a = c.reserve(share, 0, (1,))
    b = c.reserve(whole, 1, (0, 1))
    d = c.reserve(cpu, 2, ())
    e = c.reserve(GpuPod(4, 0, 0, 1, 700), 0, (1,))   # the rest of device 1 exactly
    assert c.gpu_free.tolist() == [[1000, 0], [0, 0], [0, 0]]
    assert c.cpu_free.tolist() == [28000, 24000, 31000]
    assert c.mem_free.tolist() == [900, 800, 950]
    assert c.tag_count[0].tolist() == [2, 0, 0, 0, 0, 0, 0, 0, 0]
    assert c.tag_count[1].tolist() == [0, 0, 1, 0, 0, 0, 0, 0, 0]
    assert c.tag_count[2].sum() == 0
    assert c.pods_on.tolist() == [2, 1, 1] and c.version.tolist() == [2, 1, 1]
    assert c.used_gpu_milli() == 3000 and c.total_gpu_milli == 4000 and c.total_gpus == 4
    assert c.full_free().tolist() == [1, 0, 0]
    assert c.gpu_free_total().tolist() == [1000, 0, 0]
    assert (a.node, a.devices, a.per_device, a.active) == (0, (1,), 300, True)
    assert b.devices == (0, 1) and b.per_device == 1000 and d.devices == ()
    c.check()
    c.release(a)
    assert c.gpu_free[0].tolist() == [1000, 300] and c.cpu_free[0] == 32000
    assert c.tag_count[0, 0] == 1 and c.version[0] == 3 and not a.active
    for p in (b, d, e):
        c.release(p)
    fresh = two_by_two()
    for name in ("cpu_free", "mem_free", "gpu_free", "tag_count", "pods_on"):
        assert (getattr(c, name) == getattr(fresh, name)).all(), name
    c.check()


def test_release_twice_is_a_state_error_and_changes_nothing():
    c = two_by_two()
    p = c.reserve(GpuPod(7, 1000, 10, 1, 500), 1, (0,))
    c.release(p)
    before = c.copy()
    with pytest.raises(StateError, match="pod 7: released twice"):
        c.release(p)
    assert (c.gpu_free == before.gpu_free).all() and (c.cpu_free == before.cpu_free).all()
    assert (c.version == before.version).all()


def test_release_past_capacity_is_a_state_error():
    # a placement made on a copy, released on the original (where it never was)
    c = two_by_two()
    other = c.copy()
    p = other.reserve(GpuPod(9, 0, 0, 1, 400), 0, (0,))
    assert c.gpu_free[0, 0] == 1000                # the copy is a private state
    with pytest.raises(StateError, match="release would exceed node 0's capacity"):
        c.release(p)
    assert p.active and c.gpu_free[0].tolist() == [1000, 1000]
    other.release(p)
    assert not p.active


@pytest.mark.parametrize("pod, node, devices, why", [
    (GpuPod(1, 0, 0, 1, 100), 3, (0,), r"node 3 is not a node of the cluster \(0..2\)"),
    (GpuPod(1, 0, 0, 1, 100), -1, (0,), "node -1 is not a node"),
    (GpuPod(1, 40000, 0, 1, 100), 0, (0,), "node 0 has 32000 milli-cpu free, the pod asks 40000"),
    (GpuPod(1, 0, 2000, 1, 100), 0, (0,), "node 0 has 1000 MiB free, the pod asks 2000"),
    (GpuPod(1, 100, 0, 0, 0), 0, (0,), "a CPU-only pod takes no GPU device"),
    (GpuPod(1, 0, 0, 1, 100), 2, (0,), "node 2 has no GPU"),
    (GpuPod(1, 0, 0, 1, 100, ("V100",)), 0, (0,),
     r"node 0's GPUs are T4, the pod accepts only V100"),
    (GpuPod(1, 0, 0, 1, 100, ("H100",)), 1, (0,), "node 1's GPUs are V100, the pod accepts "
     "only H100"),
    (GpuPod(1, 0, 0, 2, 1000), 0, (0,), r"the pod needs 2 device\(s\), got 1"),
    (GpuPod(1, 0, 0, 1, 100), 0, (), r"the pod needs 1 device\(s\), got 0"),
    (GpuPod(1, 0, 0, 2, 1000), 0, (1, 1), r"devices \[1, 1\] repeat a device"),
    (GpuPod(1, 0, 0, 1, 100), 0, (2,), r"node 0 has no device 2 \(it has 2\)"),
    (GpuPod(1, 0, 0, 1, 100), 0, (-1,), "node 0 has no device -1"),
    (GpuPod(1, 0, 0, 1, 800), 0, (1,), "device 1 of node 0 has 300 milli-GPU free, the pod "
     "needs 800"),
    (GpuPod(1, 0, 0, 1, 1000), 0, (1,), "device 1 of node 0 has 300 milli-GPU free, the pod "
     "needs 1000"),
    (GpuPod(1, 0, 0, 2, 1000), 0, (0, 1), "device 1 of node 0 has 300 milli-GPU free"),
])
def test_every_invalid_placement_is_a_state_error_with_its_reason(pod, node, devices, why):
    c = two_by_two()
    c.reserve(GpuPod(0, 0, 0, 1, 700), 0, (1,))       # node 0 device 1: 300 free
    before = c.copy()
    assert re.search(why, c.reason(pod, node, devices))
    with pytest.raises(StateError, match=f"pod 1: {why}"):
        c.reserve(pod, node, devices)
    for name in ("cpu_free", "mem_free", "gpu_free", "tag_count", "pods_on", "version"):
        assert (getattr(c, name) == getattr(before, name)).all(), name


def test_feasible_is_the_filter_stage():
    c = make_cluster([(2, "T4", 32000), (4, "V100", 8000), (0, "", 64000)],
                     free=[[300, 300], [0, 600, 1000, 1000]])
    assert c.feasible(GpuPod(0, 1000, 0, 1, 300)).tolist() == [True, True, False]
    assert c.feasible(GpuPod(0, 1000, 0, 1, 301)).tolist() == [False, True, False]
    assert c.feasible(GpuPod(0, 1000, 0, 1, 1000)).tolist() == [False, True, False]
    assert c.feasible(GpuPod(0, 1000, 0, 2, 1000)).tolist() == [False, True, False]
    assert c.feasible(GpuPod(0, 1000, 0, 3, 1000)).tolist() == [False, False, False]
    assert c.feasible(GpuPod(0, 9000, 0, 1, 100)).tolist() == [True, False, False]
    assert c.feasible(GpuPod(0, 40000, 0, 0, 0)).tolist() == [False, False, True]
    assert c.feasible(GpuPod(0, 1000, 0, 1, 100, ("V100",))).tolist() == [False, True, False]
    assert c.feasible(GpuPod(0, 1000, 0, 1, 100, ("H100",))).tolist() == [False, False, False]
    assert c.feasible(GpuPod(0, 1000, 0, 1, 100, ("H100", "T4"))).tolist() == [True, False,
                                                                                False]
    assert c.feasible(GpuPod(0, 1000, 0, 1, 400, ("H100", "T4"))).tolist() == [False, False,
                                                                                False]


def test_check_catches_a_free_amount_outside_its_range():
    c = two_by_two()
    c.check()
    for name, i, value in (("gpu_free", (0, 0), -1), ("gpu_free", (2, 1), 1),
                           ("cpu_free", 1, 32001), ("mem_free", 0, -5)):
        bad = c.copy()
        getattr(bad, name)[i] = value
        with pytest.raises(StateError, match=name.split("_")[0]):
            bad.check()
    c.check()      # the copies were private


def test_a_node_with_fewer_gpus_has_dead_devices_past_its_last():
    c = GpuCluster(gpu_nodes([(1, "T4", 1000), (4, "T4", 1000)]))
    assert c.max_gpus == 4 and c.gpu_cap[0].tolist() == [1000, 0, 0, 0]
    assert c.reason(GpuPod(0, 0, 0, 1, 1), 0, (1,)) == "node 0 has no device 1 (it has 1)"
    assert c.feasible(GpuPod(0, 0, 0, 2, 1000)).tolist() == [False, True]


def test_nodes_with_more_than_eight_gpus_place_and_release():
    # tag_count has a column per whole-GPU count, so a 16-GPU pod needs one too
    c = GpuCluster(gpu_nodes([(16, "X", 64000)]))
    p = c.reserve(GpuPod(0, 0, 0, 16, 1000), 0, tuple(range(16)))
    assert c.gpu_free.sum() == 0 and c.tag_count[0, 16] == 1
    c.release(p)
    assert c.gpu_free.sum() == 16000 and c.tag_count.sum() == 0


def test_view_is_read_only_and_copy_is_private():
    c = two_by_two()
    v = c.view()
    with pytest.raises(ValueError):
        v.gpu_free[0, 0] = 0
    with pytest.raises(AttributeError, match="read-only"):
        v.gpu_free = None
    with pytest.raises(AttributeError, match="'reserve' is not available"):
        v.reserve(GpuPod(0, 0, 0, 1, 500), 0, (0,))
    assert v.feasible(GpuPod(0, 0, 0, 1, 500)).tolist() == [True, True, False]
    mine = v.copy()
    mine.reserve(GpuPod(0, 0, 0, 1, 500), 0, (0,))
    assert c.gpu_free[0, 0] == 1000 and v.gpu_free[0, 0] == 1000
    c.reserve(GpuPod(1, 0, 0, 1, 200), 0, (0,))
    assert v.gpu_free[0, 0] == 800                  # the view is live


def test_gpu_nodes_reject_bad_arrays():
    with pytest.raises(ValueError, match="GpuNodes.cpu: negative"):
        GpuNodes(("a",), np.array([-1]), np.array([1]), np.array([1]), ("T4",))
    with pytest.raises(ValueError, match=r"GpuNodes.gpus: \(2,\) values for 1 nodes"):
        GpuNodes(("a",), np.array([1]), np.array([1]), np.array([1, 1]), ("T4",))
    with pytest.raises(ValueError, match="GpuNodes.model: 0 values for 1 nodes"):
        GpuNodes(("a",), np.array([1]), np.array([1]), np.array([1]), ())


# -- fragmentation, worked by hand on two servers -----------------------------------------------
# The workload: 10 pods of three requests, so the typical pods (threshold 1) are
#   t1: 4 cores, 500 milli-GPU of one GPU   freq 5/10 = 0.5
#   t2: 8 cores, one whole GPU             freq 3/10 = 0.3
#   t3: 2 cores, no GPU                     freq 2/10 = 0.2
CLASSES = [(5, 4000, 1, 500, ()), (3, 8000, 1, 1000, ()), (2, 2000, 0, 0, ())]
# Two servers of 2 GPUs and 32 cores, 16 cores free each:
#   A (T4):   devices free [1000, 300]   (F = 1300)
#   B (V100): devices free [ 520, 700]   (F = 1220)
SPECS = [(2, "T4", 32000), (2, "V100", 32000)]
FREE = [[1000, 300], [520, 700]]
CPU_FREE = [16000, 16000]


def hand_cluster():
    typ, rows = typical_of(CLASSES)
    return make_cluster(SPECS, FREE, CPU_FREE), typ, rows


def test_two_server_fragmentation_by_hand():
    c, typ, _ = hand_cluster()
    assert typ.freq.tolist() == [0.5, 0.3, 0.2] and typ.num_gpu.tolist() == [1, 1, 0]
    frag = FragModel(typ, c.models)
    # A: t1 (500) fits device 0 (1000 ≥ 500, 16 ≥ 4 cores): q3-satisfied, and device 1's
    #       300 < 500 cannot be used by it: 300 fragment.
    #    t2 (1000) fits device 0 too: q3-satisfied, device 1's 300 is fragment: 300.
    #    t3 asks for no GPU: all 1300 free milli-GPU count.
    #    0.5·300 + 0.3·300 + 0.2·1300 = 150 + 90 + 260 = 500
    # B: t1 fits both devices (520, 700 ≥ 500): q3-satisfied, nothing left below 500: 0.
    #    t2 needs a fully free device and has none (q2_lack_gpu): all 1220.
    #    t3: 1220.
    #    0.5·0 + 0.3·1220 + 0.2·1220 = 366 + 244 = 610
    assert frag.node_amounts(c).tolist() == [[300, 300, 1300], [0, 1220, 1220]]
    assert frag.node_frag(c) == pytest.approx([500.0, 610.0])
    assert frag.node_frag(c, [1]) == pytest.approx([610.0])
    assert [naive_node_frag(c, typ, i) for i in (0, 1)] == pytest.approx([500.0, 610.0])


def test_a_share_pod_on_the_two_servers_by_hand():
    c, typ, rows = hand_cluster()
    frag = FragModel(typ, c.models)
    pod = GpuPod(0, 2000, 0, 1, 200)           # 2 cores, 200 milli-GPU of one GPU
    # A dev 0 → [800, 300] (F 1100): t1 still fits dev 0, 300 fragment; t2 lost its full
    #   device: 1100; t3: 1100.  0.5·300 + 0.3·1100 + 0.2·1100 = 700   drop 500 − 700 = −200
    # A dev 1 → [1000, 100] (F 1100): t1 and t2 fit dev 0, 100 fragment; t3: 1100.
    #   0.5·100 + 0.3·100 + 0.2·1100 = 300                              drop 500 − 300 = +200
    # B dev 0 → [320, 700] (F 1020): t1 fits dev 1, 320 fragment; t2, t3: 1020.
    #   0.5·320 + 0.3·1020 + 0.2·1020 = 670                             drop 610 − 670 = −60
    # B dev 1 → [520, 500] (F 1020): t1 fits both, 0; t2, t3: 1020.
    #   0 + 0.3·1020 + 0.2·1020 = 510                                   drop 610 − 510 = +100
    delta = frag.delta(c, np.array([0, 1]), pod)
    assert delta.shape == (2, 2)
    assert delta == pytest.approx(np.array([[-200.0, 200.0], [-60.0, 100.0]]))
    # FGD: 100·sigmoid(drop/1000), truncated: A1 54, B1 52, B0 48, A0 45 → node A, device 1
    assert np.trunc(fgd_score(delta)).tolist() == [[45.0, 54.0], [48.0, 52.0]]
    assert fgd_for(c, typ, rows).allocate(pod, c.view()) == (0, (1,))
    # a pod that accepts only V100 goes to B, and to device 1, not the tightest device 0:
    # 520 → 320 would leave device 0 unusable for t1 (+320 fragment), 700 → 500 keeps it
    v100 = GpuPod(1, 2000, 0, 1, 200, ("V100",))
    assert fgd_for(c, typ, rows).allocate(v100, c.view()) == (1, (1,))


def test_delta_is_nan_where_the_device_is_too_small_and_other_kinds_by_hand():
    c, typ, _ = hand_cluster()
    frag = FragModel(typ, c.models)
    # 600 milli-GPU fits A dev 0 (1000) and B dev 1 (700) only.
    # A dev 0 → [400, 300] (F 700): t1 and t2 fit nowhere: 700 each, t3 700: drop −200
    # B dev 1 → [520, 100] (F 620): t1 fits dev 0, 100 fragment; t2, t3 620:
    #   0.5·100 + 0.3·620 + 0.2·620 = 360                            drop 610 − 360 = +250
    d = frag.delta(c, np.array([0, 1]), GpuPod(0, 2000, 0, 1, 600))
    assert np.isnan(d).tolist() == [[False, True], [True, False]]
    assert d[0, 0] == pytest.approx(-200.0) and d[1, 1] == pytest.approx(250.0)
    # a CPU-only pod of 10 cores: A keeps 6 cores, below t2's 8: t2 now counts all 1300
    # (0.5·300 + 0.3·1300 + 0.2·1300 = 800, drop −300); on B t2 counted all already: 0
    d = frag.delta(c, np.array([0, 1]), GpuPod(0, 10000, 0, 0, 0))
    assert d.shape == (2, 1) and d[:, 0] == pytest.approx([-300.0, 0.0])
    # one whole GPU (2 cores) on A takes device 0 → [0, 300] (F 300): nothing fits, all
    # 300 for every typical pod: 300, drop +200
    d = frag.delta(c, np.array([0]), GpuPod(0, 2000, 0, 1, 1000))
    assert d.shape == (1, 1) and d[0, 0] == pytest.approx(200.0)


def test_no_access_and_lack_of_cpu_count_all_the_free_gpu():
    # t1 accepts only V100, t2 needs 20 cores
    typ, _ = typical_of([(2, 1000, 1, 500, ("V100",)), (1, 20000, 1, 500, ())])
    c = make_cluster(SPECS + [(0, "", 32000)], FREE, CPU_FREE)
    amounts = FragModel(typ, c.models).node_amounts(c)
    # t1 on A (T4): no access: all 1300; on B it fits: 0; t2 lacks cpu (16 < 20 cores)
    # everywhere: all free; the CPU-only node has no free GPU: 0
    assert amounts.tolist() == [[1300, 1300], [0, 1220], [0, 0]]


# -- fragmentation on random states (hypothesis) -----------------------------------------------
MODELS = ("A", "B")
TYPES = st.sampled_from([(), (), ("A",), ("B",), ("A", "B"), ("C",)])
MILLIS = st.sampled_from([1, 100, 250, 300, 460, 500, 700, 999]) | st.integers(1, 999)


CPUS = st.sampled_from([0, 1000, 2000, 4000, 8000, 12000])


def pods(cpu=CPUS):
    share = st.builds(lambda c, m, t: GpuPod(0, c, 0, 1, m, t), cpu, MILLIS, TYPES)
    whole = st.builds(lambda c, k, t: GpuPod(0, c, 0, k, MILLI, t), cpu, st.integers(1, 4),
                      TYPES)
    cpu_only = st.builds(lambda c: GpuPod(0, c, 0, 0, 0), cpu)
    return st.one_of(share, share, whole, cpu_only)


node_specs = st.lists(st.tuples(st.sampled_from([0, 1, 2, 2, 4, 8]), st.sampled_from(MODELS),
                                st.sampled_from([4000, 16000, 32000])), min_size=1, max_size=4)


def options(c: GpuCluster, pod: GpuPod):
    """Every valid (node, devices) of ``pod`` in ``c``."""
    out = []
    for n in np.flatnonzero(c.feasible(pod)).tolist():
        if pod.num_gpu == 0:
            out.append((n, ()))
        else:
            fit = np.flatnonzero(c.gpu_free[n] >= pod.gpu_milli).tolist()
            out += [(n, ds) for ds in itertools.combinations(fit, pod.num_gpu)]
    assert all(c.reason(pod, n, ds) is None for n, ds in out)
    return out


@st.composite
def states(draw):
    """A cluster after random valid placements, and typical pods of a random workload."""
    c = GpuCluster(gpu_nodes(draw(node_specs)))
    for i, pod in enumerate(draw(st.lists(pods(), max_size=12))):
        opts = options(c, pod)
        if opts:
            n, ds = draw(st.sampled_from(opts))
            c.reserve(GpuPod(-1 - i, pod.cpu, 0, pod.num_gpu, pod.gpu_milli, pod.types), n, ds)
    reqs = draw(st.lists(st.tuples(st.integers(1, 5), pods()), min_size=1, max_size=6))
    rows = [(p.cpu, p.num_gpu, p.gpu_milli, p.types) for k, p in reqs for _ in range(k)]
    typ = typical_pods([r[0] for r in rows], [r[2] for r in rows], [r[1] for r in rows],
                       [r[3] for r in rows], threshold=draw(st.sampled_from([0.5, 0.95, 1.0])))
    return c, typ


def check_delta(c: GpuCluster, typ, pod: GpuPod) -> None:
    """``FragModel.delta`` for ``pod`` on every node of ``c`` against placing it (on a copy)
    at each valid option and recomputing the node's fragmentation."""
    frag = FragModel(typ, c.models)
    before = frag.node_frag(c)
    assert before == pytest.approx([naive_node_frag(c, typ, i) for i in range(c.n_nodes)])
    assert ((before >= -1e-9) & (before <= c.gpu_free_total() + 1e-9)).all()
    delta = frag.delta(c, np.arange(c.n_nodes), pod)
    if pod.kind == "share":
        assert delta.shape == (c.n_nodes, c.max_gpus)
        assert (np.isnan(delta) == (c.gpu_free < pod.gpu_milli)).all()
    else:
        assert delta.shape == (c.n_nodes, 1) and not np.isnan(delta).any()
    for n, ds in options(c, pod):
        if pod.kind == "whole" and ds != tuple(np.flatnonzero(c.gpu_free[n] == MILLI)[
                :pod.num_gpu].tolist()):
            continue        # delta is for the node's first k fully free devices
        after = c.copy()
        after.reserve(pod, n, ds)
        drop = before[n] - frag.node_frag(after, [n])[0]
        assert drop == pytest.approx(naive_node_frag(c, typ, n)
                                     - naive_node_frag(after, typ, n), abs=1e-6)
        got = delta[n, ds[0]] if pod.kind == "share" else delta[n, 0]
        assert got == pytest.approx(drop, abs=1e-6), (n, ds)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(state=states(), probes=st.lists(pods(), min_size=1, max_size=4))
def test_delta_equals_recomputing_after_reserving(state, probes):
    c, typ = state
    for pod in probes:
        check_delta(c, typ, pod)


def test_delta_of_whole_gpu_pods_against_multi_gpu_typical_pods():
    # typical: 2 whole GPUs (freq 1/2), 300 milli-GPU (1/2); a node of 4 GPUs [1000, 1000,
    # 1000, 200], 8 cores free. One whole GPU leaves two full devices: the 2-GPU pod still
    # fits (200 over), so does 300 (200 over): 200 → 200, drop 0; two whole GPUs leave one:
    # the 2-GPU pod no longer fits (1200), 300 does (200): 700, drop −500
    typ, _ = typical_of([(1, 1000, 2, 1000, ()), (1, 1000, 1, 300, ())])
    c = make_cluster([(4, "A", 8000)], free=[[1000, 1000, 1000, 200]])
    frag = FragModel(typ, c.models)
    assert frag.node_frag(c) == pytest.approx([200.0])
    assert frag.delta(c, np.array([0]), GpuPod(0, 0, 0, 1, 1000))[0, 0] == pytest.approx(0.0)
    assert frag.delta(c, np.array([0]), GpuPod(0, 0, 0, 2, 1000))[0, 0] == pytest.approx(
        -500.0)
    # three take every full device: 200 free, nothing fits: 200, drop 0
    assert frag.delta(c, np.array([0]), GpuPod(0, 0, 0, 3, 1000))[0, 0] == pytest.approx(0.0)
    for k in (1, 2, 3):
        check_delta(c, typ, GpuPod(0, 0, 0, k, 1000))


# -- typical pods ---------------------------------------------------------------------------------
def test_typical_pods_most_frequent_first_ties_larger_request_first():
    typ, _ = typical_of([(2, 4000, 1, 500, ()), (5, 1000, 1, 200, ()), (2, 8000, 1, 200, ()),
                         (2, 4000, 1, 700, ()), (3, 6000, 0, 0, ()),
                         (2, 4000, 2, 1000, ("V100M16", "V100M32"))])
    # 5 first, then 3, then the four of count 2 by (cpu, milli, num, types), larger first
    assert typ.cpu.tolist() == [1000, 6000, 8000, 4000, 4000, 4000]
    assert typ.gpu_milli.tolist() == [200, 0, 200, 1000, 700, 500]
    assert typ.num_gpu.tolist() == [1, 0, 1, 2, 1, 1]
    assert typ.types[3] == ("V100M16", "V100M32") and typ.types[0] == ()
    assert typ.freq == pytest.approx(np.array([5, 3, 2, 2, 2, 2]) / 16)
    assert typ.coverage == 1.0 and len(typ) == 6


def test_cpu_only_pods_are_one_class_whatever_their_gpu_fields():
    # a CPU-only pod's gpu_milli/types do not split it (the authors read them as 0)
    typ = typical_pods([1000, 1000, 1000], [0, 300, 0], [0, 0, 0], [(), ("T4",), ()])
    assert len(typ) == 1 and typ.gpu_milli.tolist() == [0] and typ.types == ((),)
    assert typ.freq.tolist() == [1.0]


@pytest.mark.parametrize("threshold, step, kept, coverage", [
    (0.5, 1, 1, 0.5),       # the first class (5 of 10) covers 50 %
    (0.51, 1, 2, 0.8),
    (0.8, 1, 2, 0.8),       # 5 + 3 = 8 of 10
    (0.81, 1, 3, 0.9),
    (0.95, 1, 4, 1.0),
    (0.5, 2, 2, 0.8),       # two classes at a time
    (0.81, 2, 4, 1.0),
    (0.3, 3, 3, 0.9),
    (1.0, 10, 4, 1.0),      # a step past the end keeps what there is
])
def test_typical_pods_threshold_and_step(threshold, step, kept, coverage):
    counts = [5, 3, 1, 1]
    rows = [c for c, k in zip([1000, 2000, 3000, 4000], counts, strict=True) for _ in range(k)]
    typ = typical_pods(rows, [100] * 10, [1] * 10, [()] * 10, threshold=threshold, step=step)
    assert len(typ) == kept and typ.coverage == pytest.approx(coverage)
    assert typ.freq.sum() == pytest.approx(1.0)
    assert typ.freq == pytest.approx(np.array(counts[:kept]) / sum(counts[:kept]))


@pytest.mark.parametrize("threshold, counts, kept", [
    (0.07, [7] + [5] * 18 + [3], 1),       # 0.07 × 100 = 7.000000000000001 in floating point
    (0.14, [7, 7] + [5] * 17 + [1], 2),    # 14.000000000000002
    (0.28, [14, 14] + [12] * 6, 2),        # 28.000000000000004
    (0.55, [30, 25, 20, 20, 5], 2),        # 55.00000000000001
    (0.29, [15, 14] + [10] * 7 + [1], 2),  # 28.999999999999996
])
def test_typical_pods_classes_covering_exactly_the_threshold_are_enough(threshold, counts,
                                                                        kept):
    # the first `kept` classes cover exactly the threshold's share of the 100 pods: no
    # further class is needed, whatever threshold × 100 rounds to
    assert sum(counts) == 100 and sum(counts[:kept]) == round(threshold * 100)
    rows = [1000 * (j + 1) for j, k in enumerate(counts) for _ in range(k)]
    typ = typical_pods(rows, [0] * 100, [0] * 100, [()] * 100, threshold=threshold)
    assert len(typ) == kept and typ.coverage == pytest.approx(threshold)


def test_typical_pods_without_cpu_pods_and_bad_arguments():
    cpu, milli, num = [1000] * 6 + [2000] * 4, [0] * 6 + [500] * 4, [0] * 6 + [1] * 4
    with_cpu = typical_pods(cpu, milli, num, [()] * 10, threshold=1.0)
    assert with_cpu.num_gpu.tolist() == [0, 1] and with_cpu.freq.tolist() == [0.6, 0.4]
    no_cpu = typical_pods(cpu, milli, num, [()] * 10, threshold=1.0, cpu_pods=False)
    assert no_cpu.num_gpu.tolist() == [1] and no_cpu.freq.tolist() == [1.0]
    assert no_cpu.coverage == 1.0
    with pytest.raises(ValueError, match="no pod"):
        typical_pods([1000], [0], [0], [()], cpu_pods=False)
    with pytest.raises(ValueError, match="threshold"):
        typical_pods(cpu, milli, num, [()] * 10, threshold=0)
    with pytest.raises(ValueError, match="threshold"):
        typical_pods(cpu, milli, num, [()] * 10, threshold=1.01)
    with pytest.raises(ValueError, match="step"):
        typical_pods(cpu, milli, num, [()] * 10, step=0)


# -- arrival order and inflation ----------------------------------------------------------------
def named_table(n=30, seed=0):
    rng = np.random.default_rng(seed)
    names = [f"pod-{i:03d}" for i in rng.permutation(n)]
    rows = [(1000, 1, int(rng.integers(1, 1000)), ()) if i % 3 else (2000, 0, 0, ())
            for i in range(n)]
    return pod_table(rows, names=names, creation=rng.integers(0, 5, n).astype(float))


def test_arrival_order_shuffle_is_a_seeded_permutation_of_the_names():
    t = named_table()
    a = arrival_order(t, "shuffle", np.random.default_rng(5))
    assert sorted(a.tolist()) == list(range(len(t)))
    assert (a == arrival_order(t, "shuffle", np.random.default_rng(5))).all()
    assert not (a == arrival_order(t, "shuffle", np.random.default_rng(6))).all()
    # the pods are sorted by name before the permutation: the same names come in the same
    # order whatever the file's order
    rev = np.arange(len(t))[::-1]
    flipped = pod_table([(int(t.cpu[i]), int(t.num_gpu[i]), int(t.gpu_milli[i]), ())
                         for i in rev], names=[t.names[i] for i in rev])
    b = arrival_order(flipped, "shuffle", np.random.default_rng(5))
    assert [flipped.names[i] for i in b] == [t.names[i] for i in a]
    assert [t.names[i] for i in by_name(t)] == sorted(t.names)


def test_arrival_order_by_creation_time_and_file():
    t = pod_table([(1, 0, 0, ())] * 6, creation=[5.0, math.nan, 1.0, 5.0, 0.0, 1.0])
    assert arrival_order(t, "creation_time", np.random.default_rng(0)).tolist() == [
        4, 2, 5, 0, 3, 1]                       # equal times in file order; no time last
    assert arrival_order(t, "file", np.random.default_rng(0)).tolist() == list(range(6))
    with pytest.raises(ValueError, match="unknown order"):
        arrival_order(t, "nope", np.random.default_rng(0))


@pytest.mark.parametrize("seed", range(5))
def test_inflate_total_reaches_but_does_not_pass_the_target(seed):
    t = named_table(seed=seed)
    total = t.total_gpu_milli
    rows = arrival_order(t, "shuffle", np.random.default_rng(seed))
    target = 3.0 * total.sum()
    out, flag = inflate(t, rows, target, np.random.default_rng(seed), stop="total")
    asked = total[out].sum()
    assert asked <= target and asked > target - total.max()
    assert (out[:len(rows)] == rows).all() and flag.tolist() == [False] * len(rows) + [
        True] * (len(out) - len(rows))
    assert (t.num_gpu[out[flag]] == 0).any()    # CPU-only pods are appended when drawn
    again = inflate(t, rows, target, np.random.default_rng(seed), stop="total")
    assert (again[0] == out).all() and (again[1] == flag).all()
    other = inflate(t, rows, target, np.random.default_rng(seed + 100), stop="total")[0]
    assert len(other) != len(out) or (other != out).any()


def test_inflate_authors_stop_compares_the_per_device_share():
    # every pod asks for 4 whole GPUs (4000 milli-GPU, 1000 per device); target 10,000
    t = pod_table([(0, 4, 1000, ())] * 3)
    rows = np.array([0])
    # total: 4000 + 4000 = 8000; one more would make 12,000 > 10,000: stop at 8000
    out, _ = inflate(t, rows, 10_000, np.random.default_rng(0), stop="total")
    assert t.total_gpu_milli[out].sum() == 8000 and len(out) == 2
    # authors: 8000 + 1000 (per device) ≤ 10,000, so the third is added: 12,000
    out, flag = inflate(t, rows, 10_000, np.random.default_rng(0), stop="authors")
    assert t.total_gpu_milli[out].sum() == 12_000 and flag.tolist() == [False, True, True]


def test_inflate_tunes_down_a_list_that_asks_for_more():
    t = named_table(60)
    total = t.total_gpu_milli
    rows = arrival_order(t, "shuffle", np.random.default_rng(1))
    target = 0.5 * total.sum()
    out, flag = inflate(t, rows, target, np.random.default_rng(2))
    assert not flag.any() and len(out) < len(rows)
    assert total[out].sum() <= target and total[out].sum() > target - total.max()
    pos = {r: i for i, r in enumerate(rows.tolist())}
    assert sorted(out.tolist(), key=pos.__getitem__) == out.tolist()   # order kept
    assert len(set(out.tolist())) == len(out)                            # a subset
    again = inflate(t, rows, target, np.random.default_rng(2))[0]
    assert (again == out).all()


def test_inflate_leaves_a_list_without_gpu_pods_as_it_is():
    t = pod_table([(1000, 0, 0, ())] * 4)
    out, flag = inflate(t, np.arange(4), 5000, np.random.default_rng(0))
    assert out.tolist() == [0, 1, 2, 3] and not flag.any()


# -- bad node and pod lists ------------------------------------------------------------------
NODE_HEAD = "sn,cpu_milli,memory_mib,gpu,model\n"
POD_HEAD = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,creation_time\n"
GOOD_NODES = "n1,64000,262144,2,T4\nn2,96000,393216,8,G2\nn3,32000,131072,0,\n"
GOOD_PODS = "p1,4000,8192,1,500,,0\np2,8000,16384,2,1000,G2,1\np3,1000,1024,0,0,,2\n"


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize("text, line, field, what", [
    (NODE_HEAD + GOOD_NODES + "n4,-8000,1024,1,T4\n", 5, "cpu_milli", "-8000 is negative"),
    (NODE_HEAD + "n1,64000,262144,-2,T4\n", 2, "gpu", "-2 is negative"),
    (NODE_HEAD + GOOD_NODES + "n4,,1024,1,T4\n", 5, "cpu_milli", "missing"),
    (NODE_HEAD + "n1,64000,262144,,T4\n", 2, "gpu", "missing"),
    (NODE_HEAD + "n1,64000,lots,2,T4\n", 2, "memory_mib", "'lots' is not a number"),
    (NODE_HEAD + "n1,64000,262144,1.5,T4\n", 2, "gpu", "'1.5' is not a whole number"),
    (NODE_HEAD + GOOD_NODES + "n4,8000,1024,2,\n", 5, "model", "missing for a node with 2 GPUs"),
    (NODE_HEAD + GOOD_NODES + "n2,8000,1024,2,T4\n", 5, "sn", "'n2' is also on line 3"),
    (NODE_HEAD + ",8000,1024,2,T4\n", 2, "sn", "missing"),
])
def test_bad_node_lists_name_file_line_and_field(tmp_path, text, line, field, what):
    path = write(tmp_path, "nodes.csv", text)
    with pytest.raises(ConfigError) as e:
        read_nodes(path)
    assert str(e.value) == f"{path}: line {line}: {field}: {what}"


def test_a_node_list_missing_a_column(tmp_path):
    path = write(tmp_path, "nodes.csv", "sn,cpu_milli,memory_mib,model\nn1,1,1,T4\n")
    with pytest.raises(ConfigError, match=re.escape(f"{path}: line 1: no column 'gpu'")):
        read_nodes(path)
    path = write(tmp_path, "n2.csv", "")
    with pytest.raises(ConfigError, match=re.escape(f"{path}: line 1: no column 'sn'")):
        read_nodes(path)


@pytest.mark.parametrize("row, field, what", [
    ("p4,4000,8192,1,1500,,3", "gpu_milli", "1500 is more than one GPU (1000)"),
    ("p4,4000,8192,2,500,,3", "gpu_milli", "500 with num_gpu 2; a share of a GPU is for one GPU"),
    ("p4,4000,8192,1,0,,3", "gpu_milli", "0 for a pod of 1 GPU(s)"),
    ("p4,4000,8192,0,300,,3", "num_gpu", "0, but gpu_milli/gpu_spec ask for a GPU"),
    ("p4,4000,8192,0,0,T4,3", "num_gpu", "0, but gpu_milli/gpu_spec ask for a GPU"),
    ("p4,-1,8192,1,300,,3", "cpu_milli", "-1 is negative"),
    ("p4,4000,,1,300,,3", "memory_mib", "missing"),
    ("p4,4000,8192,x,300,,3", "num_gpu", "'x' is not a number"),
    ("p4,4000,8192,1,300,,-3", "creation_time", "'-3' is not a time"),
])
def test_bad_pod_lists_name_file_line_and_field(tmp_path, row, field, what):
    path = write(tmp_path, "pods.csv", POD_HEAD + GOOD_PODS + row + "\n")
    with pytest.raises(ConfigError) as e:
        read_pods(path)
    assert str(e.value).startswith(f"{path}: line 5: {field}: {what}")


def test_a_pod_list_missing_a_column_and_optional_columns(tmp_path):
    path = write(tmp_path, "pods.csv", "name,cpu_milli,memory_mib,gpu_milli\np,1,1,0\n")
    with pytest.raises(ConfigError, match=re.escape(f"{path}: line 1: no column 'num_gpu'")):
        read_pods(path)
    # gpu_spec, creation_time and deletion_time may be absent
    path = write(tmp_path, "p2.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
                                     "a,1000,10,1,250\nb,1000,10,0,\n")
    t = read_pods(path)
    assert t.gpu_milli.tolist() == [250, 0] and t.types == ((), ()) and t.lines == (2, 3)
    assert np.isnan(t.creation).all()


def test_column_mappings(tmp_path):
    path = write(tmp_path, "pods.csv", "id,cores,ram,gpus,share,spec\nx,1000,10,1,250,T4\n")
    cols = {"name": "id", "cpu": "cores", "mem": "ram", "num_gpu": "gpus",
            "gpu_milli": "share"}
    t = read_pods(path, {**cols, "gpu_types": "spec"})
    assert t.names == ("x",) and t.cpu.tolist() == [1000] and t.types == (("T4",),)
    assert read_pods(path, cols).types == ((),)     # the default gpu_spec is optional
    # an optional column the mapping names is not optional: a typo must not drop the types
    with pytest.raises(ConfigError, match=re.escape(f"{path}: line 1: no column 'specs'")):
        read_pods(path, {**cols, "gpu_types": "specs"})
    with pytest.raises(ConfigError, match="gpu.pods.columns: unknown field 'gpu'"):
        read_pods(path, {"gpu": "gpus"})
    nodes = write(tmp_path, "nodes.csv", "host,c,m,g,kind\nh1,1000,10,2,T4\n")
    n = read_nodes(nodes, {"name": "host", "cpu": "c", "mem": "m", "gpus": "g",
                           "model": "kind"})
    assert n.names == ("h1",) and n.gpus.tolist() == [2] and n.model == ("T4",)


def test_good_lists_and_the_check_against_the_nodes(tmp_path):
    nodes = read_nodes(write(tmp_path, "nodes.csv", NODE_HEAD + GOOD_NODES))
    assert nodes.names == ("n1", "n2", "n3") and nodes.gpus.tolist() == [2, 8, 0]
    assert nodes.model == ("T4", "G2", "")
    pods = read_pods(write(tmp_path, "pods.csv", POD_HEAD + GOOD_PODS))
    assert pods.types == ((), ("G2",), ()) and pods.creation.tolist() == [0.0, 1.0, 2.0]
    check_against(pods, nodes)


@pytest.mark.parametrize("row, field, what", [
    ("p4,4000,8192,16,1000,,3", "num_gpu", "16 GPUs, but no node has more than 8"),
    ("p4,4000,8192,4,1000,T4,3", "num_gpu", "4 GPUs, but no node of model T4 has more than 2"),
    ("p4,4000,8192,4,1000,T4|P100,3", "num_gpu", "4 GPUs, but no node of model T4|P100 has "
     "more than 2"),
    ("p4,4000,8192,1,500,H100,3", "gpu_spec", "'H100': no node has that GPU model (the nodes "
     "have G2, T4)"),
    ("p4,4000,8192,1,500,H100|A100,3", "gpu_spec", "'H100|A100': no node has that GPU model"),
])
def test_pods_no_node_could_hold_name_file_line_and_field(tmp_path, row, field, what):
    nodes = read_nodes(write(tmp_path, "nodes.csv", NODE_HEAD + GOOD_NODES))
    path = write(tmp_path, "pods.csv", POD_HEAD + GOOD_PODS + row + "\n")
    pods = read_pods(path)
    with pytest.raises(ConfigError) as e:
        check_against(pods, nodes)
    assert str(e.value).startswith(f"{path}: line 5: {field}: {what}")
    # a pod of 8 G2 GPUs, or of 2 T4 GPUs, fits some node
    check_against(read_pods(write(tmp_path, "ok.csv", POD_HEAD + "a,1,1,8,1000,,0\n"
                                  "b,1,1,2,1000,T4|H100,0\n")), nodes)
