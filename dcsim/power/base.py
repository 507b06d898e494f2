"""The power model interface: watts of a server as a function of its utilisation.

A power model is a :class:`dcsim.plugin_base.Configurable` like allocators: ``name``,
``description``, a nested pydantic ``Options`` model, registered through the
``register_power_models`` hook (plugin kind ``"power_model"``). The engine calls
:meth:`PowerModel.power` with a numpy array of utilisations (each in [0, 1]: the share of
the server's capacity of the resource that drives power, ``power.resource``) and
expects an array of watts of the same shape, non-negative and finite. It is called on many
servers' intervals at once, so an implementation should be vectorised (numpy ufuncs,
``np.interp``), never a Python loop over the values.

A model need not be monotone, but the summary's bounds (between the idle and the peak
draw of each server) are :meth:`idle_w` and :meth:`peak_w`, the draw at 0 and at 1.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np
from pydantic import BaseModel

from dcsim.plugin_base import Configurable


class PowerModel(Configurable, ABC):
    """Watts drawn by one server at a utilisation in [0, 1]."""

    kind = "power_model"

    def __init__(self, options: BaseModel | None = None):
        self.options = options if options is not None else self.Options()

    @abstractmethod
    def power(self, util: np.ndarray) -> np.ndarray:
        """Watts at each utilisation of ``util`` (float64, each in [0, 1])."""

    def idle_w(self) -> float:
        """Watts of a server that is on and hosts nothing (utilisation 0)."""
        return float(self.power(np.zeros(1))[0])

    def peak_w(self) -> float:
        """Watts at full utilisation."""
        return float(self.power(np.ones(1))[0])
