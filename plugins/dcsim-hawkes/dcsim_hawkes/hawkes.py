"""A self-exciting (Hawkes) arrival process with an exponential kernel.

The intensity after the arrivals ``t_1 < t_2 < ...`` is

    lambda(t) = mu + sum over t_i < t of alpha * exp(-beta * (t - t_i)):

a baseline ``mu``, and each arrival raising the rate by ``alpha``, decaying at ``beta``. An
arrival begets on average ``alpha / beta`` others (the branching ratio), so the process is
stationary only when ``alpha / beta < 1``; its long-run rate is then
``mu / (1 - alpha / beta)``.

It is simulated exactly, with the recursion of Dassios and Zhao ("Exact simulation of
Hawkes process with exponentially decaying intensity", 2013): with ``e`` the excitation
``lambda - mu`` just after the last arrival, the next gap is the smaller of a baseline
exponential ``-ln(U2) / mu`` and the first event of the decaying excitation,
``-ln(1 + beta ln(U1) / e) / beta`` (none when the logarithm's argument is not positive);
then ``e`` decays over the gap and jumps by ``alpha``. Each arrival takes two uniforms, in
order, so a batch drawn in pieces is the draw made at once.

The excitation carries from one batch to the next through dcsim's ``stream()``: a run asks
for its arrivals in batches, and the next batch must start from the excitation the last one
left (a fresh start, ``times``, begins with no history: rate ``mu``).
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

import numpy as np
from dcsim.workload import BaseArrivals
from dcsim.workload.arrival_base import not_huge
from pydantic import AfterValidator, ConfigDict, Field, ValidationInfo, field_validator

__all__ = ["HawkesArrivals"]

_Rate = Annotated[float, Field(gt=0.0), AfterValidator(not_huge)]


class HawkesArrivals(BaseArrivals):
    """Self-exciting arrivals: baseline ``mu``, each arrival adds ``alpha`` to the rate,
    decaying at ``beta`` (exponential kernel); stationary when alpha / beta < 1."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    process: Literal["hawkes"] = "hawkes"
    mu: _Rate = Field(description="baseline rate (arrivals per time unit)")
    beta: _Rate = Field(description="decay rate of an arrival's excitation")
    alpha: float = Field(ge=0.0, description="jump of the rate at each arrival")

    @field_validator("alpha")
    @classmethod
    def _stationary(cls, v: float, info: ValidationInfo) -> float:
        beta = info.data.get("beta")
        if beta is not None and not v / beta < 1.0:
            raise ValueError(
                f"alpha / beta is {v / beta:.4g}: the process is stationary only when "
                f"alpha < beta (each arrival begets alpha / beta others on average; at 1 "
                f"or more the arrivals explode); give alpha below {beta:g}")
        return v

    @property
    def branching_ratio(self) -> float:
        """alpha / beta: the mean number of arrivals each arrival triggers."""
        return self.alpha / self.beta

    @property
    def rate(self) -> float:
        """The stationary rate mu / (1 - alpha / beta)."""
        return self.mu / (1.0 - self.branching_ratio)

    def stream(self) -> _HawkesStream:
        """The run's ``times``, carrying the excitation from one batch to the next."""
        return _HawkesStream(self)

    def times(self, rng: np.random.Generator, n: int, start: float = 0.0) -> np.ndarray:
        """``n`` arrivals after ``start`` with no history before it."""
        return _HawkesStream(self)(rng, n, start)


class _HawkesStream:
    """One run of the process: the last arrival's time and the excitation just after it."""

    def __init__(self, process: HawkesArrivals) -> None:
        self.mu, self.alpha, self.beta = process.mu, process.alpha, process.beta
        self.last: float | None = None
        self.excitation = 0.0

    def __call__(self, rng: np.random.Generator, n: int, start: float = 0.0) -> np.ndarray:
        if n == 0:
            return np.zeros(0)
        mu, alpha, beta = self.mu, self.alpha, self.beta
        e = self.excitation
        if self.last is not None and start > self.last:
            e *= math.exp(-beta * (start - self.last))  # no arrival in between: it decays
        t = float(start)
        out = np.empty(n)
        u = rng.random((n, 2)).tolist()
        for i, (u1, u2) in enumerate(u):
            gap = -math.log1p(-u2) / mu  # 1 - U is in (0, 1]: the logarithm is finite
            if e > 0.0:
                d = 1.0 + beta * math.log1p(-u1) / e
                if d > 0.0:
                    gap = min(gap, -math.log(d) / beta)
            t += gap
            e = e * math.exp(-beta * gap) + alpha
            out[i] = t
        self.last, self.excitation = t, e
        return out
