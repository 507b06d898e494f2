"""The simulation families. Each is one package, ``dcsim/modes/<mode>/``, holding all it
needs: its config sections (``spec.py``, which imports no SimPy), its engine, its failure
adapter and meters where it has them, and its :class:`~dcsim.modes.base.Mode`
(``mode.py``: the plugin list it reads, the top-level sections it accepts, its checks before
anything runs and how one run is built). The experiment file's model asks the mode which
sections it reads (:func:`dcsim.runner.config.experiment_model`), so a new family is one
package here, its name in :data:`PACKAGES`, and its tables in
:data:`dcsim.results.schema.TABLES`; no runner code. A package outside dcsim registers a
family of its own through the ``register_modes`` hook (a :class:`Mode` whose ``tables``
declare what it writes); the built-ins register through the same hook
(:mod:`dcsim.modes.builtin`).

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

from collections.abc import Iterator, Mapping

from dcsim.modes.base import Built, Mode, Section
from dcsim.modes.builtin import PACKAGES

__all__ = ["MODES", "PACKAGES", "Built", "Mode", "Section"]


class _Modes(Mapping[str, Mode]):
    """Every registered mode by its ``mode:`` value: the built-ins, then plugins' (asked of
    the registry on use, so a local plugin's mode counts once it is loaded; importing one
    mode's module, as ``dcsim reschedule`` does, loads no other mode's sections)."""

    _cached: tuple[tuple[str, ...], dict[str, Mode]] | None = None

    def _found(self) -> dict[str, Mode]:
        from dcsim import plugins
        from dcsim.results.schema import TABLES

        cached = self._cached
        if cached is not None and cached[0] == plugins.module_names():
            return cached[1]
        modes = {name: r.cls for name, r in plugins.registered("mode").items()}
        for name, mode in modes.items():
            TABLES.setdefault(name, mode.tables)  # so results readers know its columns
        self._cached = (plugins.module_names(), modes)
        return modes

    def __getitem__(self, name: str) -> Mode:
        return self._found()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._found())

    def __len__(self) -> int:
        return len(self._found())


#: every mode by its ``mode:`` value (``loss`` is the default)
MODES: Mapping[str, Mode] = _Modes()
