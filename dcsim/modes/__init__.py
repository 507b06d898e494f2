"""The simulation families. Each is one package, ``dcsim/modes/<mode>/``, holding all it
needs: its config sections (``spec.py``, which imports no SimPy), its engine, its failure
adapter and meters where it has them, and its :class:`~dcsim.modes.base.Mode`
(``mode.py``: the plugin list it reads, the top-level sections it accepts, its checks before
anything runs and how one run is built). The experiment file's model asks the mode which
sections it reads (:func:`dcsim.runner.config.experiment_model`), so a new family is one
package here, its name in :data:`PACKAGES`, and its tables in
:data:`dcsim.results.schema.TABLES`; no runner code.

* ``loss`` (:mod:`.loss`): requests arrive; ``allocators`` place or reject them.
* ``queue`` (:mod:`.queue`): jobs wait; ``schedulers`` pick which starts (DeepRM).
* ``reschedule`` (:mod:`.reschedule`): ``reschedulers`` migrate at most MNL VMs (VMR²L).
* ``vm_online`` (:mod:`.vm_online`): VMs arrive and depart; ``placers`` place them.
* ``gpu`` (:mod:`.gpu`): pods of a GPU-sharing cluster; ``gpu_allocators`` place them (FGD).

The packages never import one another (an import-linter contract); what several share lives
below them (:mod:`dcsim.sim`, :mod:`dcsim.experiment_sections`, the domain models).
Importing :data:`MODES` imports each mode's ``mode.py`` and ``spec.py``, never an engine.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from dcsim.modes.base import Built, Mode, Section

if TYPE_CHECKING:
    MODES: dict[str, Mode]

#: the mode packages, in the order messages list them (``loss`` is the default mode)
PACKAGES = ("loss", "queue", "reschedule", "vm_online", "gpu")

__all__ = ["MODES", "PACKAGES", "Built", "Mode", "Section"]


def __getattr__(name: str) -> Any:
    # MODES, every mode by its ``mode:`` value, is made on first use: importing one mode's
    # module (``dcsim reschedule``'s command) does not load the other modes' sections
    if name == "MODES":
        modes: dict[str, Mode] = {}
        for package in PACKAGES:
            mode = importlib.import_module(f"dcsim.modes.{package}.mode").MODE
            modes[mode.name] = mode
        globals()["MODES"] = modes
        return modes
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
