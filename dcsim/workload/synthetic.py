"""Synthetic request streams: an arrival process plus per-column distributions.

Draw order (fixed, so a seed and a ``batch_size`` give the same requests every time): for
each batch of ``m`` requests, the ``m`` arrival gaps, then each attribute in declaration
order, then the row numbers of a resampled trace (``rows``), then each demand column in the
topology's resource order, then durations, then bandwidth (a resampled row's own, or drawn up
to it with ``trace.bandwidth_low``). A different ``batch_size`` gives a
different (equally distributed) stream.

With ``rows`` (a :class:`~dcsim.workload.resample.TableRows`), every request's demand — and
its bandwidth, unless a ``bandwidth`` distribution is given, and the table's carried
attributes — is one row of a trace drawn uniformly with replacement.

A demand or the bandwidth may be an :class:`~dcsim.workload.distributions.AttrProduct`
(YAML ``"N*S"``): the product of attribute columns drawn for the same request, as for a
virtual cluster of N VMs of size S (cpu demand N*S).

A duration may give ``offered_load`` (and ``load_resource``) instead of its mean: the mean
duration is then ``offered_load * total_capacity[r] / (rate * E[demand[r]])`` with the exact
means of :mod:`dcsim.workload.distributions` (truncation included), and the distribution's
scale is solved so that its mean, modifiers included, hits that target.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping

import numpy as np

from dcsim.errors import ConfigError
from dcsim.model.topology import DEFAULT_RESOURCES
from dcsim.workload.arrival_base import BaseArrivals, TimesFn
from dcsim.workload.base import RequestBatch, RequestSource
from dcsim.workload.dist_base import BaseDist, ScalableDist
from dcsim.workload.distributions import AttrProduct
from dcsim.workload.resample import TableRows

Column = BaseDist | AttrProduct

#: durations below this cannot be simulated with float times (products of them underflow)
_TINY = 1e-100


class SyntheticSource:
    """``n_requests`` requests from ``arrival`` and the given distributions."""

    def __init__(
        self,
        arrival: BaseArrivals,
        n_requests: int,
        demand: Mapping[str, Column],
        duration: BaseDist,
        bandwidth: Column | None = None,
        resources: tuple[str, ...] = DEFAULT_RESOURCES,
        attrs: Mapping[str, BaseDist] | None = None,
        batch_size: int = 4096,
        total_capacity: Mapping[str, float] | None = None,
        where: str = "workload",
        rows: TableRows | None = None,
    ) -> None:
        if int(n_requests) != n_requests or n_requests < 0:
            raise ConfigError(f"{where}.requests: must be a non-negative integer")
        if batch_size < 1:
            raise ConfigError(f"{where}.batch_size: must be at least 1")
        self.arrival = arrival
        self.n_requests = int(n_requests)
        self.resources = tuple(resources)
        self.attrs = dict(attrs or {})
        self.demand = dict(demand)
        self.bandwidth = bandwidth
        self.batch_size = int(batch_size)
        self.total_capacity = dict(total_capacity) if total_capacity is not None else None
        self.rows = rows
        if rows is not None:
            if self.demand:
                raise ConfigError(f"{where}.demand: a resampled trace gives the demand; "
                                  "remove demand")
            if tuple(rows.resources) != self.resources:
                raise ConfigError(f"{where}.trace: the table's resources "
                                  f"({', '.join(rows.resources)}) differ from the topology's")
            clash = sorted(set(rows.attrs) & set(self.attrs))
            if clash:
                raise ConfigError(f"{where}.attrs.{clash[0]}: also a column carried from the "
                                  "trace; rename one of them")
        for name, d in self.attrs.items():
            if isinstance(d, AttrProduct):
                raise ConfigError(f"{where}.attrs.{name}: a product of attributes is only "
                                  "allowed in demand and bandwidth")
            _no_offered_load(d, f"{where}.attrs.{name}")
        for r, d in self.demand.items():
            if r not in self.resources:
                raise ConfigError(f"{where}.demand.{r}: no such resource; the topology has "
                                  f"{', '.join(self.resources)}")
            self._check_column(d, f"{where}.demand.{r}")
        if bandwidth is not None:
            self._check_column(bandwidth, f"{where}.bandwidth")
        self.duration = self._resolve_duration(duration, f"{where}.duration")
        _check_nonneg(self.duration, f"{where}.duration")
        self.mean_duration = self.duration.mean()

    # ------------------------------------------------------------------ setup
    def _check_column(self, d: Column, where: str) -> None:
        if isinstance(d, AttrProduct):
            missing = [a for a in d.of if a not in self.attrs]
            if missing:
                raise ConfigError(f"{where}: {', '.join(missing)} not among workload.attrs "
                                  f"({', '.join(self.attrs) or 'none'})")
            if d.factor < 0 or any(self.attrs[a].lower_bound() < 0 for a in d.of):
                raise ConfigError(f"{where}: the product {'*'.join(d.of)} can be negative")
            return
        _no_offered_load(d, where)
        _check_nonneg(d, where)

    def mean_demand(self, resource: str) -> float:
        """E[demand of ``resource``] per request: its distribution's mean, the mean of the
        resampled rows, or 0."""
        d = self.demand.get(resource)
        if d is None:
            return self.rows.mean(resource) if self.rows is not None else 0.0
        return d.mean_from(self.attrs) if isinstance(d, AttrProduct) else d.mean()

    def _resolve_duration(self, d: BaseDist, where: str) -> BaseDist:
        if isinstance(d, AttrProduct):
            raise ConfigError(f"{where}: a product of attributes is not a duration")
        if not isinstance(d, ScalableDist) or d.offered_load is None:
            if isinstance(d, ScalableDist) and d.load_resource is not None:
                raise ConfigError(f"{where}.load_resource: only used with offered_load")
            return d
        r = d.load_resource or self.resources[0]
        if r not in self.resources:
            raise ConfigError(f"{where}.load_resource: no resource {r!r}; the topology has "
                              f"{', '.join(self.resources)}")
        if self.total_capacity is None or r not in self.total_capacity:
            raise ConfigError(f"{where}.offered_load: needs the total capacity of {r!r}")
        ed = self.mean_demand(r)
        if ed <= 0:
            raise ConfigError(f"{where}.offered_load: the mean demand of {r!r} is 0")
        target = d.offered_load * self.total_capacity[r] / (self.arrival.rate * ed)
        if not (math.isfinite(target) and target > _TINY):
            raise ConfigError(
                f"{where}.offered_load: {d.offered_load} at arrival rate "
                f"{self.arrival.rate:g} needs mean duration {target:.6g}, which cannot be "
                "simulated; check workload.arrival.rate and the demand")
        try:
            return d.with_mean(target)
        except ValueError as e:
            msg = str(e).splitlines()
            raise ConfigError(f"{where}: offered_load {d.offered_load} needs mean duration "
                              f"{target:.6g}: {msg[-2].strip() if len(msg) > 1 else msg[0]}"
                              ) from None

    def offered_load(self, resource: str) -> float:
        """rate × E[duration] × E[demand] / total capacity of ``resource``."""
        if self.total_capacity is None:
            raise ConfigError("offered_load needs total_capacity")
        cap = self.total_capacity[resource]
        return self.arrival.rate * self.mean_duration * self.mean_demand(resource) / cap

    def describe(self) -> dict[str, float]:
        """Derived figures for manifests: rate, mean duration, mean demands, offered loads."""
        out = {"rate": float(self.arrival.rate), "mean_duration": float(self.mean_duration)}
        for r in self.resources:
            out[f"mean_{r}"] = self.mean_demand(r)
            if self.total_capacity and self.total_capacity.get(r, 0) > 0:
                out[f"offered_load_{r}"] = self.offered_load(r)
        return out

    # ------------------------------------------------------------------ drawing
    def draw(self, rng: np.random.Generator, n: int, start: float = 0.0,
             times: TimesFn | None = None) -> RequestBatch:
        """The next ``n`` requests arriving after ``start`` (also usable for lookahead);
        ``times``: the run's arrival stream (default: the process's ``times``, which starts
        an ``mmpp`` from a fresh phase)."""
        arrival = (times or self.arrival.times)(rng, n, start)
        attrs = {name: d.sample(rng, n) for name, d in self.attrs.items()}
        if self.rows is not None:
            idx = self.rows.indices(rng, n)
            demand = self.rows.demand[idx]
            attrs.update({k: v[idx] for k, v in self.rows.attrs.items()})
        else:
            idx = None
            demand = np.zeros((n, len(self.resources)), dtype=np.float64)
        for j, r in enumerate(self.resources):
            if r in self.demand:
                demand[:, j] = self._column(self.demand[r], rng, n, attrs)
        duration = self.duration.sample(rng, n)
        if self.bandwidth is not None:
            bandwidth = self._column(self.bandwidth, rng, n, attrs)
        elif idx is not None:
            bandwidth = self.rows.draw_bandwidth(rng, idx)
        else:
            bandwidth = np.zeros(n)
        return RequestBatch(arrival, duration, demand, bandwidth, attrs)

    @staticmethod
    def _column(d: Column, rng: np.random.Generator, n: int, attrs: dict[str, np.ndarray]
                ) -> np.ndarray:
        if isinstance(d, AttrProduct):
            out = np.full(n, d.factor)
            for a in d.of:
                out = out * attrs[a]
            return out
        return d.sample(rng, n)

    def batches(self, rng: np.random.Generator) -> Iterator[RequestBatch]:
        t, left = 0.0, self.n_requests
        times = self.arrival.stream()
        while left > 0:
            m = min(self.batch_size, left)
            batch = self.draw(rng, m, t, times)
            t = float(batch.arrival[-1])
            left -= m
            yield batch


class AugmentedSource:
    """Adds synthetic columns to another source (e.g. a random bandwidth on a trace): per
    batch, each attribute in declaration order, then the bandwidth, drawn from ``rng``."""

    def __init__(self, inner: RequestSource, bandwidth: Column | None = None,
                 attrs: Mapping[str, BaseDist] | None = None, where: str = "workload") -> None:
        self.inner = inner
        self.attrs = dict(attrs or {})
        self.bandwidth = bandwidth
        for name, d in self.attrs.items():
            if isinstance(d, AttrProduct):
                raise ConfigError(f"{where}.attrs.{name}: a product is not allowed here")
            _no_offered_load(d, f"{where}.attrs.{name}")
        if isinstance(bandwidth, AttrProduct):
            missing = [a for a in bandwidth.of if a not in self.attrs]
            if missing:
                raise ConfigError(f"{where}.bandwidth: {', '.join(missing)} not among "
                                  "workload.attrs")
        elif bandwidth is not None:
            _no_offered_load(bandwidth, f"{where}.bandwidth")
            _check_nonneg(bandwidth, f"{where}.bandwidth")

    def __getattr__(self, name: str):  # expose the inner source's figures (dropped, ...)
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def batches(self, rng: np.random.Generator) -> Iterator[RequestBatch]:
        for b in self.inner.batches(rng):
            n = len(b)
            drawn = {name: d.sample(rng, n) for name, d in self.attrs.items()}
            b.attrs.update(drawn)
            if self.bandwidth is not None:
                b.bandwidth = SyntheticSource._column(self.bandwidth, rng, n, b.attrs)
            yield b


def _no_offered_load(d: Column, where: str) -> None:
    if isinstance(d, ScalableDist) and (d.offered_load is not None or d.load_resource):
        raise ConfigError(f"{where}.offered_load: only allowed on workload.duration")


def _check_nonneg(d: BaseDist, where: str) -> None:
    lb = d.lower_bound()
    if lb < 0:
        raise ConfigError(f"{where}: can draw negative values (from {lb:g}); add min: 0")
