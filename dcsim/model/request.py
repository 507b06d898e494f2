"""A request for resources: when it arrives, how long it holds, what it needs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(slots=True)
class Request:
    """One arrival.

    ``demand`` has one entry per topology resource (``cpu``, ``mem``, ...), totalled over the
    servers the request may span. ``bandwidth`` is the per-flow bandwidth a multi-server
    request needs between its servers (0 for single-server requests). ``attrs`` holds
    family-specific fields (e.g. a virtual cluster's N, S, B); they become extra columns of
    the per-request results.
    """

    id: int
    arrival: float
    duration: float
    demand: np.ndarray
    bandwidth: float = 0.0
    attrs: dict[str, Any] = field(default_factory=dict)
