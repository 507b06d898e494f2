"""Widest path: a multi-server, network-aware dcsim allocator plugin.

A request may span servers, chosen one at a time by :meth:`WidestPath.choose`; dcsim's
multi-server step (:class:`dcsim.MultiServerAllocator`) takes ``min(free, remaining)`` from
each and reserves the request's bandwidth on a path between every pair of its servers.

* The first server: in the rack that can hold the whole request with the least left over
  (the request then needs no rack uplink); when no rack can, in the rack whose uplinks have
  the most bandwidth free (what leaves the rack goes over them). In that rack, the server
  that gives the most.
* Each later server: among those with at least the request's bandwidth free on a path to
  every server already chosen, the nearest to the first one (same rack, then same pod;
  ``locality: false`` skips this), then the one with the widest path (the most bandwidth
  free to the chosen servers), then the lowest index. None such: the request fails.
"""

from __future__ import annotations

import numpy as np
from dcsim import MultiServerAllocator, Partial, StateView, hookimpl
from pydantic import Field


class WidestPath(MultiServerAllocator):
    """One rack if it fits, else the rack with the freest uplinks; then the widest paths."""

    name = "widest_path"
    description = "multi-server: one rack if it fits, else the freest uplinks; widest paths"

    class Options(MultiServerAllocator.Options):  # reservation, k_paths, eligible, pair_paths
        locality: bool = Field(
            True, description="prefer the first server's rack, then its pod, before the "
            "widest path")

    def choose(self, partial: Partial, view: StateView) -> int | None:
        eligible = np.flatnonzero(partial.eligible())
        if eligible.size == 0:
            return None
        if not partial.servers:
            return self.first_server(partial, view, eligible)
        return self.next_server(partial, view, eligible)

    def first_server(self, partial: Partial, view: StateView, eligible: np.ndarray) -> int:
        topo = view.topology
        gives = partial.gives()  # per server and resource: min(free, remaining)
        candidates = eligible
        if topo.racks().size:  # (a flat topology has no racks: any eligible server)
            mask = partial.eligible()
            room = (view.free * view.inv_capacity).sum(axis=1)  # free, in capacity shares
            tol = 1e-9 * np.maximum(partial.remaining, 1.0)
            fits, left, uplink_free = [], [], []
            for rack in topo.racks():
                servers = topo.rack_servers(rack)
                servers = servers[mask[servers]]
                fits.append(servers.size > 0 and bool(np.all(
                    gives[servers].sum(axis=0) >= partial.remaining - tol)))
                left.append(room[servers].sum() if servers.size else np.inf)
                uplink_free.append(partial.link_free[topo.rack_uplinks(rack)].sum())
            fits, left, uplink_free = np.array(fits), np.array(left), np.array(uplink_free)
            some = np.isfinite(left)  # racks with an eligible server
            if fits.any():  # the fullest rack that holds it all (lowest id on ties)
                best = topo.racks()[fits][np.argmin(left[fits])]
            elif some.any():  # else the freest uplinks
                best = topo.racks()[some][np.argmax(uplink_free[some])]
            else:  # the eligible servers have no rack id
                best = -1
            candidates = topo.rack_servers(best)
            candidates = candidates[mask[candidates]]
        # the server that gives the most, in shares of its capacity (lowest index on ties)
        share = (gives[candidates] * view.inv_capacity[candidates]).sum(axis=1)
        return int(candidates[np.argmax(share)])

    def next_server(self, partial: Partial, view: StateView, eligible: np.ndarray
                    ) -> int | None:
        topo = view.topology
        if partial.reserved is not None:  # the request needs the network
            # the bandwidth free on the best of k paths to every chosen server; a pair of
            # servers needs it on one path: the narrowest pair decides
            width = np.full(eligible.size, np.inf)
            for t in partial.servers:
                width = np.minimum(width, self.path_service.free_bandwidths(
                    t, eligible, partial, self.options.k_paths))
            ok = width >= partial.bandwidth - 1e-9 * max(partial.bandwidth, 1.0)
            eligible, width = eligible[ok], width[ok]
            if eligible.size == 0:
                return None
        else:
            width = np.zeros(eligible.size)
        if self.options.locality:
            first = partial.servers[0]
            rack, pod = topo.rack_of(first), topo.pod_of(first)
            distance = np.full(eligible.size, 2)
            if pod >= 0:
                distance[topo.pod_of(eligible) == pod] = 1
            if rack >= 0:
                distance[topo.rack_of(eligible) == rack] = 0
        else:
            distance = np.zeros(eligible.size, dtype=np.int64)
        # nearest first, then the widest path, then the lowest index (lexsort: last key first)
        order = np.lexsort((eligible, -width, distance))
        return int(eligible[order[0]])


@hookimpl
def register_allocators(register):
    register(WidestPath)
