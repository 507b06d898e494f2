"""The base every arrival process derives from, and the bounds rates and times keep."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dcsim.validation import ConfigModel

__all__ = ["HUGE", "BaseArrivals", "TimesFn", "not_huge"]

#: the largest rate (and 1 / the smallest interval): beyond it float times between arrivals
#: fall below 1e-100 and time averages turn to noise
HUGE = 1e100

#: ``times(rng, n, start)``: the next ``n`` arrival times after ``start``
TimesFn = Callable[[np.random.Generator, int, float], np.ndarray]


def not_huge(v: float) -> float:
    """``v`` if it lies in [1e-100, 1e100], where float times between arrivals stay usable."""
    if not 1.0 / HUGE <= v <= HUGE:
        raise ValueError(f"{v:g} is outside [1e-100, 1e+100], where float times between "
                         "arrivals stay usable")
    return v


class BaseArrivals(ConfigModel):
    """What every arrival process shares: ``times`` and :meth:`stream`, the per-run draw of
    batches."""

    def times(self, rng: np.random.Generator, n: int, start: float = 0.0) -> np.ndarray:
        raise NotImplementedError

    def stream(self) -> TimesFn:
        """``times`` for one run: a process whose next batch depends on more than ``start``
        returns a callable holding that state; a memoryless one, ``times`` itself."""
        return self.times
