"""Power of d choices (Mitzenmacher 2001) as a dcsim allocator plugin.

Sample ``d`` servers uniformly at random, without replacement, from those that can hold the
whole request, and place it on the least loaded of them. A server's load is its busiest
resource: ``max over resources of used / capacity``. Ties go to the lowest server index.
``d = 1`` is uniform random placement; ``d >= number of servers`` is "least loaded".
"""

from __future__ import annotations

import numpy as np
from dcsim import Allocator, Choice, Request, StateView, hookimpl
from pydantic import Field


class PowerOfD(Allocator):
    """The least loaded of ``d`` random fitting servers."""

    name = "power_of_d"
    description = "least loaded of d servers sampled from those that fit (Mitzenmacher)"

    class Options(Allocator.Options):  # inherits extra="forbid": unknown keys are errors
        d: int = Field(default=2, ge=1, description="servers sampled per request")

    @classmethod
    def label_for(cls, options: Options) -> str:
        """Always show d, so results say which variant ran."""
        return f"{cls.name}(d={options.d})"

    def allocate(self, request: Request, view: StateView) -> Choice:
        fitting = np.flatnonzero(view.fits(request.demand))
        if fitting.size == 0:
            return None
        d = min(self.options.d, fitting.size)
        # sorted, so that argmin's first-minimum rule breaks ties by lowest server index
        sample = np.sort(self.rng.choice(fitting, size=d, replace=False))
        share = (view.capacity[sample] - view.free[sample]) * view.inv_capacity[sample]
        return int(sample[share.max(axis=1).argmin()])


@hookimpl
def register_allocators(register):
    register(PowerOfD)
