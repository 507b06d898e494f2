"""The allocator interface every built-in and third-party allocation policy implements."""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np
from pydantic import BaseModel

from dcsim.model import Placement, Request, StateView, Topology
from dcsim.plugin_base import Configurable

#: What ``allocate`` may return: a server index (the whole demand on that server), a
#: :class:`Placement`, or ``None`` to reject.
Choice = int | Placement | None


class StepBoundary:
    """A point inside a stepwise decision that the engine acts on (:data:`FIRST_STEP`)."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"dcsim.allocators.base.{self.name}"


#: What a *stepwise* decision yields once its first server is taken and something is left to
#: place. A stepwise allocator's ``allocate()`` returns a generator; the loss engine runs it,
#: passes the SimPy events it yields to SimPy, and on this marker releases the requests
#: ending at this instant (``departures: after_first_step``, the Nara authors' clock), then
#: resumes the generator (sending ``None``), whose later choices see the freed resources.
#: The engine asks for it by setting ``view.step_boundaries``
#: (:class:`~dcsim.model.StateView`); :class:`~dcsim.allocators.multi.MultiServerAllocator`
#: then decides stepwise and yields it. An allocator that never yields it gets those
#: departures after its decision. The allocator never releases anything itself.
FIRST_STEP = StepBoundary("FIRST_STEP")


class Allocator(Configurable, ABC):
    """Choose resources for one request at a time.

    Subclasses set ``name`` (the identifier used in YAML) and may define a nested
    ``Options`` pydantic model (unknown keys are rejected). The engine builds one instance
    per run with that run's options, its own random generator (``self.rng``; never use a
    global RNG) and the topology, then calls :meth:`allocate` for every arrival. The engine
    validates the returned choice against the live state; an infeasible or malformed choice
    is a :class:`dcsim.PluginError` naming the allocator.
    """

    kind = "allocator"

    def __init__(
        self,
        options: BaseModel | None = None,
        *,
        rng: np.random.Generator | None = None,
        topology: Topology | None = None,
    ):
        super().__init__(options, rng=rng)
        self.topology = topology

    def setup(self, view: StateView) -> None:  # noqa: B027 - optional hook
        """Called once before the first arrival."""

    @abstractmethod
    def allocate(self, request: Request, view: StateView) -> Choice:
        """Return where ``request`` goes, or ``None`` to reject it. Must not mutate anything."""

    def released(self, request: Request, placement: Placement, view: StateView) -> None:  # noqa: B027
        """Called after a request departs and its resources were released (also when a
        failure interrupts it: :meth:`allocate` may then be offered it again)."""

    def failed(self, kind: str, index: int, view: StateView) -> None:  # noqa: B027
        """Called when component ``index`` of ``kind`` (``"server"`` or ``"link"``) fails,
        after the requests on it were released and before any is offered again
        (``failures:``, docs/howto/failures.md). It offers no capacity until
        :meth:`repaired`; ``view.server_up`` / ``view.link_up`` say what is up."""

    def repaired(self, kind: str, index: int, view: StateView) -> None:  # noqa: B027
        """Called when a failed component is back with its whole capacity."""
