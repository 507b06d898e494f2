"""Records: column-oriented buffers (appending to lists is the cheapest per-event
bookkeeping) and the loss engine's request rows, built a workload batch at a time."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from dcsim.errors import DcsimError
from dcsim.model import Placement, Topology
from dcsim.workload.base import RequestBatch


class ColumnBuffer:
    """Rows held as one list per column, handed to a sink in batches and then cleared."""

    def __init__(self, names: list[str] | None):
        self._names = list(names or [])
        self.columns: defaultdict[str, list] = defaultdict(list)
        self.rows = 0
        self.clear()

    def append_row(self, row: dict[str, Any]) -> None:
        for k, v in row.items():
            self.columns[k].append(v)
        self.rows += 1

    def clear(self) -> None:
        self.columns = defaultdict(list)
        for n in self._names:
            self.columns[n]  # fix the column order up front
        self.rows = 0


_INDEX_OR_NONE = {int, type(None)}


def request_columns(
    topo: Topology,
    batch: RequestBatch,
    ids: np.ndarray,
    arrival: np.ndarray,
    accepted: np.ndarray,
    measured: np.ndarray,
    placements: list[Placement | int | None],
    decisions: list[float],
    waits: np.ndarray | None,
    switch_on: np.ndarray | None = None,
) -> dict[str, Any]:
    """One batch's rows of the ``requests`` table (:data:`dcsim.results.schema.LOSS_REQUESTS`),
    built column-wise. ``switch_on``: each request's switch-on delay (``power.
    power_on_delay``, when its server was off), which it held its resources for before its
    duration."""
    n = len(placements)
    duration = np.asarray(batch.duration, dtype=np.float64)
    cols: dict[str, Any] = {"id": ids, "arrival": arrival, "duration": duration}
    for j, name in enumerate(topo.resources):
        cols[name] = batch.demand[:, j]
    cols["bandwidth"] = batch.bandwidth
    for k, v in batch.attrs.items():
        cols[k] = v
    cols["accepted"] = accepted
    if waits is None:
        cols["wait"] = np.zeros(n)
        start = arrival
    else:
        cols["wait"] = waits
        start = arrival + waits
    cols["start"] = np.where(accepted, start, np.nan)
    held = duration if switch_on is None else duration + switch_on
    cols["end"] = np.where(accepted, start + held, np.nan)
    # a placement, None (rejected) or a server index (the whole request on that server)
    # defaults for the common case (one server, no network); others are fixed up below
    locality = np.where(accepted, 0, -1)
    footprint = np.where(accepted, 0.0, np.nan)
    if set(map(type, placements)) <= _INDEX_OR_NONE:  # the fused path's every choice
        servers = [[] if p is None else [p] for p in placements]
        cols["n_servers"] = accepted.astype(np.int64)
    else:
        servers = [[] if p is None else [p] if type(p) is int else p.servers.tolist()
                   for p in placements]
        for i, p in enumerate(placements):
            if p is not None and type(p) is not int and (p.servers.shape[0] != 1
                                                         or p.links.shape[0]):
                locality[i] = topo.locality(p.servers)
                footprint[i] = p.footprint
        cols["n_servers"] = np.fromiter(map(len, servers), dtype=np.int64, count=n)
    cols["servers"] = servers
    cols["locality"] = locality
    cols["footprint"] = footprint
    cols["measured"] = measured
    cols["decision_s"] = np.asarray(decisions, dtype=np.float64)
    return cols


def unpack_batch(batch: RequestBatch, resources: tuple[str, ...] | list[str], first_id: int):
    """A batch's columns as the engine's per-request loop reads them: a read-only demand
    array and Python lists; a :class:`DcsimError` names the first request with a
    non-finite or negative value (``first_id`` numbers the batch's first request)."""
    n_res = len(resources)
    demand = np.ascontiguousarray(batch.demand, dtype=np.float64)
    if demand.ndim != 2 or demand.shape[1] != n_res:
        raise DcsimError(
            f"workload yields demand of shape {demand.shape}; expected "
            f"(n, {n_res}) for resources {tuple(resources)}"
        )
    for name, col in (("arrival", batch.arrival), ("duration", batch.duration),
                      ("demand", demand), ("bandwidth", batch.bandwidth)):
        bad = ~np.isfinite(col) if name == "arrival" else ~(np.isfinite(col) & (col >= 0))
        if bad.any():
            i = int(np.flatnonzero(bad.reshape(len(col), -1).any(axis=1))[0])
            raise DcsimError(
                f"workload: request {first_id + i} has {name} "
                f"{np.asarray(col[i]).tolist()}: every arrival must be finite and every "
                "duration, demand and bandwidth finite and non-negative (a trace's value, "
                "or a distribution's parameters too large for floats)")
    # read-only, so a plugin cannot change a request it is given (a view when
    # ascontiguousarray returned the workload's own array)
    demand = demand.view()
    demand.flags.writeable = False
    attrs = {k: v.tolist() for k, v in batch.attrs.items()}
    return demand, batch.duration.tolist(), batch.bandwidth.tolist(), attrs
