"""The VM placer interface: choose where an arriving VM goes in a two-NUMA mapping.

A placer is a :class:`dcsim.plugin_base.Configurable` like allocators, schedulers and
reschedulers: ``name``, ``description``, a nested pydantic ``Options`` model, registered
through the ``register_placers`` hook (plugin kind ``"placer"``). :meth:`Placer.place`
returns ``(host index, numa)`` — NUMA 0 or 1 for a single-NUMA VM, :data:`dcsim.vm.BOTH`
(−1) for a double-NUMA VM — or None to reject the VM (nothing fits). It reads the mapping
through a :class:`~dcsim.vm.view.MappingView` (read-only arrays and queries; ``copy()`` for a
private state), so it cannot change it; the online engine validates the choice (an
infeasible one is a :class:`dcsim.errors.PluginError` naming the placer) and places the
VM.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from dcsim.plugin_base import Configurable, view_last
from dcsim.vm.model import VM
from dcsim.vm.view import MappingView


class Placer(Configurable, ABC):
    """Choose the (host, NUMA option) of each arriving VM, or reject it.

    ``self.rng`` is there for randomised placers; the built-ins are deterministic.
    :meth:`setup` is called once with the initial mapping before the first arrival. Every
    method takes the item first and the read-only view last, like every plugin kind
    (``place(vm, view)``; the old ``place(state, vm)`` still works, with a
    DeprecationWarning).
    """

    kind = "placer"

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        view_last(cls, "place", ("state", "view", "mapping"), "(vm, view)")

    def setup(self, view: MappingView) -> None:  # noqa: B027 - optional hook
        """Called once before the first arrival (default: nothing)."""

    @abstractmethod
    def place(self, vm: VM, view: MappingView) -> tuple[int, int] | None:
        """``(host, numa)`` for ``vm`` in the live mapping ``view`` (read-only), or None to
        reject it."""

    def released(self, vm: VM, placement: tuple[int, int], view: MappingView) -> None:  # noqa: B027
        """Called after ``vm`` left ``placement`` (its ``(host, numa)``) and its resources
        were given back: at its departure, or when a host failure interrupts it (it may
        then be offered to :meth:`place` again). Default: nothing."""

    def failed(self, kind: str, index: int, view: MappingView) -> None:  # noqa: B027
        """Called when host ``index`` fails (``kind`` ``"server"``, as the ``failures:``
        section names hosts), after its VMs were released and before any is placed again;
        it offers no capacity until :meth:`repaired`. Default: nothing."""

    def repaired(self, kind: str, index: int, view: MappingView) -> None:  # noqa: B027
        """Called when a failed host is back with its whole capacity. Default: nothing."""
