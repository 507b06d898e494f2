"""A dragonfly network (Kim, Dally, Scott and Abts, "Technology-Driven, Highly-Scalable
Dragonfly Topology", ISCA 2008) as a dcsim topology kind.

``groups`` groups of ``routers`` routers; each router has ``hosts`` servers, a link to every
other router of its group (all-to-all local links) and ``global_links`` ports to routers of
other groups. A group thus has ``routers * global_links`` global ports, and every group must
reach every other: ``groups - 1 <= routers * global_links``. The default ``groups`` is the
largest dragonfly of that router, ``routers * global_links + 1``, where every two groups
share exactly one global link (the paper's maximal configuration; its balanced one is
``routers = 2 * hosts = 2 * global_links``).

Global wiring, the paper's consecutive arrangement: group ``i``'s port ``k`` (router
``k // global_links``) leads to the group at offset ``k mod (groups - 1) + 1`` after it,
so the ports of a group go round its peers in order. Every pair of groups gets
``(routers * global_links) // (groups - 1)`` links (a port left over when the division is
not exact stays unused). Two of those links that would join the same two routers are one
link of their summed capacity (dcsim's graph has no parallel links).

dcsim's conventions: servers are ``h<n>`` (``kind="server"``, tier 0), router ``j`` of group
``g`` is ``r<g * routers + j>`` (tier 1). A router and its servers are a rack (the rack id
is the router's number), a group is a pod, so locality reads "same router", "same group",
"across groups", and a rack's uplinks are its router's local and global links. Every link
is tier 1 (a link's tier is its upper end's): utilisation reads ``util_bw_router``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import networkx as nx
from dcsim.hookspecs import hookimpl
from dcsim.model import Topology, TopologyBuilder
from dcsim.model.topologies import MAX_SERVERS, Resources
from pydantic import (
    Field,
    PositiveFloat,
    PositiveInt,
    ValidationInfo,
    field_validator,
    model_validator,
)

__all__ = ["Dragonfly", "register_topologies"]


class Dragonfly(TopologyBuilder):
    """A dragonfly: ``groups`` x ``routers`` routers with ``hosts`` servers each."""

    kind: Literal["dragonfly"] = "dragonfly"
    routers: PositiveInt = Field(4, description="routers per group (a)")
    hosts: PositiveInt = Field(2, description="servers per router (p)")
    global_links: PositiveInt = Field(2, description="global ports per router (h)")
    groups: PositiveInt | None = Field(
        None, ge=2, description="groups (g); default routers * global_links + 1")
    server: Resources = Field(default_factory=lambda: {"cpu": 16.0, "mem": 64.0},
                              description="each server's resources")
    host_link: PositiveFloat = Field(10.0, description="server-router link capacity")
    local_link: PositiveFloat = Field(40.0, description="router-router link in a group")
    global_link: PositiveFloat = Field(40.0, description="router-router link between groups")

    @field_validator("groups")
    @classmethod
    def _every_group_reaches_every_other(cls, v: int | None, info: ValidationInfo
                                         ) -> int | None:
        if v is None or not {"routers", "global_links"} <= info.data.keys():
            return v  # the default, or a field before it is wrong already
        ports = info.data["routers"] * info.data["global_links"]
        if v - 1 > ports:
            raise ValueError(
                f"{v} groups need {v - 1} global ports per group to link every group to "
                f"every other; routers x global_links gives {ports} (at most {ports + 1} "
                "groups)")
        return v

    @model_validator(mode="after")
    def _size(self) -> Dragonfly:
        if self.groups is None:
            self.groups = self.routers * self.global_links + 1
        servers = self.groups * self.routers * self.hosts
        if servers > MAX_SERVERS:
            raise ValueError(f"{servers:,} servers (groups x routers x hosts) is more than "
                             f"dcsim builds ({MAX_SERVERS:,})")
        return self

    @property
    def links_per_pair(self) -> int:
        """Global links between every two groups."""
        return (self.routers * self.global_links) // (self.groups - 1)

    def router(self, group: int, port: int) -> str:
        """The router holding global port ``port`` of ``group``."""
        return f"r{group * self.routers + port // self.global_links}"

    def build(self) -> Topology:
        a, p, g = self.routers, self.hosts, self.groups
        graph = nx.Graph()
        for r in range(g * a):
            for s in range(p):
                graph.add_node(f"h{r * p + s}", kind="server", tier=0, rack=r, pod=r // a,
                               **self.server)
        for r in range(g * a):
            graph.add_node(f"r{r}", kind="switch", tier=1, rack=r, pod=r // a)
            for s in range(p):
                graph.add_edge(f"h{r * p + s}", f"r{r}", capacity=float(self.host_link))
        for group in range(g):
            first = group * a
            for i in range(a):
                for j in range(i + 1, a):
                    graph.add_edge(f"r{first + i}", f"r{first + j}",
                                   capacity=float(self.local_link))
        for i in range(g):
            for j in range(i + 1, g):
                off = j - i  # j is i's peer at offset off, i is j's at offset g - off
                for m in range(self.links_per_pair):
                    u = self.router(i, m * (g - 1) + off - 1)
                    v = self.router(j, m * (g - 1) + (g - off) - 1)
                    cap = graph.edges[u, v]["capacity"] if graph.has_edge(u, v) else 0.0
                    graph.add_edge(u, v, capacity=cap + float(self.global_link))
        params = self._params() | {"links_per_pair": self.links_per_pair}
        return Topology.from_graph(
            graph, name=self.name or f"dragonfly-{g}x{a}x{p}", resources=list(self.server),
            tier_names={1: "router"}, params=params, source="dragonfly")


@hookimpl
def register_topologies(register: Callable[[type], None]) -> None:
    register(Dragonfly)
