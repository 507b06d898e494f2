"""Workloads: request distributions, arrival processes and trace replay (no SimPy here)."""

from dcsim.workload.base import RequestBatch, RequestSource

__all__ = ["RequestBatch", "RequestSource"]
