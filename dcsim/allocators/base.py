"""The allocator interface every built-in and third-party allocation policy implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from dcsim.errors import ConfigError
from dcsim.model import Placement, Request, StateView, Topology

#: What ``allocate`` may return: a server index (the whole demand on that server), a
#: :class:`Placement`, or ``None`` to reject.
Choice = int | Placement | None


class Allocator(ABC):
    """Choose resources for one request at a time.

    Subclasses set ``name`` (the identifier used in YAML) and may define a nested
    ``Options`` pydantic model (unknown keys are rejected). The engine builds one instance
    per run with that run's options, its own random generator (``self.rng``; never use a
    global RNG) and the topology, then calls :meth:`allocate` for every arrival. The engine
    validates the returned choice against the live state; an infeasible or malformed choice
    is a :class:`dcsim.PluginError` naming the allocator.
    """

    name: ClassVar[str]
    description: ClassVar[str] = ""

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid")

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

    @classmethod
    def parse_options(cls, raw: dict[str, Any] | None, where: str = "options") -> BaseModel:
        """Validate ``raw`` (from YAML) into ``cls.Options``; errors name the field."""
        try:
            return cls.Options.model_validate(raw or {})
        except ValidationError as e:
            err = e.errors()[0]
            loc = ".".join(str(x) for x in err["loc"])
            field = f"{where}.{loc}" if loc else where
            raise ConfigError(f"{field}: {err['msg']} (allocator {cls.name!r})") from None

    @classmethod
    def label_for(cls, options: BaseModel) -> str:
        """The name results use for this allocator with ``options`` (e.g. ``ahab(kraken)``).

        Default: ``name`` alone, or ``name(key=value, ...)`` listing the options that differ
        from their defaults. Override for a shorter composition label.
        """
        changed = {
            k: v for k, v in options.model_dump().items()
            if k in type(options).model_fields
            and v != type(options).model_fields[k].get_default(call_default_factory=True)
        }
        if not changed:
            return cls.name
        return f"{cls.name}({', '.join(f'{k}={v}' for k, v in changed.items())})"

    @property
    def label(self) -> str:
        """This instance's label: ``label_for(self.options)``."""
        return self.label_for(self.options)

    def setup(self, view: StateView) -> None:  # noqa: B027 - optional hook
        """Called once before the first arrival."""

    @abstractmethod
    def allocate(self, request: Request, view: StateView) -> Choice:
        """Return where ``request`` goes, or ``None`` to reject it. Must not mutate anything."""

    def released(self, request: Request, placement: Placement, view: StateView) -> None:  # noqa: B027
        """Called after a request departs and its resources were released."""
