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

import io
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dcsim.errors import PluginError
from dcsim.plugins import get_plugin_class
from dcsim.reschedulers.base import Rescheduler
from dcsim.results.writer import write_atomic
from dcsim.vm.mapping_io import load_mapping
from dcsim.vm.model import MappingState, MoveRecord

MIGRATION_COLUMNS = {
    "step": pa.int64(),
    "vm_id": pa.string(),
    "from_host": pa.string(),
    "from_numa": pa.int64(),
    "to_host": pa.string(),
    "to_numa": pa.int64(),
}


def rescheduler_class(name: str) -> type[Rescheduler]:
    """The rescheduler class registered as ``name``; unknown names list what is available."""
    return get_plugin_class(name, "rescheduler")


def migration_columns(state: MappingState, records: list[MoveRecord]) -> dict[str, Any]:
    """One numpy column per :data:`MIGRATION_COLUMNS` entry, one row per migration step
    (ids from ``state``)."""
    rows = [state.describe(r) for r in records]
    return {k: np.array([r[k] for r in rows], dtype=str if t == pa.string() else np.int64)
            for k, t in MIGRATION_COLUMNS.items()}


def migrations_table(state: MappingState, records: list[MoveRecord]) -> pa.Table:
    """The ``migrations.parquet`` table of ``records`` (ids from ``state``)."""
    cols = migration_columns(state, records)
    return pa.table({k: pa.array(cols[k], type=t) for k, t in MIGRATION_COLUMNS.items()})


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
        outdir = Path(out)
        sink = io.BytesIO()
        pq.write_table(migrations_table(state, result.records), sink)
        write_atomic(outdir / "migrations.parquet", sink.getvalue())
        write_atomic(outdir / "summary.json",
                      (json.dumps(summary, indent=2, default=_jsonable) + "\n").encode())
    return summary


def _jsonable(x: Any) -> Any:
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return float(x)
    return str(x)
