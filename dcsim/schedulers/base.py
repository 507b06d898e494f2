"""The queue-mode scheduler interface (DeepRM-style): pick which waiting job starts.

In queue mode jobs wait in ``M`` visible slots (plus a backlog the scheduler cannot pick
from). At each decision the engine shows the scheduler a :class:`QueueView` and the
scheduler returns a slot index ``0..M-1`` to start that job, or ``M`` (``view.void``) to let
time advance by one step. Time is frozen while the scheduler keeps choosing jobs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from dcsim.plugin_base import Configurable


@dataclass(frozen=True)
class QueueView:
    """What a scheduler sees at one decision. Arrays are read-only views; never mutate.

    ``free[t, r]`` is the free amount of resource ``r`` ``t`` steps from now (``t <
    horizon``), after every job already started (the DeepRM machine image). Empty slots have
    ``slot_valid`` False, length 0 and zero demand.
    """

    time: int
    capacity: np.ndarray      # (R,)
    free: np.ndarray          # (horizon, R)
    slot_valid: np.ndarray    # (M,) bool
    slot_length: np.ndarray   # (M,) int
    slot_demand: np.ndarray   # (M, R) float
    slot_arrival: np.ndarray  # (M,) int, the step each job entered the system
    backlog: int              # jobs waiting behind the visible slots

    @property
    def slots(self) -> int:
        return int(self.slot_valid.shape[0])

    @property
    def void(self) -> int:
        """The action that starts nothing and advances time by one step."""
        return self.slots

    @property
    def horizon(self) -> int:
        return int(self.free.shape[0])

    def fits_now(self) -> np.ndarray:
        """(M,) bool: the slot holds a job whose demand fits in ``free`` for each of its
        first ``length`` steps, i.e. it can start now (the authors' SJF/Packer test)."""
        # the least free amount over the first t+1 steps, per resource: (T, R)
        low = np.minimum.accumulate(self.free, axis=0)
        horizon = self.horizon
        rows = np.clip(self.slot_length, 1, horizon) - 1
        ok = (low[rows] >= self.slot_demand - 1e-9).all(axis=1)
        return ok & self.slot_valid & (self.slot_length <= self.horizon)


class Scheduler(Configurable, ABC):
    """Choose which visible job starts next (queue mode).

    Subclasses set ``name`` and may define a nested ``Options`` model, exactly like
    allocators, and register through the ``register_schedulers`` hook. The engine builds
    one instance per run with its own random generator (``self.rng``) and calls
    :meth:`choose` at every decision; an out-of-range action is a :class:`dcsim.PluginError`.
    """

    kind = "scheduler"

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "reset" in cls.__dict__ and "setup" not in cls.__dict__:
            import warnings

            warnings.warn(f"{cls.__module__}.{cls.__qualname__}.reset() is the old name of "
                          "the once-per-run hook; write setup(view), as every plugin kind "
                          "has it (reset() is still called for now)", DeprecationWarning,
                          stacklevel=2)

    def setup(self, view: QueueView) -> None:
        """Called before each job set (episode) with its first view; the same once-per-run
        hook every plugin kind has. Default: a subclass's old ``reset()``, if it has one."""
        reset = getattr(type(self), "reset", None)
        if reset is not None:
            reset(self)

    @abstractmethod
    def choose(self, view: QueueView) -> int:
        """A slot index ``0..M-1`` to start that job, or ``view.void`` to advance time."""
