"""The VM rescheduler interface (VMR²L): given a mapping and a migration number limit (MNL),
return an ordered list of migrations that lowers the fragment rate.

A rescheduler is a :class:`dcsim.plugin_base.Configurable` like allocators and schedulers:
``name``, ``description``, a nested pydantic ``Options`` model, registered through the
``register_reschedulers`` hook. :meth:`Rescheduler.reschedule` returns a list of
:class:`dcsim.vm.Migration`; it may return a :class:`Plan` (a list with ``status``,
``bound`` and ``info``) to say more. :meth:`Rescheduler.run` times it on a read-only view
of the state, validates the list step by step through the model (an invalid list is a
:class:`dcsim.errors.PluginError` naming the rescheduler, the step, the VM and the reason)
and reports the FR before and after.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dcsim.errors import PluginError
from dcsim.plugin_base import Configurable
from dcsim.vm.model import BOTH, InvalidMigration, MappingState, Migration, MoveRecord
from dcsim.vm.view import MappingView


class Plan(list):
    """A migration list with what the rescheduler knows about it.

    ``status``: a short word (``"ok"``, ``"early_stop"``, ``"optimal"``, ``"time_limit"``,
    ``"no_solution"``, …). ``bound``: a lower bound on the FR any valid answer can reach,
    when the rescheduler knows one (the MIP's dual bound), else None. ``info``: anything
    else worth reporting (JSON-serialisable).
    """

    def __init__(self, migrations=(), status: str = "ok", bound: float | None = None,
                 info: dict[str, Any] | None = None):
        super().__init__(migrations)
        self.status = status
        self.bound = bound
        self.info = dict(info or {})


@dataclass
class RescheduleResult:
    """What :meth:`Rescheduler.run` returns."""

    migrations: list[Migration]
    records: list[MoveRecord]
    fr_before: float
    fr_after: float
    seconds: float
    status: str = "ok"
    bound: float | None = None
    info: dict[str, Any] = field(default_factory=dict)
    state: MappingState | None = None  # the state after the migrations

    def metrics(self) -> dict[str, Any]:
        """The result's numbers as results columns: FR before/after, migrations (steps),
        the rescheduler's seconds, its bound (or None) and status."""
        return {"fr_before": self.fr_before, "fr_after": self.fr_after,
                "migrations": len(self.records), "seconds": self.seconds,
                "bound": self.bound, "status": self.status}


class Rescheduler(Configurable, ABC):
    """Choose up to ``mnl`` migrations that lower the fragment rate of a mapping.

    Subclasses set ``name`` (and may define ``Options``) and implement :meth:`reschedule`.
    Ties between equally good choices go to the earlier VM / host in input order, so
    results are deterministic; ``self.rng`` is there for randomised rescheduler plugins.
    """

    kind = "rescheduler"
    #: a subclass written as ``reschedule(self, state, mnl)`` (the old shape): it is handed
    #: a private copy it may change, as before
    _wants_state: bool = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        fn = cls.__dict__.get("reschedule")
        if fn is None:
            return
        import inspect
        import warnings

        params = list(inspect.signature(fn).parameters)
        cls._wants_state = len(params) > 1 and params[1] == "state"
        if cls._wants_state:
            warnings.warn(f"{cls.__module__}.{cls.__qualname__}.reschedule(state, mnl) is the "
                          "old shape; write reschedule(view, mnl): the mapping comes as a "
                          "read-only view, as in every plugin kind, and view.copy() gives a "
                          "private state to try moves on (the old shape still gets a copy "
                          "for now)", DeprecationWarning, stacklevel=2)

    @abstractmethod
    def reschedule(self, view: MappingView, mnl: int) -> list[Migration]:
        """An ordered list of at most ``mnl`` migrations, valid step by step from the
        mapping ``view`` (read-only, like every policy kind's view; ``view.copy()`` is a
        private :class:`~dcsim.vm.model.MappingState` to try moves on)."""

    def run(self, state: MappingState, mnl: int) -> RescheduleResult:
        """Time :meth:`reschedule` on a copy of ``state``, validate its answer step by step
        and return the FRs, the records and the state after the migrations."""
        if mnl < 0:
            raise PluginError(f"the migration number limit must be >= 0, got {mnl}")
        given = state.copy() if self._wants_state else MappingView(state)
        t0 = time.perf_counter()
        # nothing to move (an online mapping whose VMs have all left): no plugin is asked
        plan = self.reschedule(given, mnl) if state.n_vms else Plan([], status="no_candidate")
        seconds = time.perf_counter() - t0
        after = state.copy()
        try:
            records = after.apply_all(plan, mnl=mnl)
        except InvalidMigration as e:
            raise PluginError(f"rescheduler {self.label!r} returned an invalid migration "
                              f"list: {e}") from None
        return RescheduleResult(
            migrations=list(plan), records=records, fr_before=state.fragment_rate(),
            fr_after=after.fragment_rate(), seconds=seconds,
            status=getattr(plan, "status", "ok"), bound=getattr(plan, "bound", None),
            info=dict(getattr(plan, "info", {}) or {}), state=after)


def sequence_moves(state: MappingState, moves: list[tuple[int, int, int]], budget: int,
                   ) -> tuple[list[Migration], dict[str, int]]:
    """Order target moves ``(vm, host, numa)`` so that each step is valid, applying them to
    ``state`` (which is modified) and using at most ``budget`` steps.

    A target assignment (from a MIP, or a batch re-placement) is feasible as an end state,
    but its moves may block each other: A cannot enter host 2 until B leaves it, and B
    cannot enter host 1 until A leaves. The moves are applied greedily: repeatedly the first
    pending move (in the given order) that is valid now. When none is (a cycle), one VM takes
    a *detour*: it moves to a third host with room (the one leaving it the most free cpu,
    preferring a VM whose leaving unblocks another pending move), and later to its target.
    A detour costs one extra step, so it is taken only if the pending moves still fit in
    ``budget``; otherwise the remaining moves are dropped (their VMs stay where they are,
    the state stays valid). Returns the migrations and ``{"detours": d, "dropped": n}``.
    """
    pending = [(int(k), int(h), int(n)) for k, h, n in moves]
    pending = [mv for mv in pending if not (state.vm_host[mv[0]] == mv[1]
                                            and state.vm_numa[mv[0]] == mv[2])]
    out: list[Migration] = []
    detours = 0
    while pending and len(out) < budget:
        for idx, (k, h, n) in enumerate(pending):
            m = Migration(k, h, n)
            if state.reason(m) is None:
                out.append(m)
                state.apply(m, len(out))
                pending.pop(idx)
                break
        else:
            if len(out) + len(pending) + 1 > budget:
                break
            detour = _pick_detour(state, pending)
            if detour is None:
                break
            out.append(detour)
            state.apply(detour, len(out))
            detours += 1
    return out, {"detours": detours, "dropped": len(pending)}


def _pick_detour(state: MappingState, pending: list[tuple[int, int, int]]) -> Migration | None:
    """A move of a pending VM to a host other than its target (see :func:`sequence_moves`)."""
    first: Migration | None = None
    for k, h, _ in pending:
        ok = state.options(k)
        ok[h] = False
        if not ok.any():
            continue
        room = np.where(ok, state.free_cpu, -1)
        if state.vm_double[k]:
            score = room.min(axis=1)
            host = int(score.argmax())
            m = Migration(k, host, BOTH)
        else:
            flat = int(room.argmax())
            m = Migration(k, flat // 2, flat % 2)
        if first is None:
            first = m
        trial = state.copy()
        trial.apply(m)
        if any(trial.reason(Migration(k2, h2, n2)) is None
               for k2, h2, n2 in pending if k2 != k):
            return m
    return first
