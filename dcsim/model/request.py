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
