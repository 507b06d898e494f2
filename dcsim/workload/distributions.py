"""Request distributions declared in YAML: vectorised samplers that know their exact mean.

Each kind is a pydantic model selected by its ``dist`` key; all share the modifiers ``min``,
``max``, ``mode`` (``truncate`` | ``clip``) and ``integer`` and compute ``mean()`` exactly
(see :mod:`dcsim.workload.dist_base`). A bare number means ``constant``; a string such as
``"N*S"`` is an :class:`AttrProduct`, a demand derived from other per-request attributes
(see :mod:`dcsim.workload.synthetic`).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import (
    ConfigDict,
    Field,
    PositiveFloat,
    PrivateAttr,
    TypeAdapter,
    ValidationError,
)
from scipy import special, stats

from dcsim.csv_tables import read_csv
from dcsim.errors import ConfigError
from dcsim.parquet_tables import read_parquet
from dcsim.registered_union import RegisteredUnion
from dcsim.registered_union import names as registered_names
from dcsim.validation import ConfigModel
from dcsim.validation import error_lines as validation_message
from dcsim.workload.dist_base import BaseDist, ScalableDist

__all__ = ["AttrProduct", "BaseDist", "Constant", "Discrete", "Dist",
           "Empirical", "Exponential", "Gamma", "LogNormal", "Normal", "Pareto", "ScalableDist",
           "Uniform", "UniformInt", "Weibull", "parse_distribution", "validation_message"]


class Constant(ScalableDist):
    dist: Literal["constant"]
    value: float | None = None

    def _check(self) -> None:
        if (self.value is None) == (self.offered_load is None):
            raise ValueError("give exactly one of 'value' or 'offered_load'")

    def _draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return np.full(n, self.value, dtype=np.float64)

    def _support(self) -> tuple[np.ndarray, np.ndarray]:
        return np.array([self.value], np.float64), np.ones(1)

    def _scale_update(self, c: float) -> dict[str, Any]:
        return {"value": c}

    def _unit_mean(self) -> float:
        return 1.0


class Uniform(ScalableDist):
    """Continuous uniform on [low, high]; with ``offered_load`` both ends scale together."""

    dist: Literal["uniform"]
    low: float
    high: float

    def _check(self) -> None:
        if not self.low < self.high:
            raise ValueError(f"low ({self.low}) must be less than high ({self.high})")
        if self.offered_load is not None and self.low < 0:
            raise ValueError("offered_load needs low >= 0")

    def _draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.uniform(self.low, self.high, n)

    def _rv(self) -> Any:
        return stats.uniform(loc=self.low, scale=self.high - self.low)

    def _partial_mean(self, a: float, b: float) -> float:
        a, b = np.clip([a, b], self.low, self.high)
        return float((b * b - a * a) / (2.0 * (self.high - self.low)))

    def _scale_update(self, c: float) -> dict[str, Any]:
        return {"low": self.low * c, "high": self.high * c}

    def _unit_mean(self) -> float:
        return (self.low + self.high) / 2.0


class UniformInt(BaseDist):
    """Integers low..high inclusive, equally likely."""

    dist: Literal["uniform_int"]
    low: int
    high: int
    _always_integer: ClassVar[bool] = True

    def _check(self) -> None:
        if self.low > self.high:
            raise ValueError(f"low ({self.low}) is greater than high ({self.high})")

    def _draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.integers(self.low, self.high, n, endpoint=True).astype(np.float64)

    def _rv(self) -> Any:  # round(U(low - .5, high + .5)) is uniform on low..high
        return stats.uniform(loc=self.low - 0.5, scale=self.high - self.low + 1)

    def _partial_mean(self, a: float, b: float) -> float:
        lo, hi = self.low - 0.5, self.high + 0.5
        a, b = np.clip([a, b], lo, hi)
        return float((b * b - a * a) / (2.0 * (hi - lo)))


class Exponential(ScalableDist):
    dist: Literal["exponential"]
    mean_: PositiveFloat | None = Field(None, alias="mean")

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, populate_by_name=True,
                              serialize_by_alias=True)

    def _check(self) -> None:
        if (self.mean_ is None) == (self.offered_load is None):
            raise ValueError("give exactly one of 'mean' or 'offered_load'")

    def _draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.exponential(self.mean_, n)

    def _rv(self) -> Any:
        return stats.expon(scale=self.mean_)

    def _partial_mean(self, a: float, b: float) -> float:
        m = self.mean_

        def g(x: float) -> float:  # E[X; X > x] for x >= 0
            return 0.0 if x == math.inf else (x + m) * math.exp(-x / m)

        return g(max(a, 0.0)) - g(max(b, 0.0))

    def _scale_update(self, c: float) -> dict[str, Any]:
        return {"mean": c}

    def _unit_mean(self) -> float:
        return 1.0


class Normal(BaseDist):
    dist: Literal["normal"]
    mean_: float = Field(alias="mean")
    std: PositiveFloat

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, populate_by_name=True,
                              serialize_by_alias=True)

    def _draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.normal(self.mean_, self.std, n)

    def _rv(self) -> Any:
        return stats.norm(loc=self.mean_, scale=self.std)

    def _partial_mean(self, a: float, b: float) -> float:
        al, be = (a - self.mean_) / self.std, (b - self.mean_) / self.std
        phi = stats.norm.pdf
        return float(self.mean_ * (special.ndtr(be) - special.ndtr(al))
                     - self.std * (phi(be) - phi(al)))


class LogNormal(ScalableDist):
    """exp(Normal(mu, sigma)); give ``mu`` (log-space mean) or ``mean`` (of the values), and
    ``sigma`` (log-space standard deviation) or ``cv`` (the values' coefficient of variation,
    std / mean: sigma = sqrt(log(1 + cv**2)))."""

    dist: Literal["lognormal"]
    mu: float | None = None
    mean_: PositiveFloat | None = Field(None, alias="mean")
    sigma: PositiveFloat | None = None
    cv: PositiveFloat | None = None

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, populate_by_name=True,
                              serialize_by_alias=True)

    def _check(self) -> None:
        if sum(x is not None for x in (self.mu, self.mean_, self.offered_load)) != 1:
            raise ValueError("give exactly one of 'mu', 'mean' or 'offered_load'")
        if (self.sigma is None) == (self.cv is None):
            raise ValueError("give exactly one of 'sigma' or 'cv'")

    @property
    def _sigma(self) -> float:
        return self.sigma if self.sigma is not None else math.sqrt(math.log1p(self.cv**2))

    @property
    def _mu(self) -> float:
        return self.mu if self.mu is not None else math.log(self.mean_) - self._sigma**2 / 2

    def _draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.lognormal(self._mu, self._sigma, n)

    def _rv(self) -> Any:
        return stats.lognorm(s=self._sigma, scale=math.exp(self._mu))

    def _partial_mean(self, a: float, b: float) -> float:
        if b <= 0:
            return 0.0
        s, mu = self._sigma, self._mu

        def cdf1(x: float) -> float:  # E[X; X <= x] / E[X]
            return 0.0 if x <= 0 else float(special.ndtr((math.log(x) - mu - s * s) / s))

        return math.exp(mu + s * s / 2) * (cdf1(b) - cdf1(a))

    def _scale_update(self, c: float) -> dict[str, Any]:
        return {"mean": c, "mu": None}

    def _unit_mean(self) -> float:
        return 1.0


class _ShapeScale(ScalableDist):
    """A positive kind with a ``shape`` and a ``scale`` (scipy's meaning); ``offered_load``
    replaces ``scale``. Drawn with numpy's Generator; scipy only for truncated draws and
    tail probabilities."""

    shape: PositiveFloat
    scale: PositiveFloat | None = None

    def _check(self) -> None:
        if (self.scale is None) == (self.offered_load is None):
            raise ValueError("give exactly one of 'scale' or 'offered_load'")

    def _scale_update(self, c: float) -> dict[str, Any]:
        return {"scale": c}

    def _unit_mean(self) -> float:
        m = self._mean_at(1.0)
        if not math.isfinite(m):  # a Pareto with shape <= 1: only a bound makes it finite
            m = self.scaled(1.0).mean()
            if not math.isfinite(m):
                raise ValueError(f"offered_load needs a finite mean: shape {self.shape} gives "
                                 "an infinite one; give shape > 1 or a max")
        return m

    def _mean_at(self, scale: float) -> float:
        raise NotImplementedError


class Pareto(_ShapeScale):
    """The classical (type I) Pareto: P(X > x) = (scale / x) ** shape for x >= scale, i.e.
    ``scipy.stats.pareto(b=shape, scale=scale)`` with ``loc`` fixed at 0 (there is no
    ``loc``). The mean is shape * scale / (shape - 1) (infinite for shape <= 1), the variance
    finite only for shape > 2. Drawn as scale * (1 + numpy's ``pareto(shape)``), numpy's
    being the Lomax (Pareto II) law."""

    dist: Literal["pareto"]

    def _draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return self.scale * (1.0 + rng.pareto(self.shape, n))

    def _rv(self) -> Any:
        return stats.pareto(self.shape, scale=self.scale)

    def _mean_at(self, scale: float) -> float:
        b = self.shape
        return b * scale / (b - 1.0) if b > 1.0 else math.inf

    def _partial_mean(self, a: float, b: float) -> float:
        s, k = self.scale, self.shape
        a, b = max(a, s), max(b, s)
        if a >= b:
            return 0.0

        def below(x: float) -> float:  # E[X; X <= x] for x >= s
            if x == math.inf:
                return self._mean_at(s)
            if k == 1.0:
                return s * math.log(x / s)
            return k * s / (k - 1.0) * (1.0 - (s / x) ** (k - 1.0))

        if b == math.inf and k > 1.0:  # E[X; X > a] in closed form: no cancellation
            return k * s / (k - 1.0) * (s / a) ** (k - 1.0)
        return below(b) - below(a)


class Weibull(_ShapeScale):
    """``scipy.stats.weibull_min(c=shape, scale=scale)``: P(X > x) = exp(-(x / scale) **
    shape) for x >= 0 (no ``loc``); shape < 1 gives a heavier-than-exponential tail. Drawn as
    scale * numpy's ``weibull(shape)``."""

    dist: Literal["weibull"]

    def _draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return self.scale * rng.weibull(self.shape, n)

    def _rv(self) -> Any:
        return stats.weibull_min(self.shape, scale=self.scale)

    def _mean_at(self, scale: float) -> float:
        return scale * math.gamma(1.0 + 1.0 / self.shape)

    def _partial_mean(self, a: float, b: float) -> float:
        # E[X; X <= x] = mean * P(1 + 1/shape, (x / scale) ** shape), P the regularised
        # lower incomplete gamma; the upper one (Q) keeps precision in the tail
        q = 1.0 + 1.0 / self.shape
        a, b = max(a, 0.0), max(b, 0.0)
        if a >= b:
            return 0.0
        za, zb = (a / self.scale) ** self.shape, (b / self.scale) ** self.shape
        return self._mean_at(self.scale) * _gamma_mass(q, za, zb)


class Gamma(_ShapeScale):
    """``scipy.stats.gamma(a=shape, scale=scale)`` (no ``loc``): mean shape * scale, variance
    shape * scale**2; shape < 1 puts much mass near 0 and has cv > 1. Drawn with numpy's
    ``gamma(shape, scale)``."""

    dist: Literal["gamma"]

    def _draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.gamma(self.shape, self.scale, n)

    def _rv(self) -> Any:
        return stats.gamma(self.shape, scale=self.scale)

    def _mean_at(self, scale: float) -> float:
        return self.shape * scale

    def _partial_mean(self, a: float, b: float) -> float:
        # E[X; X <= x] = shape * scale * P(shape + 1, x / scale)
        a, b = max(a, 0.0), max(b, 0.0)
        if a >= b:
            return 0.0
        return self._mean_at(self.scale) * _gamma_mass(self.shape + 1.0, a / self.scale,
                                                       b / self.scale)


def _gamma_mass(q: float, za: float, zb: float) -> float:
    """P(za < Z <= zb) for Z ~ Gamma(q, 1), from the side of the median that keeps digits."""
    if za > q:  # upper tail: differences of survival probabilities
        return float(special.gammaincc(q, za) - special.gammaincc(q, zb))
    return float(special.gammainc(q, zb) - special.gammainc(q, za))


class Discrete(BaseDist):
    """``values`` with probabilities ``probs`` (equally likely when omitted)."""

    dist: Literal["discrete"]
    values: list[float] = Field(min_length=1)
    probs: list[float] | None = None

    def _check(self) -> None:
        if self.probs is None:
            return
        if len(self.probs) != len(self.values):
            raise ValueError(f"probs has {len(self.probs)} entries but values has "
                             f"{len(self.values)}")
        if any(p < 0 for p in self.probs):
            raise ValueError("probs must be non-negative")
        if abs(sum(self.probs) - 1.0) > 1e-6:
            raise ValueError(f"probs must sum to 1 (they sum to {sum(self.probs):.9g})")

    def _support(self) -> tuple[np.ndarray, np.ndarray]:
        v = np.asarray(self.values, np.float64)
        if self.probs is None:
            return v, np.full(len(v), 1.0 / len(v))
        p = np.asarray(self.probs, np.float64)
        return v, p / p.sum()

    def _draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        v, p = self._support()
        return v[np.minimum(np.searchsorted(np.cumsum(p), rng.random(n), side="right"),
                            len(v) - 1)]


class Empirical(BaseDist):
    """Resample (uniformly, with replacement) ``values`` or one ``column`` of a CSV/Parquet
    file; ``scale`` multiplies the file's values. Relative paths are resolved by
    :meth:`load` (against the experiment's folder in :func:`dcsim.workload.spec.build_source`,
    else the working directory on first use)."""

    dist: Literal["empirical"]
    values: list[float] | None = None
    path: str | None = None
    column: str | None = None
    scale: float = 1.0
    _data: np.ndarray | None = PrivateAttr(default=None)

    def _check(self) -> None:
        if (self.values is None) == (self.path is None):
            raise ValueError("give exactly one of 'values' or 'path'")
        if self.values is not None and not self.values:
            raise ValueError("values is empty")
        if self.path is not None and self.column is None:
            raise ValueError("'path' needs 'column'")

    def _ready(self) -> bool:
        return self.values is not None or self._data is not None

    def load(self, base_dir: Path | None = None) -> Empirical:
        """A copy holding the file's column (bounds re-checked); no-op for inline values."""
        if self.values is not None or self._data is not None:
            return self
        path = Path(self.path)
        if not path.is_absolute() and base_dir is not None and (base_dir / path).exists():
            path = base_dir / path
        data = _read_column(path, self.column) * self.scale
        out = self.model_copy()
        out._data = data
        try:
            out.check_truncation()
        except ValueError as e:
            raise ConfigError(f"{path}: column {self.column!r}: {e}") from None
        return out

    def _values(self) -> np.ndarray:
        if self.values is not None:
            return np.asarray(self.values, np.float64)
        if self._data is None:
            self._data = self.load()._data
        return self._data

    def _support(self) -> tuple[np.ndarray, np.ndarray]:
        v = self._values()
        return v, np.full(len(v), 1.0 / len(v))

    def _draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        v = self._values()
        return v[rng.integers(0, len(v), n)]

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        self._values()
        return super().sample(rng, n)

    def _stats(self) -> tuple[float, float]:
        self._values()
        return super()._stats()


def _read_column(path: Path, column: str) -> np.ndarray:
    import pandas as pd

    if not path.exists():
        raise ConfigError(f"{path}: no such file")
    try:
        if path.suffix in (".parquet", ".pq"):
            frame = read_parquet(path, columns=[column])
        else:
            frame = read_csv(path, usecols=[column])
    except (KeyError, ValueError) as e:
        raise ConfigError(f"{path}: cannot read column {column!r} ({e})") from None
    col = pd.to_numeric(frame[column], errors="coerce").to_numpy(np.float64)
    col = col[~np.isnan(col)]
    if len(col) == 0:
        raise ConfigError(f"{path}: column {column!r} has no numeric values")
    return col


class AttrProduct(ConfigModel):
    """A value derived per request: ``factor`` × the product of attribute columns (``"N*S"``)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    dist: Literal["product"]
    of: list[str] = Field(min_length=1)
    factor: float = 1.0

    def mean_from(self, attrs: dict[str, BaseDist]) -> float:
        return self.factor * math.prod(attrs[a].mean() for a in self.of)


#: the built-in kinds (plugins add theirs through ``register_distributions``)
KINDS = ("constant", "uniform", "uniform_int", "exponential", "normal", "lognormal", "pareto",
         "weibull", "gamma", "discrete", "empirical", "product")


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")


def _coerce(value: Any) -> Any:
    """YAML shorthands: a number is a constant, ``"2*N*S"`` a product of attributes."""
    if isinstance(value, bool):
        raise ValueError(f"expected a number or a distribution, got {value!r}")
    if isinstance(value, int | float):
        return {"dist": "constant", "value": value}
    if isinstance(value, str):
        factor, names = 1.0, []
        for tok in (t.strip() for t in value.split("*")):
            if _NAME.match(tok):
                names.append(tok)
            else:
                try:
                    factor *= float(tok)
                except ValueError:
                    raise ValueError(f"{value!r} is not a number, a distribution, or a product "
                                     "of attribute names like 'N*S'") from None
        if not names:
            return {"dist": "constant", "value": factor}
        return {"dist": "product", "of": names, "factor": factor}
    if isinstance(value, dict) and "dist" not in value:
        raise ValueError(f"missing 'dist' (one of: {', '.join(registered_names('distribution'))})")
    return value


#: a distribution wherever one is read: any registered ``dist`` (the built-ins, then
#: plugins'), a number (``constant``) or a product of attributes (``"N*S"``)
Dist = RegisteredUnion("distribution", before=_coerce)
_ADAPTER: TypeAdapter[Any] = TypeAdapter(Dist)


def parse_distribution(obj: Any, where: str) -> BaseDist | AttrProduct:
    """Parse a YAML value (number, ``"N*S"`` or mapping); errors name ``where``."""
    try:
        return _ADAPTER.validate_python(obj)
    except ValidationError as e:
        raise ConfigError(validation_message(e, where, obj)) from None
