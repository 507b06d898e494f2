"""A read-only window on a plugin's live state (:class:`ReadOnlyView`): what a VM placer
(:class:`dcsim.vm.view.MappingView`) and a GPU allocator
(:class:`dcsim.gpu.cluster.GpuClusterView`) read.

A subclass names the state's array attributes (handed out as read-only numpy views that
always reflect the live state) and the other attributes it may read (sizes, queries);
anything else, and every assignment, raises :class:`AttributeError` with a message naming
the plugin kind and the state. :meth:`ReadOnlyView.copy` gives a private, mutable copy.
"""

from __future__ import annotations

from typing import Any, ClassVar


class ReadOnlyView:
    """A read-only view of ``state`` (see the module docstring)."""

    __slots__ = ("_state",)
    #: the state's arrays, handed out read-only
    ARRAYS: ClassVar[frozenset[str]] = frozenset()
    #: everything else a plugin may read
    READABLE: ClassVar[frozenset[str]] = frozenset()
    #: for the messages: who reads ("a placer") and what ("the mapping")
    READER: ClassVar[str] = "a plugin"
    STATE: ClassVar[str] = "the state"

    def __init__(self, state: Any):
        object.__setattr__(self, "_state", state)

    def __getattr__(self, name: str) -> Any:
        state = object.__getattribute__(self, "_state")
        if name in self.ARRAYS:
            arr = getattr(state, name).view()
            arr.flags.writeable = False
            return arr
        if name in self.READABLE:
            return getattr(state, name)
        raise AttributeError(f"{self.READER} reads {self.STATE} through a read-only view: "
                             f"{name!r} is not available (copy() gives a private state)")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{self.STATE} view is read-only (cannot set {name!r})")

    def copy(self) -> Any:
        """A private, mutable copy of the live state (for trying moves ahead)."""
        return object.__getattribute__(self, "_state").copy()
