"""dcsim plugins of two kinds in one package: the ``hawkes`` arrival process
(:class:`HawkesArrivals`, ``register_arrival_processes``) and the ``loglogistic``
distribution (:class:`LogLogistic`, ``register_distributions``)."""

from __future__ import annotations

from collections.abc import Callable

from dcsim.hookspecs import hookimpl

from dcsim_hawkes.hawkes import HawkesArrivals
from dcsim_hawkes.loglogistic import LogLogistic

__all__ = ["HawkesArrivals", "LogLogistic", "register_arrival_processes",
           "register_distributions"]


@hookimpl
def register_arrival_processes(register: Callable[[type], None]) -> None:
    register(HawkesArrivals)


@hookimpl
def register_distributions(register: Callable[[type], None]) -> None:
    register(LogLogistic)
