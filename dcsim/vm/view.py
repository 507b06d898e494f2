"""What a VM placer may read: :class:`MappingView`, a read-only window on the live
:class:`~dcsim.vm.model.MappingState` (allocators get a :class:`~dcsim.model.state.StateView`
in the same spirit).

The view's arrays (``free_cpu``, ``vm_host``, ...) are read-only numpy views that always
reflect the live mapping; its methods are the state's queries (``fit_options``,
``fragment_rate``, ...). Nothing that changes the mapping is reachable: ``apply``,
``add_vm`` and the like raise :class:`AttributeError`, and writing into an array raises
numpy's ``ValueError``. A placer that wants to try moves ahead calls :meth:`MappingView.copy`
for a private, mutable state.
"""

from __future__ import annotations

from dcsim.readonly import ReadOnlyView

#: array attributes, handed out as read-only views
_ARRAYS = frozenset({"cap_cpu", "cap_mem", "free_cpu", "free_mem", "vm_host", "vm_numa",
                     "vm_cpu", "vm_mem", "vm_double", "vm_migratable", "host_up"})
#: everything else a placer may read: sizes, ids and the state's queries
_READABLE = frozenset({"n_hosts", "n_vms", "hosts", "vms", "host_ids", "vm_ids", "vm_index",
                       "host_index", "fragment", "fragment_rate", "total_free_cpu",
                       "util_cpu", "util_mem", "fit_options", "place_reason", "options",
                       "reason", "placement", "describe", "same_as"})


class MappingView(ReadOnlyView):
    """A read-only view of ``state`` (see the module docstring)."""

    __slots__ = ()
    ARRAYS = _ARRAYS
    READABLE = _READABLE
    READER = "a placer"
    STATE = "the mapping"
