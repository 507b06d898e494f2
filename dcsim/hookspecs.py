"""The hooks a dcsim plugin implements (pluggy project name and entry-point group: ``dcsim``)."""

from __future__ import annotations

from collections.abc import Callable

from pluggy import HookimplMarker, HookspecMarker

hookspec = HookspecMarker("dcsim")
hookimpl = HookimplMarker("dcsim")


@hookspec
def register_allocators(register: Callable[[type], None]) -> None:
    """Register allocator classes by calling ``register(AllocatorSubclass)`` for each."""


@hookspec
def register_schedulers(register: Callable[[type], None]) -> None:
    """Register queue-mode scheduler classes (:class:`dcsim.schedulers.Scheduler`
    subclasses) by calling ``register(SchedulerSubclass)`` for each."""


@hookspec
def register_reschedulers(register: Callable[[type], None]) -> None:
    """Register VM rescheduler classes (:class:`dcsim.reschedulers.Rescheduler`
    subclasses) by calling ``register(ReschedulerSubclass)`` for each."""


@hookspec
def register_placers(register: Callable[[type], None]) -> None:
    """Register VM placement classes (:class:`dcsim.placers.Placer` subclasses), which
    choose the host and NUMA node of an arriving VM, by calling ``register(cls)``."""


@hookspec
def register_gpu_allocators(register: Callable[[type], None]) -> None:
    """Register GPU allocator classes (:class:`dcsim.gpu_allocators.GpuAllocator`
    subclasses), which choose the node and GPU devices of an arriving pod in a GPU-sharing
    cluster (``mode: gpu``), by calling ``register(cls)`` for each."""


@hookspec
def register_power_models(register: Callable[[type], None]) -> None:
    """Register server power models (:class:`dcsim.power.PowerModel` subclasses), which
    give a server's watts at a utilisation, by calling ``register(cls)`` for each."""


@hookspec
def register_topologies(register: Callable[[type], None]) -> None:
    """Register topology builders (:class:`dcsim.model.TopologyBuilder` subclasses: a
    pydantic model whose ``kind: Literal["..."]`` names it under ``topology:`` and whose
    ``build()`` returns a :class:`~dcsim.model.topology.Topology`) by calling
    ``register(cls)`` for each."""


@hookspec
def register_arrival_processes(register: Callable[[type], None]) -> None:
    """Register arrival processes (:class:`dcsim.workload.BaseArrivals` subclasses: a
    pydantic model whose ``process: Literal["..."]`` names it under ``workload.arrival``,
    with ``rate`` and a vectorised ``times(rng, n, start)``) by calling ``register(cls)``."""


@hookspec
def register_distributions(register: Callable[[type], None]) -> None:
    """Register distributions (:class:`dcsim.workload.BaseDist` subclasses: a pydantic model
    whose ``dist: Literal["..."]`` names it wherever a distribution is read, with ``_draw``
    and either ``_support`` or ``_rv``/``_partial_mean``) by calling ``register(cls)``."""


@hookspec
def register_trace_formats(register: Callable[[type], None]) -> None:
    """Register trace formats (:class:`dcsim.workload.TraceFormat` subclasses), which read a
    raw trace into dcsim's request table for ``dcsim import-trace`` and
    ``workload.trace.format``, by calling ``register(cls)`` for each."""


@hookspec
def register_metrics(register: Callable[[type], None]) -> None:
    """Register metric plugins (:class:`dcsim.metrics.Metric` subclasses), which watch a
    run's arrivals, decisions, departures and failures and add their own summary and
    time-series columns, by calling ``register(cls)`` for each."""


@hookspec
def register_commands(register: Callable[[object], None]) -> None:
    """Register ``dcsim`` subcommands: call ``register(command)`` with a
    :class:`click.Command` (its ``name`` is the subcommand's) for each."""


@hookspec
def register_modes(register: Callable[[object], None]) -> None:
    """Register simulation families: call ``register(mode)`` with a
    :class:`dcsim.modes.Mode` instance (its ``name`` is the experiment's ``mode:`` value, its
    ``tables`` the results it writes) for each."""
