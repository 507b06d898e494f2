"""Rack imbalance as a dcsim metric plugin: how unevenly a resource is used across racks.

At every instant, each rack's used share of a resource (``used / capacity`` over its
servers) is known from the placements the run made; the imbalance is the coefficient of
variation of those shares across racks (population standard deviation over their mean; 0
when nothing is used). Servers without a rack (a ``flat`` topology) count as one rack, so a
topology of one rack always gives 0.

Columns: ``rack_imbalance`` in each time-series sample (the value then);
``rack_imbalance_mean`` in the summary, its time average from the first to the last
arrival, and ``rack_imbalance_max``, the largest value held between them.
"""

from __future__ import annotations

import math

import numpy as np
from dcsim import ConfigError, hookimpl
from dcsim.metrics import Column, Metric, RunStart
from pydantic import Field


class RackImbalance(Metric):
    """Coefficient of variation of each rack's used share of a resource."""

    name = "rack_imbalance"
    description = "coefficient of variation of the racks' used share of a resource"
    summary_columns = {
        "rack_imbalance_mean": Column("float64", "time-averaged coefficient of variation of "
                                      "the racks' used share, first to last arrival"),
        "rack_imbalance_max": Column("float64", "largest coefficient of variation of the "
                                     "racks' used share held between the first and the "
                                     "last arrival"),
    }
    timeseries_columns = {
        "rack_imbalance": Column("float64", "coefficient of variation of the racks' used "
                                 "share now"),
    }

    class Options(Metric.Options):  # inherits extra="forbid": unknown keys are errors
        resource: str = Field(default="cpu", description="the resource whose use is compared")

    @classmethod
    def validate(cls, options, spec) -> None:
        """Refuse a mode without racks (it reads loss mode's topology) and a resource the
        servers do not have (``topology.server``)."""
        if spec.mode != "loss":
            raise ConfigError(f"rack_imbalance compares the racks of a loss-mode topology; "
                              f"mode {spec.mode!r} has none")
        server = getattr(spec.topology, "server", None)
        if isinstance(server, dict) and options.resource not in server:
            raise ConfigError(f"options.resource: the servers have no {options.resource!r} "
                              f"(they have {', '.join(server)})")

    def on_start(self, run: RunStart) -> None:
        if self.options.resource not in run.resources:
            raise ConfigError(f"rack_imbalance: options.resource: the topology has no "
                              f"{self.options.resource!r} (it has {', '.join(run.resources)})")
        topo = run.topology
        self._j = run.resources.index(self.options.resource)
        racks, self._rack_of = np.unique(topo.server_rack, return_inverse=True)
        capacity = np.bincount(self._rack_of, weights=run.view.capacity[:, self._j],
                               minlength=racks.size)
        self._keep = capacity > 0  # a rack without any of the resource is left out
        self._capacity = capacity
        self._used = np.zeros(racks.size)
        self._now = 0.0
        self._value = 0.0
        self._area = 0.0
        self._first: float | None = None   # the first arrival's time
        self._last = 0.0                   # the last arrival's time
        self._area_at_last = 0.0           # the area up to it
        self._running_max = 0.0            # the largest value since the first arrival
        self._max = 0.0                    # ... up to the last arrival

    # -- the value at each instant, integrated between events ------------------------------
    def _advance(self, now: float) -> None:
        if self._first is not None:
            self._area += self._value * (now - self._now)
        self._now = now

    def _update(self) -> None:
        share = self._used[self._keep] / self._capacity[self._keep]
        mean = share.mean() if share.size else 0.0
        self._value = float(share.std() / mean) if mean > 0 else 0.0
        self._running_max = max(self._running_max, self._value)

    def _add(self, placement, sign: float) -> None:
        np.add.at(self._used, self._rack_of[placement.servers],
                  sign * placement.amounts[:, self._j])
        self._update()

    # -- the hooks -------------------------------------------------------------------------
    def on_arrival(self, now, request, placement) -> None:
        self._advance(now)
        if self._first is None:
            self._first = now
        self._last, self._area_at_last, self._max = now, self._area, self._running_max

    def on_decision(self, now, request, placement) -> None:
        if placement is not None:
            self._advance(now)
            self._add(placement, 1.0)

    def on_departure(self, now, request, placement) -> None:
        self._advance(now)
        self._add(placement, -1.0)

    def sample(self, now):
        return {"rack_imbalance": self._value}

    def summary(self):
        span = self._last - self._first if self._first is not None else 0.0
        mean = self._area_at_last / span if span > 0 else math.nan
        return {"rack_imbalance_mean": mean,
                "rack_imbalance_max": self._max if self._first is not None else math.nan}


@hookimpl
def register_metrics(register):
    register(RackImbalance)
