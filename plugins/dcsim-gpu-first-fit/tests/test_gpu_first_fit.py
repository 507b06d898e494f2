"""GpuFirstFit on a hand-built four-node cluster (without the engine), then one small run in
dcsim's GPU engine."""

from __future__ import annotations

import numpy as np
import pytest
from dcsim import ConfigError
from dcsim.gpu import GpuCluster, GpuNodes, GpuPod
from dcsim.modes.gpu.engine import run_gpu

from dcsim_gpu_first_fit import GpuFirstFit, register_gpu_allocators

# node 0: no GPU; node 1: 2 T4, little cpu; nodes 2 and 3: 4 V100 each (milli-cpu, MiB)
NODES = GpuNodes(names=("cpu-0", "t4-1", "v100-2", "v100-3"),
                 cpu=np.array([32_000, 8_000, 64_000, 64_000]),
                 mem=np.array([65_536, 65_536, 262_144, 262_144]),
                 gpus=np.array([0, 2, 4, 4]), model=("", "T4", "V100", "V100"))


def pod(cpu=1_000, num_gpu=1, gpu_milli=500, types=(), mem=1_024) -> GpuPod:
    return GpuPod(id=0, cpu=cpu, mem=mem, num_gpu=num_gpu, gpu_milli=gpu_milli, types=types)


def cluster(used: dict[tuple[int, int], int] | None = None, cpu_used=None) -> GpuCluster:
    """The four nodes with ``used[(node, device)]`` milli-GPU (and ``cpu_used[node]``
    milli-cpu) already taken, each by a pod of its own."""
    state = GpuCluster(NODES)
    for (node, device), milli in (used or {}).items():
        state.reserve(pod(cpu=0, mem=0, gpu_milli=milli), node, (device,))
    for node, cpu in (cpu_used or {}).items():
        state.reserve(pod(cpu=cpu, mem=0, num_gpu=0, gpu_milli=0), node, ())
    return state


def allocator(**options) -> GpuFirstFit:
    return GpuFirstFit(GpuFirstFit.parse_options(options))


def choose(state: GpuCluster, p: GpuPod, **options):
    """What the allocator chooses, through the read-only view the engine hands it; the
    choice must be one the cluster accepts."""
    choice = allocator(**options).allocate(p, state.view())
    if choice is not None:
        assert state.reason(p, *choice) is None, choice
    return choice


def test_a_cpu_only_pod_goes_to_the_first_node_with_room():
    """No GPU asked: node 0 (no GPU) is first; when its cpu is taken, node 1."""
    assert choose(cluster(), pod(num_gpu=0, gpu_milli=0)) == (0, ())
    assert choose(cluster(cpu_used={0: 32_000}), pod(num_gpu=0, gpu_milli=0)) == (1, ())


def test_a_gpu_pod_goes_to_the_first_node_that_fits():
    """Node 0 has no GPU, so a GPU pod starts at node 1; too little cpu there, node 2; a
    pod that accepts only V100 skips the T4 node."""
    assert choose(cluster(), pod()) == (1, (0,))
    assert choose(cluster(), pod(cpu=9_000)) == (2, (0,))
    assert choose(cluster(), pod(types=("V100",))) == (2, (0,))
    # node 1's devices are too full for 500: the first node with such a device is node 2
    assert choose(cluster({(1, 0): 600, (1, 1): 600}), pod()) == (2, (0,))


def test_a_sharing_pod_takes_the_tightest_partly_used_device():
    """Node 2's devices have 1000, 600, 300 and 600 free: 250 goes to device 2 (300 free),
    500 to device 1 (600, the lower index of the two), 700 to the fully free device 0."""
    state = cluster({(1, 0): 900, (1, 1): 900, (2, 1): 400, (2, 2): 700, (2, 3): 400})
    assert choose(state, pod(gpu_milli=250)) == (2, (2,))
    assert choose(state, pod(gpu_milli=500)) == (2, (1,))
    assert choose(state, pod(gpu_milli=700)) == (2, (0,))


