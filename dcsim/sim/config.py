"""The loss engine's settings of one run (:class:`EngineConfig`): warm-up, sampling, what a
request that does not fit in total does, and the departure order."""

from __future__ import annotations

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
