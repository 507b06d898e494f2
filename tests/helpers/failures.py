"""Failures in a test: a sink that keeps every table, an online VM run under failures."""

from __future__ import annotations

import numpy as np

from dcsim.experiment_sections import parse_failures
from dcsim.sim.failures import failure_rng


class Tables:
    def __init__(self):
        self.tables: dict[str, dict[str, list]] = {}

    def __call__(self, kind, columns):
        t = self.tables.setdefault(kind, {})
        for k, v in columns.items():
            t.setdefault(k, []).extend(list(v))



def run_vm(tmp_path, rows, failures: dict, until=20.0, placer=None, metrics=None, **vm):
    import pandas as pd

    from dcsim.modes.vm_online.engine import run_online
    from dcsim.placers.builtin import FirstFit

    p = tmp_path / "vms.csv"
    pd.DataFrame(rows, columns=["id", "arrival", "duration", "cpu", "mem"]).to_csv(p,
                                                                                 index=False)
    spec = {"mapping": {"hosts": 2, "numa_cpu": 20, "numa_mem": 100},
            "workload": {"trace": {"path": p.name, "mem_unit_mb": 1}},
            "check_invariants": True, "until": until, **vm}
    sink = Tables()
    out = run_online(spec, placer or FirstFit(), None, np.random.default_rng(0), sink,
                     base_dir=tmp_path, failures=parse_failures(failures),
                     failure_rng=failure_rng(0, 0), metrics=metrics)
    return out, sink.tables
