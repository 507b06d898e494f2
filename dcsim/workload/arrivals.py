"""Arrival processes: when requests arrive, drawn a batch at a time.

Each process is a pydantic model selected by its ``process`` key, with a vectorised
``times(rng, n, start)`` giving the next ``n`` arrival times after ``start`` (the previous
arrival, 0 at the beginning) and a ``rate`` in arrivals per time unit (the long-run mean
rate of a time-varying process). A run draws its batches through ``stream()``: the
``times`` of a process that carries state from one batch to the next (the phase of a
Markov-modulated process), else ``times`` itself.

Time-varying processes (:mod:`dcsim.workload.arrivals_time`): ``diurnal``, ``nhpp``,
``trace_rate`` and ``mmpp``. Plugins add processes of their own: a :class:`BaseArrivals`
subclass with its ``process: Literal[...]``, registered through
``register_arrival_processes`` like the built-ins (:mod:`dcsim.builtin_kinds`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import numpy as np
from pydantic import AfterValidator, ConfigDict, Field

from dcsim.registered_union import RegisteredUnion, names
from dcsim.workload.arrival_base import BaseArrivals, not_huge

_Scale = Annotated[float, Field(gt=0.0), AfterValidator(not_huge)]


class PoissonArrivals(BaseArrivals):
    """Exponential gaps of mean ``1/rate``; the first arrival is one gap after ``start``."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    process: Literal["poisson"] = "poisson"
    rate: _Scale

    def times(self, rng: np.random.Generator, n: int, start: float = 0.0) -> np.ndarray:
        return start + np.cumsum(rng.exponential(1.0 / self.rate, n))


class TickArrivals(BaseArrivals):
    """One arrival per tick, at ``start + interval, start + 2*interval, ...`` (no randomness);
    Nara's "one arrival per tick" with holding times counted in arrivals."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    process: Literal["tick"] = "tick"
    interval: _Scale = 1.0

    @property
    def rate(self) -> float:
        return 1.0 / self.interval

    def times(self, rng: np.random.Generator, n: int, start: float = 0.0) -> np.ndarray:
        return start + self.interval * np.arange(1, n + 1, dtype=np.float64)


class BernoulliArrivals(BaseArrivals):
    """At each tick (multiples of ``interval``) a request arrives with probability ``p``, at
    most one per tick (DeepRM's ``new_job_rate``): gaps are geometric numbers of ticks."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    process: Literal["bernoulli"] = "bernoulli"
    p: float = Field(gt=0.0, le=1.0)
    interval: _Scale = 1.0

    @property
    def rate(self) -> float:
        return self.p / self.interval

    def times(self, rng: np.random.Generator, n: int, start: float = 0.0) -> np.ndarray:
        return start + self.interval * np.cumsum(rng.geometric(self.p, n)).astype(np.float64)


#: the built-in processes (plugins add theirs through ``register_arrival_processes``)
PROCESSES = ("poisson", "tick", "bernoulli", "diurnal", "nhpp", "trace_rate", "mmpp")


def _need_process(value: Any) -> Any:
    if isinstance(value, dict) and "process" not in value:
        raise ValueError(f"missing 'process' (one of: {', '.join(names('arrival'))})")
    return value


#: a ``workload.arrival`` value: any registered process (the built-ins, then plugins')
Arrival = RegisteredUnion("arrival", before=_need_process)
