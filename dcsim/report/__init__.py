"""Reports on finished runs: :func:`load` a results directory into DataFrames,
:func:`describe` and :func:`paired` summarise a metric over seeds, and :func:`make_report`
writes the tables, figures and HTML page of ``dcsim report``."""

from dcsim.report.build import Report, make_report, metric_names
from dcsim.report.data import Results, load
from dcsim.report.tables import describe, paired

__all__ = ["Report", "Results", "describe", "load", "make_report", "metric_names", "paired"]
