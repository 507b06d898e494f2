"""The interface between workloads and the engine: a stream of request batches.

A source yields :class:`RequestBatch` objects (columns as numpy arrays) in arrival order, so
the engine can pre-draw thousands of requests per numpy call and a million-row trace is read
a chunk at a time, keeping memory flat.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np


@dataclass
class RequestBatch:
    """Columns of ``n`` consecutive requests, in arrival order.

    ``demand`` has one column per topology resource (in the topology's resource order).
    ``attrs`` holds extra per-request columns (e.g. N, S, B of a virtual cluster) that are
    copied to the request's ``attrs`` and to the per-request results.
    """

    arrival: np.ndarray  # (n,) float64, non-decreasing
    duration: np.ndarray  # (n,) float64, >= 0
    demand: np.ndarray  # (n, n_resources) float64, >= 0
    bandwidth: np.ndarray  # (n,) float64, >= 0
    attrs: dict[str, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.arrival.shape[0])


class RequestSource(Protocol):
    """Anything that yields the requests of one run."""

    def batches(self, rng: np.random.Generator) -> Iterator[RequestBatch]:
        """Yield batches in arrival order; draw randomness only from ``rng``."""
        ...

