"""``mode: loss``: requests arrive on a topology and ``allocators`` place or reject them.

* :mod:`.spec`: the mode's own sections (``warmup:``, ``power:``) and the engine's settings
  (:class:`~dcsim.modes.loss.spec.EngineConfig`); no SimPy.
* :mod:`.engine`: the SimPy :class:`~dcsim.modes.loss.engine.Engine`.
* :mod:`.failures`: the engine's state as a failure target (``failures:``).
* :mod:`.power`: the ``power:`` section built for a topology, and the meter.
* :mod:`.metrics`, :mod:`.records`, :mod:`.streamed_sum`: what a run measures and records.
* :mod:`.mode`: the :class:`~dcsim.modes.base.Mode` the runner calls.

``Engine`` and ``EngineConfig`` are importable from here; the engine (and SimPy) load on
first use, so validating an experiment does not import them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dcsim.lazy_exports import lazy_getattr

if TYPE_CHECKING:
    from dcsim.modes.loss.engine import Engine
    from dcsim.modes.loss.spec import EngineConfig

__all__ = ["Engine", "EngineConfig"]

__getattr__ = lazy_getattr(__name__, {"Engine": "dcsim.modes.loss.engine",
                                      "EngineConfig": "dcsim.modes.loss.spec"})
