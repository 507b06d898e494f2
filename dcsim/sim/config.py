"""The loss engine's settings of one run (:class:`EngineConfig`): warm-up, sampling, what a
request that does not fit in total does, and the departure order."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

CAPACITY_MODES = ("reject", "wait")
DEPARTURE_MODES = ("before_arrivals", "after_first_step")


@dataclass
class EngineConfig:
    """Measurement settings of one run."""

    warmup_requests: int = 0  # the first N arrivals are not measured
    warmup_time: float = 0.0  # arrivals before this time are not measured
    sample_interval: float | None = None  # time-series period (simulated time)
    sample_every: int = 100  # ... or one sample per this many arrivals when no interval
    flush_rows: int = 65536  # time-series rows per batch handed to the sink
    # "reject": the allocator decides at arrival (a request that fits nowhere is dropped);
    # "wait": a request held until the cluster's total free resources cover its demand
    capacity: str = "reject"
    # "before_arrivals": requests ending at t are released before a request arriving at t is
    # offered; "after_first_step": after its first partial step (the Nara authors' clock)
    departures: str = "before_arrivals"

    def __post_init__(self) -> None:
        if self.capacity not in CAPACITY_MODES:
            raise ValueError(f"capacity must be one of {CAPACITY_MODES}, got {self.capacity!r}")
        if self.departures not in DEPARTURE_MODES:
            raise ValueError(f"departures must be one of {DEPARTURE_MODES}, "
                             f"got {self.departures!r}")


#: generation-0 threshold while an engine runs (Python's default is 700)
GC_GEN0 = 50_000


@contextmanager
def quiet_gc() -> Iterator[None]:
    """Run a simulation with less garbage-collector work: the objects alive before it
    (dcsim, numpy, pandas, the topology: ~10^5 of them) are frozen out of every collection
    (``gc.freeze``) and generation 0 is collected every 50,000 allocations instead of 700.
    A run allocates few reference cycles, so this changes when memory is reclaimed, never a
    result. Both are restored afterwards (issue #19: 2.5-8 us per request went to full
    collections scanning the frozen objects)."""
    thresholds = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(GC_GEN0, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()
