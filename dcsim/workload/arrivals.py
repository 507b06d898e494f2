"""Arrival processes: when requests arrive, drawn a batch at a time.

Each process is a pydantic model selected by its ``process`` key, with a vectorised
``times(rng, n, start)`` giving the next ``n`` arrival times after ``start`` (the previous
arrival, 0 at the beginning) and a ``rate`` in arrivals per time unit.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import numpy as np
from pydantic import AfterValidator, BeforeValidator, ConfigDict, Field

from dcsim.validation import ConfigModel

#: the largest rate (and 1 / the smallest interval): beyond it float times between arrivals
#: fall below 1e-100 and time averages turn to noise
_HUGE = 1e100


def _not_huge(v: float) -> float:
    if not 1.0 / _HUGE <= v <= _HUGE:
        raise ValueError(f"{v:g} is outside [1e-100, 1e+100], where float times between "
                         "arrivals stay usable")
    return v


_Scale = Annotated[float, Field(gt=0.0), AfterValidator(_not_huge)]


class PoissonArrivals(ConfigModel):
    """Exponential gaps of mean ``1/rate``; the first arrival is one gap after ``start``."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    process: Literal["poisson"] = "poisson"
    rate: _Scale

    def times(self, rng: np.random.Generator, n: int, start: float = 0.0) -> np.ndarray:
        return start + np.cumsum(rng.exponential(1.0 / self.rate, n))


class TickArrivals(ConfigModel):
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


class BernoulliArrivals(ConfigModel):
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


def _need_process(value: Any) -> Any:
    if isinstance(value, dict) and "process" not in value:
        raise ValueError("missing 'process' (one of: poisson, tick, bernoulli)")
    return value


Arrival = Annotated[
    Annotated[PoissonArrivals | TickArrivals | BernoulliArrivals, Field(discriminator="process")],
    BeforeValidator(_need_process),
]
ArrivalProcess = PoissonArrivals | TickArrivals | BernoulliArrivals
