"""Workloads: request distributions, arrival processes and trace replay (no SimPy here).

Every name below is imported on first use (PEP 562): a module that needs one distribution
does not load trace replay, the topology model and networkx."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dcsim.lazy_exports import lazy_getattr

if TYPE_CHECKING:
    from dcsim.workload.arrival_base import BaseArrivals
    from dcsim.workload.arrivals import (
        Arrival,
        BernoulliArrivals,
        PoissonArrivals,
        TickArrivals,
    )
    from dcsim.workload.arrivals_time import (
        DiurnalArrivals,
        MMPPArrivals,
        PiecewiseArrivals,
        TraceRateArrivals,
    )
    from dcsim.workload.base import RequestBatch, RequestSource
    from dcsim.workload.dist_base import BaseDist
    from dcsim.workload.distributions import (
        AttrProduct,
        Constant,
        Discrete,
        Dist,
        Distribution,
        Empirical,
        Exponential,
        Gamma,
        LogNormal,
        Normal,
        Pareto,
        Uniform,
        UniformInt,
        Weibull,
        parse_distribution,
    )
    from dcsim.workload.importers import (
        import_alibaba2018,
        import_azure2017,
        import_azure2020,
    )
    from dcsim.workload.spec import TraceSpec, WorkloadSpec, build_source, parse_workload
    from dcsim.workload.synthetic import AugmentedSource, SyntheticSource
    from dcsim.workload.trace_format import TraceFormat
    from dcsim.workload.trace_import import import_trace, write_table
    from dcsim.workload.traces import TraceSource

__all__ = [
    "Arrival",
    "BaseArrivals",
    "BaseDist",
    "AttrProduct",
    "AugmentedSource",
    "BernoulliArrivals",
    "Constant",
    "Discrete",
    "Dist",
    "DiurnalArrivals",
    "Distribution",
    "Empirical",
    "Exponential",
    "Gamma",
    "LogNormal",
    "MMPPArrivals",
    "Normal",
    "Pareto",
    "PiecewiseArrivals",
    "PoissonArrivals",
    "RequestBatch",
    "RequestSource",
    "SyntheticSource",
    "TickArrivals",
    "TraceFormat",
    "TraceRateArrivals",
    "TraceSource",
    "TraceSpec",
    "Uniform",
    "UniformInt",
    "Weibull",
    "WorkloadSpec",
    "build_source",
    "import_alibaba2018",
    "import_azure2017",
    "import_azure2020",
    "import_trace",
    "parse_distribution",
    "parse_workload",
    "write_table",
]

#: each exported name -> the module defining it
_EXPORTS = {
    "Arrival": "dcsim.workload.arrivals",
    "BaseArrivals": "dcsim.workload.arrival_base",
    "BaseDist": "dcsim.workload.dist_base",
    "BernoulliArrivals": "dcsim.workload.arrivals",
    "PoissonArrivals": "dcsim.workload.arrivals",
    "TickArrivals": "dcsim.workload.arrivals",
    "DiurnalArrivals": "dcsim.workload.arrivals_time",
    "MMPPArrivals": "dcsim.workload.arrivals_time",
    "PiecewiseArrivals": "dcsim.workload.arrivals_time",
    "TraceRateArrivals": "dcsim.workload.arrivals_time",
    "RequestBatch": "dcsim.workload.base",
    "RequestSource": "dcsim.workload.base",
    "AttrProduct": "dcsim.workload.distributions",
    "Constant": "dcsim.workload.distributions",
    "Discrete": "dcsim.workload.distributions",
    "Dist": "dcsim.workload.distributions",
    "Distribution": "dcsim.workload.distributions",
    "Empirical": "dcsim.workload.distributions",
    "Exponential": "dcsim.workload.distributions",
    "Gamma": "dcsim.workload.distributions",
    "LogNormal": "dcsim.workload.distributions",
    "Normal": "dcsim.workload.distributions",
    "Pareto": "dcsim.workload.distributions",
    "Uniform": "dcsim.workload.distributions",
    "UniformInt": "dcsim.workload.distributions",
    "Weibull": "dcsim.workload.distributions",
    "parse_distribution": "dcsim.workload.distributions",
    "import_alibaba2018": "dcsim.workload.importers",
    "import_azure2017": "dcsim.workload.importers",
    "import_azure2020": "dcsim.workload.importers",
    "TraceSpec": "dcsim.workload.spec",
    "WorkloadSpec": "dcsim.workload.spec",
    "build_source": "dcsim.workload.spec",
    "parse_workload": "dcsim.workload.spec",
    "AugmentedSource": "dcsim.workload.synthetic",
    "SyntheticSource": "dcsim.workload.synthetic",
    "TraceFormat": "dcsim.workload.trace_format",
    "import_trace": "dcsim.workload.trace_import",
    "write_table": "dcsim.workload.trace_import",
    "TraceSource": "dcsim.workload.traces",
}

__getattr__ = lazy_getattr(__name__, _EXPORTS)
