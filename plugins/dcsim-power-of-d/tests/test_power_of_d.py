"""PowerOfD on a hand-built four-server cluster, without the engine."""

from __future__ import annotations

import numpy as np
import pytest
from dcsim import ClusterState, ConfigError, Placement, Request, StateView
from dcsim.model.topologies import build_topology

from dcsim_power_of_d import PowerOfD

# cpu and mem used on each of the four 8-cpu, 8-mem servers; load = busiest resource share
USED = [
    [6, 1],  # server 0: load 0.75
    [2, 2],  # server 1: load 0.25, the least loaded
    [1, 4],  # server 2: load 0.5
    [8, 0],  # server 3: full cpu, fits no request that needs cpu
]


def cluster(used=USED) -> StateView:
    """A flat cluster of four 8-cpu, 8-mem servers with ``used`` already taken."""
    topo = build_topology({"kind": "flat", "servers": 4, "server": {"cpu": 8, "mem": 8}})
    state = ClusterState(topo)
    for server, amount in enumerate(used):
        state.reserve(Placement.single(server, np.asarray(amount, dtype=float)))
    return StateView(state)


def request(cpu: float, mem: float) -> Request:
    return Request(id=0, arrival=0.0, duration=1.0, demand=np.array([cpu, mem], dtype=float))


def allocator(seed: int = 0, **options) -> PowerOfD:
    return PowerOfD(PowerOfD.parse_options(options), rng=np.random.default_rng(seed))


def test_d_at_least_the_number_of_servers_picks_the_least_loaded_fitting_server():
    """With d >= servers every fitting server is sampled, so the least loaded one wins."""
    view = cluster()
    for d in (4, 10):
        alloc = allocator(seed=d, d=d)
        assert {alloc.allocate(request(1, 1), view) for _ in range(50)} == {1}


def test_least_loaded_ignores_servers_that_do_not_fit():
    """The least loaded server that cannot hold the request is never chosen."""
    view = cluster()
    alloc = allocator(d=4)
    assert alloc.allocate(request(6.5, 1), view) == 2  # only server 2 has 6.5 cpu free
    assert alloc.allocate(request(1, 6.5), view) == 0  # only server 0 has 6.5 mem free


def test_ties_go_to_the_lowest_index():
    """Equally loaded servers: the lowest index is chosen."""
    view = cluster(used=[[4, 0], [0, 4], [4, 4], [0, 0]])
    assert allocator(d=4).allocate(request(1, 1), view) == 3
    view = cluster(used=[[4, 0], [0, 4], [4, 4], [8, 8]])
    assert allocator(d=4).allocate(request(1, 1), view) == 0


def test_d_one_is_uniform_over_fitting_servers():
    """d=1 picks every fitting server about equally often and never a server that lacks room."""
    view = cluster()
    alloc = allocator(d=1)
    picks = np.array([alloc.allocate(request(1, 1), view) for _ in range(3000)])
    counts = np.bincount(picks, minlength=4)
    assert counts[3] == 0
    assert np.all(np.abs(counts[:3] - 1000) < 150), counts


def test_d_two_prefers_less_loaded_servers():
    """d=2 of three fitting servers: the most loaded never wins."""
    view = cluster()
    alloc = allocator(d=2)
    counts = np.bincount([alloc.allocate(request(1, 1), view) for _ in range(3000)], minlength=4)
    # pairs {0,1},{0,2},{1,2} are equally likely: server 1 wins two, server 2 one, server 0 none
    assert counts[0] == 0 and counts[3] == 0
    assert abs(counts[1] - 2000) < 150 and abs(counts[2] - 1000) < 150, counts


def test_rejects_when_nothing_fits():
    """A request no server can hold is rejected with None."""
    view = cluster()
    assert allocator().allocate(request(9, 1), view) is None
    assert allocator(d=4).allocate(request(7, 7), view) is None


def test_same_seed_same_choices():
    """Two allocators with the same seed make the same choices; another seed differs."""
    view = cluster(used=[[1, 0], [2, 0], [3, 0], [4, 0]])

    def choices(seed):
        alloc = allocator(seed=seed, d=2)
        return [alloc.allocate(request(1, 1), view) for _ in range(200)]

    assert choices(7) == choices(7)
    assert choices(7) != choices(8)


def test_default_options_and_label():
    """d defaults to 2, and the label that results use names it."""
    assert PowerOfD().options.d == 2
    assert PowerOfD().label == "power_of_d(d=2)"
    assert allocator(d=5).label == "power_of_d(d=5)"


@pytest.mark.parametrize(
    ("options", "field"),
    [({"d": 0}, "options.d"), ({"d": -3}, "options.d"), ({"k": 2}, "options.k")],
)
def test_options_reject_d_below_one_and_unknown_keys(options, field):
    """d must be at least 1, and a misspelt option is an error that names it."""
    with pytest.raises(ConfigError, match=field):
        PowerOfD.parse_options(options)
