"""RackImbalance fed by hand, without the engine: its hooks called as a run would."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dcsim import ClusterState, Placement, Request, StateView
from dcsim.metrics import RunStart
from dcsim.model.topologies import build_topology

from dcsim_rack_imbalance import RackImbalance


def started(topology: dict, **options) -> RackImbalance:
    topo = build_topology(topology)
    view = StateView(ClusterState(topo))
    m = RackImbalance(RackImbalance.parse_options(options))
    m.on_start(RunStart("loss", topo, view, tuple(topo.resources)))
    return m


TWO_RACKS = {"kind": "fat_tree", "pods": 1, "racks": 2, "hosts": 1, "server": {"cpu": 4},
             "host_link": 10}


def request(i: int, t: float, cpu: float) -> Request:
    return Request(id=i, arrival=t, duration=1.0, demand=np.array([cpu]))


def place(m, i, t, server, cpu):
    r = request(i, t, cpu)
    p = Placement.single(server, np.array([cpu]))
    m.on_arrival(t, r, None)
    m.on_decision(t, r, p)
    return r, p


def test_two_racks_by_hand():
    """Rack shares (0.5, 0) from 0 to 4: CV 1; (0.5, 1) from 4 to 8: CV 1/3; the mean from
    the first to the last arrival (at 8) is (4 · 1 + 4 · 1/3) / 8 = 2/3."""
    m = started(TWO_RACKS)
    place(m, 0, 0.0, 0, 2.0)
    assert m.sample(0.0) == {"rack_imbalance": pytest.approx(1.0)}
    place(m, 1, 4.0, 1, 4.0)
    assert m.sample(4.0) == {"rack_imbalance": pytest.approx(1 / 3)}
    r, p = place(m, 2, 8.0, 0, 1.0)
    m.on_departure(9.0, r, p)   # after the last arrival: not in the mean
    out = m.summary()
    assert out["rack_imbalance_mean"] == pytest.approx(2 / 3)
    assert out["rack_imbalance_max"] == pytest.approx(1.0)


def test_a_flat_cluster_is_one_rack_and_always_balanced():
    m = started({"kind": "flat", "servers": 3, "server": {"cpu": 4, "mem": 4}})
    place(m, 0, 0.0, 0, 3.0)
    place(m, 1, 2.0, 2, 1.0)
    assert m.sample(2.0) == {"rack_imbalance": 0.0}
    assert m.summary() == {"rack_imbalance_mean": 0.0, "rack_imbalance_max": 0.0}


def test_nothing_arrived_gives_no_value():
    out = started(TWO_RACKS).summary()
    assert math.isnan(out["rack_imbalance_mean"]) and math.isnan(out["rack_imbalance_max"])


def test_an_unknown_resource_is_refused():
    with pytest.raises(Exception, match="no 'gpu'"):
        started(TWO_RACKS, resource="gpu")
