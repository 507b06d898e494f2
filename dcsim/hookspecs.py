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
