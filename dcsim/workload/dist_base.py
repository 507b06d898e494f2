"""The machinery every distribution kind shares: modifiers, sampling, exact moments.

Modifiers: ``integer: true`` rounds every draw half-up to the nearest integer, *before* the
bounds check; ``min`` / ``max`` bound the values, and ``mode`` says how: ``truncate``
(default) redraws out-of-range samples, i.e. the conditional distribution; ``clip`` clamps.

``mean()`` accounts for the modifiers exactly: closed-form partial expectations for the
continuous kinds, exact enumeration of the pmf ``P(round(X) = k) = F(k+.5) - F(k-.5)`` for
rounded draws (ranges over 5 million integers fall back to the unrounded mean, an absolute
error below 0.5), and exact sums over finite supports. Never Monte Carlo.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import ConfigDict, PositiveFloat, PrivateAttr, model_validator
from scipy import optimize

from dcsim.errors import ConfigError
from dcsim.validation import ConfigModel

_MIN_ACCEPT = 1e-6  # a truncation keeping less mass than this is refused
_MAX_ENUM = 5_000_000  # largest integer range enumerated exactly by mean()
_TAIL = 1e-17  # tail mass ignored when enumerating an unbounded integer range
_REJECT_BELOW = 0.1  # truncations keeping less mass are sampled by inverse CDF, not rejection


class BaseDist(ConfigModel):
    """The base of every distribution kind (:mod:`dcsim.workload.distributions`): the
    modifiers, sampling (:meth:`sample`) and exact moments (:meth:`mean`) they share. A kind
    implements the hooks below; users test ``isinstance(d, BaseDist)`` to tell a parsed
    distribution from an :class:`~dcsim.workload.distributions.AttrProduct`."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    min: float | None = None
    max: float | None = None
    mode: Literal["clip", "truncate"] = "truncate"
    integer: bool = False

    _always_integer: ClassVar[bool] = False  # kinds whose raw draws are already integers
    #: (fields, P(accept)) of the last sample() call: lookahead allocators sample the same
    #: distribution thousands of times, and the exact acceptance costs scipy calls
    _accept_memo: tuple[Any, float] | None = PrivateAttr(default=None)

    # ------------------------------------------------------------------ kind hooks
    def _draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        raise NotImplementedError

    def _support(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Values and probabilities of a finite support, or None for a continuous kind."""
        return None

    def _rv(self) -> Any:
        """The scipy frozen distribution of a continuous kind."""
        raise NotImplementedError

    def _partial_mean(self, a: float, b: float) -> float:
        """E[X; a < X <= b] of a continuous kind, in closed form."""
        raise NotImplementedError

    def _check(self) -> None:
        """Kind-specific parameter checks (raise ValueError)."""

    def _ready(self) -> bool:
        return True

    # ------------------------------------------------------------------ validation
    @model_validator(mode="after")
    def _validate(self) -> BaseDist:
        try:
            self._check()
            lo, hi = self.bounds()
            if lo > hi:
                raise ValueError(f"min ({lo}) is greater than max ({hi})")
            self.check_truncation()
            # the mean (or, before offered_load resolves the scale, the unit mean) must
            # be a float: lognormal mu 1000, cv 1e300 or a weibull shape 0.002 overflow
            if self._ready():
                self.mean()
            elif hasattr(self, "_unit_mean"):
                self._unit_mean()
        except (OverflowError, ZeroDivisionError) as e:
            raise ValueError(f"its parameters overflow a float ({e}); the values it would "
                             "draw are beyond 1e308") from None
        return self

    def check_truncation(self) -> None:
        """Raise ValueError where truncation to ``[min, max]`` keeps (nearly) none of the
        probability mass; run at validation, and again by a kind that loads its values
        later (a file's column)."""
        if self._ready() and self._truncates():
            p = self.accept_probability()
            if not p >= _MIN_ACCEPT:
                raise ValueError(
                    f"truncation to [{self.min}, {self.max}] keeps {p:.3g} of the probability "
                    "mass: the range is empty (or nearly) for this distribution"
                )

    def bounds(self) -> tuple[float, float]:
        lo = -math.inf if self.min is None else float(self.min)
        hi = math.inf if self.max is None else float(self.max)
        return lo, hi

    def _truncates(self) -> bool:
        return self.mode == "truncate" and (self.min is not None or self.max is not None)

    # ------------------------------------------------------------------ sampling
    def _transform(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        if self.integer:
            x = np.floor(x + 0.5)
        if self.mode == "clip" and (self.min is not None or self.max is not None):
            x = np.clip(x, *self.bounds())
        return x

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` independent draws (float64), modifiers applied.

        ``truncate`` redraws out-of-range values while they are common (acceptance >= 10 %);
        for a narrower range it samples the same conditional law directly (inverse CDF, or
        the renormalised pmf of a finite support), so a tight range stays fast."""
        if not self._ready():
            raise ConfigError(f"{self.dist} distribution is not resolved (offered_load?)")
        if not self._truncates():
            return self._transform(self._draw(rng, n))
        p = self._memo_accept()
        if p < _REJECT_BELOW:
            return self._conditional(rng, n)
        lo, hi = self.bounds()
        parts, have = [], 0
        while have < n:
            y = self._transform(self._draw(rng, int((n - have) / p * 1.1) + 16))
            y = y[(y >= lo) & (y <= hi)]
            parts.append(y)
            have += len(y)
        return np.concatenate(parts)[:n]

    def _memo_accept(self) -> float:
        """:meth:`accept_probability`, remembered while no field changes."""
        key = (tuple(self.__dict__.values()), id(getattr(self, "_data", None)))
        try:
            hash(key)
        except TypeError:  # list-valued fields: no memo
            return self.accept_probability()
        memo = self._accept_memo
        if memo is None or memo[0] != key:
            memo = self._accept_memo = (key, self.accept_probability())
        return memo[1]

    def _conditional(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Draws of the truncated law without rejection."""
        lo, hi = self.bounds()
        sup = self._support()
        if sup is not None:
            v, q = sup
            v = np.floor(v + 0.5) if self.integer else np.asarray(v, np.float64)
            keep = (v >= lo) & (v <= hi)
            v, q = v[keep], np.cumsum(q[keep]) / q[keep].sum()
            return v[np.minimum(np.searchsorted(q, rng.random(n), side="right"), len(v) - 1)]
        rv, rounds = self._rv(), self.integer or self._always_integer
        a, b = (math.ceil(lo) - 0.5, math.floor(hi) + 0.5) if rounds else (lo, hi)
        u = rng.random(n)
        if a > rv.median():  # upper tail: work with survival probabilities for precision
            sa, sb = rv.sf(a), rv.sf(b)
            x = rv.isf(sb + u * (sa - sb))
        else:
            fa, fb = rv.cdf(a), rv.cdf(b)
            x = rv.ppf(fa + u * (fb - fa))
        x = np.clip(x, a, b)
        return np.clip(np.floor(x + 0.5), a + 0.5, b - 0.5) if rounds else x

    # ------------------------------------------------------------------ moments
    def mean(self) -> float:
        """The exact mean of the modified distribution."""
        return self._stats()[0]

    def accept_probability(self) -> float:
        """P(a raw draw lands in [min, max]) — 1 without truncation."""
        return self._stats()[1]

    def lower_bound(self) -> float:
        """A lower bound of the values drawn (used to refuse negative demands)."""
        sup = self._support()
        lb = float(np.min(sup[0])) if sup is not None else float(self._rv().support()[0])
        if (self.integer or self._always_integer) and math.isfinite(lb):
            lb = math.floor(lb + 0.5)
        return lb if self.min is None else max(lb, float(self.min))

    def upper_bound(self) -> float:
        """An upper bound of the values drawn (inf for an unbounded kind without ``max``)."""
        sup = self._support()
        ub = float(np.max(sup[0])) if sup is not None else float(self._rv().support()[1])
        if (self.integer or self._always_integer) and math.isfinite(ub):
            ub = math.ceil(ub - 0.5)  # the largest round(x) for x < ub
        return ub if self.max is None else min(ub, float(self.max))

    def _stats(self) -> tuple[float, float]:
        m, p = self._raw_stats()
        return float(np.clip(m, *self.bounds())), p  # round-off must not leave [min, max]

    def _raw_stats(self) -> tuple[float, float]:
        if not self._ready():
            raise ConfigError(f"{self.dist} distribution is not resolved (offered_load?)")
        lo, hi = self.bounds()
        sup = self._support()
        if sup is not None:
            v, p = sup
            if self.integer:
                v = np.floor(np.asarray(v, dtype=np.float64) + 0.5)
            return _finite_stats(np.asarray(v, np.float64), np.asarray(p, np.float64), lo, hi,
                                 self.mode)
        rv = self._rv()
        if self.integer or self._always_integer:
            out = self._rounded_stats(rv, lo, hi)
            if out is not None:
                return out
        return self._continuous_stats(rv, lo, hi)

    def _rounded_stats(self, rv: Any, lo: float, hi: float) -> tuple[float, float] | None:
        k_lo = max(math.ceil(lo) if lo > -math.inf else -math.inf, math.floor(rv.ppf(_TAIL)))
        k_hi = min(math.floor(hi) if hi < math.inf else math.inf, math.ceil(rv.isf(_TAIL)))
        if k_hi - k_lo + 1 > _MAX_ENUM:
            return None
        k = np.arange(k_lo, k_hi + 1, dtype=np.float64) if k_lo <= k_hi else np.zeros(0)
        med = rv.median()
        pmf = np.where(k <= med, rv.cdf(k + 0.5) - rv.cdf(k - 0.5),
                       rv.sf(k - 0.5) - rv.sf(k + 0.5))
        mass = float(pmf.sum())
        if self.mode == "truncate":
            if mass <= 0:
                return (float(np.clip(rv.mean(), lo, hi)), 0.0)
            return (float((k * pmf).sum() / mass), mass)
        m = float((k * pmf).sum())
        if lo > -math.inf:
            m += lo * float(rv.cdf(math.ceil(lo) - 0.5))
        if hi < math.inf:
            m += hi * float(rv.sf(math.floor(hi) + 0.5))
        return (m, 1.0)

    def _continuous_stats(self, rv: Any, lo: float, hi: float) -> tuple[float, float]:
        if lo == -math.inf and hi == math.inf:
            return (float(rv.mean()), 1.0)
        pm = self._partial_mean(lo, hi)
        if self.mode == "truncate":
            mass = float(rv.sf(lo) - rv.sf(hi)) if lo > rv.median() else float(
                rv.cdf(hi) - rv.cdf(lo))
            return (pm / mass if mass > 0 else float(np.clip(rv.mean(), lo, hi)), mass)
        m = pm
        if lo > -math.inf:
            m += lo * float(rv.cdf(lo))
        if hi < math.inf:
            m += hi * float(rv.sf(hi))
        return (m, 1.0)


def _finite_stats(v: np.ndarray, p: np.ndarray, lo: float, hi: float, mode: str
                  ) -> tuple[float, float]:
    if mode == "clip":
        return (float(np.dot(np.clip(v, lo, hi), p)), 1.0)
    keep = (v >= lo) & (v <= hi)
    mass = float(p[keep].sum())
    if mass <= 0:
        return (float(np.clip(v.mean(), lo, hi)), 0.0)
    return (float(np.dot(v[keep], p[keep]) / mass), mass)


class ScalableDist(BaseDist):
    """A kind whose scale can be solved for a target mean (``offered_load`` on a duration,
    ``load_resource``): :meth:`with_mean` returns the scaled copy the workload samples."""

    offered_load: PositiveFloat | None = None
    load_resource: str | None = None

    def _ready(self) -> bool:
        return self.offered_load is None

    def _scale_update(self, c: float) -> dict[str, Any]:
        raise NotImplementedError

    def _unit_mean(self) -> float:
        """Mean at scale 1 without modifiers."""
        raise NotImplementedError

    def scaled(self, c: float) -> ScalableDist:
        data = self.model_dump(exclude={"offered_load", "load_resource"})
        return type(self).model_validate({**data, **self._scale_update(c)})

    def with_mean(self, target: float) -> ScalableDist:
        """A copy whose scale is chosen so that ``mean()`` (modifiers included) is ``target``."""
        c0 = target / self._unit_mean()
        if self.min is None and self.max is None and not self.integer:
            return self.scaled(c0)

        def f(c: float) -> float:
            try:
                return self.scaled(c).mean() - target
            except (ValueError, ConfigError):
                return math.nan

        lo = hi = c0
        f0 = f(c0)
        step = 2.0 if not f0 > 0 else 0.5
        for _ in range(200):
            val = f(hi if step > 1 else lo)
            if math.isnan(val):
                break
            if (step > 1 and val >= 0) or (step < 1 and val <= 0):
                c = optimize.brentq(f, lo, hi, xtol=1e-12 * hi, rtol=1e-12)
                return self.scaled(c)
            if step > 1:
                lo, hi = hi, hi * step
            else:
                lo, hi = lo * step, lo
        raise ValueError(f"no scale gives mean {target:.6g} within the bounds [{self.min}, "
                         f"{self.max}] (mode {self.mode})")
