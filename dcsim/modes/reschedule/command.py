"""The logic of ``dcsim reschedule MAPPING.json --algorithm greedy --mnl 50 [--out DIR]``.

:func:`reschedule_file` loads a mapping in the authors' format, runs one rescheduler on it,
validates the migrations step by step through the model and returns a summary. With
``out`` it writes, each atomically (a temporary file renamed into place):

* ``migrations.parquet``: one row per step — ``step`` (1-based), ``vm_id``, ``from_host``,
  ``from_numa``, ``to_host``, ``to_numa`` (NUMA 0 or 1; −1 means both NUMAs, a double-NUMA
  VM);
* ``summary.json``: the returned dict.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from dcsim.atomic import write_atomic
from dcsim.errors import PluginError
from dcsim.plugins import get_plugin_class
from dcsim.reschedulers.base import Rescheduler
from dcsim.vm.mapping_io import load_mapping, migration_columns


def __getattr__(name: str):
    # MIGRATION_COLUMNS, the ``migrations.parquet`` columns and their Arrow types (the
    # declared :data:`~dcsim.results.schema.VM_MIGRATIONS` table), is built on first use:
    # the schema imports pyarrow, which a reschedule without --out never needs
    if name == "MIGRATION_COLUMNS":
        from dcsim.results.schema import ARROW, VM_MIGRATIONS

        return {c.name: ARROW[c.type] for c in VM_MIGRATIONS.columns}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def rescheduler_class(name: str) -> type[Rescheduler]:
    """The rescheduler class registered as ``name``; unknown names list what is available."""
    return get_plugin_class(name, "rescheduler")


def reschedule_file(path: str | os.PathLike, algorithm: str = "greedy", mnl: int = 50,
                    options: dict[str, Any] | None = None,
                    out: str | os.PathLike | None = None, *, seed: int = 0) -> dict[str, Any]:
    """Load ``path``, run rescheduler ``algorithm`` with ``options`` (validated by its
    ``Options``) under migration number limit ``mnl``, validate the result and return::

        {"mapping", "algorithm", "label", "mnl", "fr_before", "fr_after", "migrations",
         "seconds", "bound", "status", "info", "hosts", "vms", "migratable_vms",
         "skipped_hosts", "skipped_vms", "free_mismatches"}

    ``migrations`` is the number of steps; ``seconds`` the rescheduler's own time; ``bound``
    a lower bound on the FR reachable (the MIP's dual bound) or None. With ``out``, write
    ``migrations.parquet`` and ``summary.json`` there (see the module docstring).
    Raises ConfigError for a bad file or options, PluginError for an unknown algorithm or
    an invalid migration list.
    """
    if mnl < 0:
        raise PluginError(f"--mnl must be >= 0, got {mnl}")
    loaded = load_mapping(path)
    cls = rescheduler_class(algorithm)
    opts = cls.parse_options(options, where="options")
    resched = cls(opts, rng=np.random.default_rng(seed))
    result = resched.run(loaded.state, mnl)
    state = loaded.state
    summary: dict[str, Any] = {
        "mapping": str(path),
        "algorithm": cls.name,
        "label": cls.label_for(opts),
        "mnl": mnl,
        **result.metrics(),
        "info": result.info,
        "hosts": state.n_hosts,
        "vms": state.n_vms,
        "migratable_vms": int(state.vm_migratable.sum()),
        "skipped_hosts": len(loaded.skipped_hosts),
        "skipped_vms": len(loaded.skipped_vms),
        "free_mismatches": loaded.free_mismatches,
    }
    if out is not None:
        from dcsim.results.schema import VM_MIGRATIONS
        from dcsim.results.writer import write_table_file

        outdir = Path(out)
        write_table_file(outdir / "migrations.parquet", VM_MIGRATIONS,
                         migration_columns(state, result.records))
        write_atomic(outdir / "summary.json",
                      (json.dumps(summary, indent=2, default=_jsonable) + "\n").encode())
    return summary


def _jsonable(x: Any) -> Any:
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return float(x)
    return str(x)
