"""The log-logistic (Fisk) distribution: P(X <= x) = 1 / (1 + (x / scale) ** -shape) for
x >= 0, ``scipy.stats.fisk(c=shape, scale=scale)``. A heavy, power-law tail (P(X > x) falls
as x ** -shape) with a unimodal body: a common fit for job run times.

Its mean is finite only for shape > 1, ``scale * (pi / shape) / sin(pi / shape)``, which
dcsim's exact-mean machinery needs (``offered_load``, manifests). The truncated and clipped
means (``min``, ``max``) come from the partial expectation in closed form: with
F = P(X <= x), E[X; X <= x] = scale * B(1 + 1/shape, 1 - 1/shape) * I_F(1 + 1/shape,
1 - 1/shape), I the regularised incomplete beta function.

Drawn by inverting the CDF: scale * (U / (1 - U)) ** (1 / shape).
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
from dcsim.workload.distributions import ScalableDist
from pydantic import Field, PositiveFloat, field_validator
from scipy import special, stats

__all__ = ["LogLogistic"]


class LogLogistic(ScalableDist):
    """Log-logistic: ``shape`` (> 1, the tail exponent) and ``scale`` (the median), or
    ``offered_load`` in place of ``scale`` on a duration."""

    dist: Literal["loglogistic"]
    shape: float = Field(description="tail exponent; > 1 for a finite mean")
    scale: PositiveFloat | None = Field(None, description="the median")

    @field_validator("shape")
    @classmethod
    def _finite_mean(cls, v: float) -> float:
        if not v > 1.0:
            raise ValueError(f"{v:g}: the mean is finite only for shape > 1")
        return v

    def _check(self) -> None:
        if (self.scale is None) == (self.offered_load is None):
            raise ValueError("give exactly one of 'scale' or 'offered_load'")

    # ---------------------------------------------------------------- offered_load
    def _scale_update(self, c: float) -> dict[str, Any]:
        return {"scale": c}

    def _unit_mean(self) -> float:
        q = math.pi / self.shape
        return q / math.sin(q)

    # ---------------------------------------------------------------- dcsim's hooks
    def _draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        u = rng.random(n)
        return self.scale * (u / (1.0 - u)) ** (1.0 / self.shape)

    def _rv(self) -> Any:
        return stats.fisk(self.shape, scale=self.scale)

    def _partial_mean(self, a: float, b: float) -> float:
        a, b = max(a, 0.0), max(b, 0.0)
        if a >= b:
            return 0.0
        p, q = 1.0 + 1.0 / self.shape, 1.0 - 1.0 / self.shape
        whole = self.scale * self._unit_mean()  # scale * B(p, q)
        rv = self._rv()
        if a > rv.median():  # the upper tail: I_{1-F}(q, p) keeps the digits there
            sa, sb = float(rv.sf(a)), float(rv.sf(b))
            return whole * float(special.betainc(q, p, sa) - special.betainc(q, p, sb))
        fa, fb = float(rv.cdf(a)), float(rv.cdf(b))
        return whole * float(special.betainc(p, q, fb) - special.betainc(p, q, fa))
