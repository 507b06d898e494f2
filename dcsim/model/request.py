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
_SETTERS = tuple(Request.__dict__[f].__set__ for f in _FIELDS)


def new_request(id: int, arrival: float, duration: float, demand: np.ndarray,
                bandwidth: float, attrs: Mapping[str, Any]) -> Request:
    """``Request(id, arrival, duration, demand, bandwidth, attrs)``, built without the frozen
    dataclass's ``__init__`` (which sets each field through ``object.__setattr__``): half
    the time, for the engine's one request per arrival. The object is the same."""
    r = object.__new__(Request)
    s0, s1, s2, s3, s4, s5 = _SETTERS
    s0(r, id)
    s1(r, arrival)
    s2(r, duration)
    s3(r, demand)
    s4(r, bandwidth)
    s5(r, attrs)
    return r
