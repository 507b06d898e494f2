"""Workloads: request distributions, arrival processes and trace replay (no SimPy here)."""

from dcsim.workload.arrivals import (
    Arrival,
    ArrivalProcess,
    BernoulliArrivals,
    PoissonArrivals,
    TickArrivals,
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
    LogNormal,
    Normal,
    Uniform,
    UniformInt,
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
    "Distribution",
    "Empirical",
    "Exponential",
    "LogNormal",
    "Normal",
    "PoissonArrivals",
    "RequestBatch",
    "RequestSource",
    "SyntheticSource",
    "TickArrivals",
    "TraceSource",
    "TraceSpec",
    "Uniform",
    "UniformInt",
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
