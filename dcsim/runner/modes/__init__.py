"""The simulation families as one protocol: each mode is one module holding what an
experiment of that family needs (its plugin list, its checks before anything runs, its
resolved sections and how one run is built). A fifth family is one new module here, an
entry in :data:`MODES` and in :data:`~dcsim.runner.modes.base.PLUGIN_LISTS`, its ``mode:``
value and plugin list in the experiment spec, and its tables in
:mod:`dcsim.results.schema`.

* ``loss`` (:mod:`.loss`): requests arrive; ``allocators`` place or reject them.
* ``queue`` (:mod:`.queue`): jobs wait; ``schedulers`` pick which starts (DeepRM).
* ``reschedule`` (:mod:`.reschedule`): ``reschedulers`` migrate at most MNL VMs (VMR²L).
* ``vm_online`` (:mod:`.vm_online`): VMs arrive and depart; ``placers`` place them.
* ``gpu`` (:mod:`.gpu`): pods of a GPU-sharing cluster; ``gpu_allocators`` place them (FGD).
"""

from __future__ import annotations

from dcsim.runner.modes.base import Built, Mode
from dcsim.runner.modes.gpu import GpuMode
from dcsim.runner.modes.loss import LossMode
from dcsim.runner.modes.queue import QueueMode
from dcsim.runner.modes.reschedule import RescheduleMode
from dcsim.runner.modes.vm_online import VMOnlineMode

#: every mode by its ``mode:`` value
MODES: dict[str, Mode] = {m.name: m for m in (LossMode(), QueueMode(), RescheduleMode(),
                                              VMOnlineMode(), GpuMode())}

__all__ = ["MODES", "Built", "Mode"]