def test_without_prefer_used_the_lowest_index_device_that_fits():
    """prefer_used: false takes devices in index order: the fully free device 0 first."""
    state = cluster({(1, 0): 900, (1, 1): 900, (2, 1): 400, (2, 2): 700, (2, 3): 400})
    assert choose(state, pod(gpu_milli=250), prefer_used=False) == (2, (0,))
    state = cluster({(1, 0): 900, (1, 1): 900, (2, 0): 500, (2, 2): 700})
    assert choose(state, pod(gpu_milli=250), prefer_used=False) == (2, (0,))
    assert choose(state, pod(gpu_milli=600), prefer_used=False) == (2, (1,))


def test_whole_gpus_are_the_first_fully_free_devices_of_the_first_node_with_enough():
    """Two whole GPUs: node 1 has only one fully free device, so node 2, whose device 1 is
    partly used: devices 0 and 2. Four: node 3."""
    state = cluster({(1, 0): 100, (2, 1): 100})
    assert choose(state, pod(num_gpu=2, gpu_milli=1000)) == (2, (0, 2))
    assert choose(state, pod(num_gpu=4, gpu_milli=1000)) == (3, (0, 1, 2, 3))


def test_rejects_when_nothing_fits():
    """More GPUs than any node has, a model no node has, or too much cpu: None."""
    assert choose(cluster(), pod(num_gpu=5, gpu_milli=1000)) is None
    assert choose(cluster(), pod(types=("A100",))) is None
    assert choose(cluster(), pod(cpu=65_000, num_gpu=0, gpu_milli=0)) is None


def test_it_never_writes_to_the_cluster():
    """allocate only reads: the state is the same after a choice."""
    state = cluster({(2, 1): 400})
    before = state.gpu_free.copy()
    for p in (pod(), pod(num_gpu=2, gpu_milli=1000), pod(num_gpu=0, gpu_milli=0)):
        choose(state, p)
    assert (state.gpu_free == before).all()


def test_options_label_and_registration():
    """prefer_used defaults to true; the label names it when it differs; a misspelt option
    is an error naming the field; the hook registers the class."""
    assert GpuFirstFit().options.prefer_used is True
    assert GpuFirstFit().label == "gpu_first_fit"
    assert allocator(prefer_used=False).label == "gpu_first_fit(prefer_used=False)"
    with pytest.raises(ConfigError, match="options.prefer_usd"):
        GpuFirstFit.parse_options({"prefer_usd": False})
    found = []
    register_gpu_allocators(found.append)
    assert found == [GpuFirstFit]


def test_runs_in_the_engine(tmp_path):
    """A whole run on a node list and a pod list written here, the state checked after
    every pod: every pod is offered, none is mis-placed, and the ones that fit are placed."""
    (tmp_path / "nodes.csv").write_text(
        "sn,cpu_milli,memory_mib,gpu,model\n"
        "n0,32000,65536,0,\nn1,8000,65536,2,T4\nn2,64000,262144,4,V100\n")
    (tmp_path / "pods.csv").write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n"
        "p0,4000,1024,1,500,\np1,4000,1024,1,300,V100\np2,2000,1024,2,1000,\n"
        "p3,1000,1024,0,0,\np4,1000,1024,1,200,T4\n")
    spec = {"nodes": {"path": "nodes.csv"}, "pods": {"path": "pods.csv"}, "order": "file",
            "inflate": {"target": 1.0}, "check_invariants": True}
    summary = run_gpu(spec, allocator(), np.random.default_rng(0), None, tmp_path)
    assert summary["received"] >= 5 and summary["nodes"] == 3 and summary["gpus"] == 6
    assert 0 < summary["acceptance_ratio"] <= 1
    assert 0 < summary["alloc_gpu_share"] <= 1
