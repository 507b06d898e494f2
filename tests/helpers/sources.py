"""Request streams built without any YAML: requests given as arrays, random Poisson ones."""

from __future__ import annotations

import numpy as np

from dcsim.workload import RequestBatch


class ListSource:
    """Requests given as arrays, yielded in batches of ``batch``."""

    def __init__(self, arrival, duration, demand, bandwidth=None, batch=7, attrs=None):
        self.arrival = np.asarray(arrival, dtype=float)
        self.duration = np.asarray(duration, dtype=float)
        self.demand = np.asarray(demand, dtype=float)
        n = len(self.arrival)
        self.bandwidth = np.zeros(n) if bandwidth is None else np.asarray(bandwidth, float)
        self.attrs = attrs or {}
        self.batch = batch

    def batches(self, rng):
        for i in range(0, len(self.arrival), self.batch):
            sl = slice(i, i + self.batch)
            yield RequestBatch(
                self.arrival[sl], self.duration[sl], self.demand[sl], self.bandwidth[sl],
                {k: np.asarray(v)[sl] for k, v in self.attrs.items()},
            )


def random_source(rng: np.random.Generator, n: int, rate: float = 2.0, hold: float = 5.0,
                  max_demand: int = 5) -> ListSource:
    arrival = np.cumsum(rng.exponential(1 / rate, n))
    duration = rng.exponential(hold, n)
    demand = rng.integers(0, max_demand + 1, size=(n, 2))
    return ListSource(arrival, duration, demand)
