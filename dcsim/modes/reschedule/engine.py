"""Static VM rescheduling as an experiment run (``mode: reschedule``): one rescheduler's run
on the mapping the ``vm:`` section names (:mod:`dcsim.modes.reschedule.spec`).

:func:`run_static` runs the rescheduler (validated step by step, see
:meth:`dcsim.reschedulers.Rescheduler.run`), hands its migration rows to
``sink("migrations", columns)`` (``step``, ``vm_id``, ``from_host``, ``from_numa``,
``to_host``, ``to_numa``, as ``dcsim reschedule`` writes them) and returns the summary
row's metrics.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from dcsim.modes.base import Sink
from dcsim.modes.reschedule.spec import StaticSpec
from dcsim.validation import validate_section
from dcsim.vm.mapping_spec import build_mapping


def run_static(spec: dict[str, Any], rescheduler, rng: np.random.Generator,
               sink: Sink | None, base_dir: str | os.PathLike | None = None, *,
               where: str = "vm") -> dict[str, Any]:
    """Run ``rescheduler`` (an instance) on the mapping of ``spec`` (the ``vm:`` section)
    under its MNL; send the migration rows to ``sink("migrations", ...)`` and return::

        {"mnl", "fr_before", "fr_after", "migrations", "seconds", "bound", "status",
         "fragment_before", "fragment_after", "hosts", "vms", "migratable_vms", "info"}

    ``seconds`` is the rescheduler's own time; ``bound`` a lower bound on the reachable FR
    (the MIP's) or None; ``info`` the rescheduler's extra report as compact JSON text.
    Raises ConfigError for a bad section, PluginError for an invalid migration list.
    """
    s = validate_section(StaticSpec, spec if spec is not None else {}, where)
    state = build_mapping(s.mapping, rng, base_dir, f"{where}.mapping")
    result = rescheduler.run(state, s.mnl)
    after = result.state
    if sink is not None:
        from dcsim.vm.mapping_io import migration_columns
        sink("migrations", migration_columns(state, result.records))
    return {
        "mnl": s.mnl,
        **result.metrics(),
        "fragment_before": state.fragment(),
        "fragment_after": after.fragment() if after is not None else state.fragment(),
        "hosts": state.n_hosts,
        "vms": state.n_vms,
        "migratable_vms": int(state.vm_migratable.sum()),
        "info": json.dumps(result.info, sort_keys=True, separators=(",", ":"), default=str),
    }
