"""The built-in topology kinds, arrival processes, distributions and trace formats,
registered through the same hooks as a plugin's (``register_topologies``,
``register_arrival_processes``, ``register_distributions``, ``register_trace_formats``), so
``topology.kind``, ``workload.arrival.process``, ``dist`` and ``workload.trace.format`` (and
``dcsim import-trace``) select among the built-ins and every plugin's alike."""

from __future__ import annotations

from collections.abc import Callable

from dcsim.hookspecs import hookimpl


@hookimpl
def register_topologies(register: Callable[[type], None]) -> None:
    from dcsim.model.topologies import FabricSpec, FatTreeSpec, FileSpec, FlatSpec, OpticalSpec

    for cls in (FatTreeSpec, FabricSpec, OpticalSpec, FlatSpec, FileSpec):
        register(cls)


@hookimpl
def register_arrival_processes(register: Callable[[type], None]) -> None:
    from dcsim.workload.arrivals import BernoulliArrivals, PoissonArrivals, TickArrivals
    from dcsim.workload.arrivals_time import (
        DiurnalArrivals,
        MMPPArrivals,
        PiecewiseArrivals,
        TraceRateArrivals,
    )

    for cls in (PoissonArrivals, TickArrivals, BernoulliArrivals, DiurnalArrivals,
                PiecewiseArrivals, TraceRateArrivals, MMPPArrivals):
        register(cls)


@hookimpl
def register_distributions(register: Callable[[type], None]) -> None:
    from dcsim.workload import distributions as d

    for cls in (d.Constant, d.Uniform, d.UniformInt, d.Exponential, d.Normal, d.LogNormal,
                d.Pareto, d.Weibull, d.Gamma, d.Discrete, d.Empirical, d.AttrProduct):
        register(cls)


@hookimpl
def register_trace_formats(register: Callable[[type], None]) -> None:
    from dcsim.workload.trace_formats import BUILTIN_FORMATS

    for cls in BUILTIN_FORMATS:
        register(cls)
