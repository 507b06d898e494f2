"""Whole rows of a trace table drawn at random: a trace's joint demand, synthetic timing.

``workload.trace.resample: true`` keeps a trace's per-request demand (every resource column
of one row together, so cpu and memory stay paired as in the trace) but not its clock: each
request takes a row drawn uniformly with replacement from the table, after ``scale`` and
``cap``, while ``arrival`` and ``duration`` come from the workload's synthetic processes.
Different seeds draw different rows; the allocators of one seed see the same ones.
"""

from __future__ import annotations

import numpy as np

from dcsim.errors import ConfigError
from dcsim.workload.traces import TraceSource


class TableRows:
    """Every row of a trace table held in memory (after ``scale`` and ``cap``), to draw from.

    ``demand`` has one column per resource (the source's resource order), ``bandwidth`` is the
    table's bandwidth column (0 when unmapped), ``attrs`` the carried attribute columns.
    With ``bandwidth_low``, a request's bandwidth is not the row's but drawn uniformly
    between ``bandwidth_low`` and the row's (either order, like Python's
    ``random.uniform``).
    """

    def __init__(self, source: TraceSource, bandwidth_low: float | None = None) -> None:
        batches = list(source.batches())
        self.name = source.name
        self.resources = source.resources
        if not batches:
            raise ConfigError(f"{self.name}: no rows to resample")
        self.demand = np.concatenate([b.demand for b in batches])
        self.bandwidth = np.concatenate([b.bandwidth for b in batches])
        self.attrs = {k: np.concatenate([b.attrs[k] for b in batches]) for k in batches[0].attrs}
        self.dropped = source.dropped
        self.redrawn = source.redrawn
        self.bandwidth_low = bandwidth_low

    def __len__(self) -> int:
        return len(self.demand)

    def mean(self, resource: str) -> float:
        """The exact mean of ``resource`` over the rows (= the mean of a resampled request)."""
        return float(self.demand[:, self.resources.index(resource)].mean())

    def indices(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` row numbers drawn uniformly with replacement."""
        return rng.integers(0, len(self), n)

    def draw_bandwidth(self, rng: np.random.Generator, idx: np.ndarray) -> np.ndarray:
        """The bandwidth of the requests drawn as rows ``idx``."""
        bw = self.bandwidth[idx]
        if self.bandwidth_low is None:
            return bw
        return self.bandwidth_low + (bw - self.bandwidth_low) * rng.random(len(idx))
