"""A request for resources: when it arrives, how long it holds, what it needs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(slots=True, frozen=True)
class Request:
    """One arrival.

    ``demand`` has one entry per topology resource (``cpu``, ``mem``, ...), totalled over the
    servers the request may span. ``bandwidth`` is the per-flow bandwidth a multi-server
    request needs between its servers (0 for single-server requests). ``attrs`` holds
    family-specific fields (e.g. a virtual cluster's N, S, B); they become extra columns of
    the per-request results.

    A request is read-only: its fields cannot be reassigned, and the engine hands plugins a
    read-only ``demand`` array and a read-only ``attrs`` mapping, so an allocator cannot
    change what it was asked for (a write raises).
    """

    id: int
    arrival: float
    duration: float
    demand: np.ndarray
    bandwidth: float = 0.0
    attrs: Mapping[str, Any] = field(default_factory=dict)


_FIELDS = ("id", "arrival", "duration", "demand", "bandwidth", "attrs")


class _Blank:
    """Request's slots, writable: :func:`new_request` fills one, then makes it a Request."""

    __slots__ = _FIELDS


def new_request(id: int, arrival: float, duration: float, demand: np.ndarray,
                bandwidth: float, attrs: Mapping[str, Any]) -> Request:
    """``Request(id, arrival, duration, demand, bandwidth, attrs)``, built without the frozen
    dataclass's ``__init__`` (which sets each field through ``object.__setattr__``): the
    fields are written into an object of :class:`_Blank` (the same slots, writable), whose
    class is then set to :class:`Request` (Python allows it between classes of one layout).
    A third of the time, for the engine's one request per arrival; the object is the same
    as ``Request``'s own, frozen like it."""
    r = _Blank()
    r.id = id
    r.arrival = arrival
    r.duration = duration
    r.demand = demand
    r.bandwidth = bandwidth
    r.attrs = attrs
    r.__class__ = Request
    return r
