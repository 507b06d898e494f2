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
        self.options = options if options is not None else self.Options()
        self.rng = rng if rng is not None else np.random.default_rng(0)
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
