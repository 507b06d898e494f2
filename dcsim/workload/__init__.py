"""Workloads: request distributions, arrival processes and trace replay (no SimPy here)."""

from dcsim.workload.arrivals import (
    Arrival,
    ArrivalProcess,
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
from dcsim.workload.trace_import import import_trace, write_table
from dcsim.workload.traces import TraceSource

__all__ = [
    "Arrival",
    "ArrivalProcess",
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
