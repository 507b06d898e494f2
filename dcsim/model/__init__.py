"""The domain: topology, cluster state, requests and placements. Never imports SimPy."""

from dcsim.model.placement import Placement
from dcsim.model.request import Request
from dcsim.model.state import ClusterState, StateView
from dcsim.model.topologies import TopologyBuilder
from dcsim.model.topology import Topology

__all__ = ["ClusterState", "Placement", "Request", "StateView", "Topology", "TopologyBuilder"]
