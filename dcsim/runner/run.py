"""One run: build what its mode needs from the validated plan, simulate, and commit its
tables and summary row through the declared schemas (:mod:`dcsim.results.schema`).

``execute_run`` is a plain top-level function of a picklable :class:`RunPlan`, so the same
code runs in-process, in a local process pool, or on Dask (:mod:`dcsim.runner.executors`);
a run's randomness comes only from (experiment seed, seed index), so every executor gives
the same rows.
"""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from dcsim.runner.plan import RunPlan


def run_rngs(seed: int, index: int) -> tuple[np.random.Generator, np.random.Generator]:
    """Independent workload and allocator generators of run ``index`` of experiment ``seed``.

    The workload stream does not depend on the allocator, so every allocator of a seed sees
    the same requests (common random numbers, as the papers compare).
    """
    workload, allocator = np.random.SeedSequence(entropy=seed, spawn_key=(index,)).spawn(2)
    return np.random.default_rng(workload), np.random.default_rng(allocator)


def metric_columns(plan: RunPlan, table: str) -> list:
    """The columns the run's metric plugins add to ``table`` (``summary``, ``timeseries``),
    as schema declarations (:class:`dcsim.results.schema.Col`), in the plugins' order."""
    if not plan.metrics or table not in ("summary", "timeseries"):
        return []
    from dcsim.plugins import get_plugin_class
    from dcsim.results.schema import Col

    out = []
    for entry in plan.metrics:
        cls = get_plugin_class(entry["name"], "metric")
        for name, c in getattr(cls, f"{table}_columns").items():
            out.append(Col(name, c.type, c.unit, c.meaning, null="the metric gives none"))
    return out


def execute_run(plan: RunPlan, out: str | Path) -> dict[str, Any]:
    """Simulate one run, commit its files into ``out`` and return its summary row. Its
    record (``runs/<run_id>.json``) also holds the fingerprint of the code that ran it
    (:func:`dcsim.runner.fingerprint.run_code`), and the row its ``code_id``."""
    from dcsim.modes import MODES
    from dcsim.results.schema import check_batch
    from dcsim.results.writer import RunWriter
    from dcsim.runner.config import validate_spec
    from dcsim.runner.fingerprint import run_code
    from dcsim.runner.progress import watch_run

    if plan.local_plugins:  # a worker process registers the experiment's local plugins
        from dcsim.plugins import load_local

        for target in plan.local_plugins:
            load_local(target)
    code = run_code(plan)  # the code this process runs it with (computed once per process)
    t0 = time.perf_counter()
    if plan.spec is not None:
        spec = plan.spec
    else:  # a plan built by hand: validate it as the planner does
        spec = validate_spec(plan.config, plan.experiment)
        spec = spec.model_copy(update=MODES[spec.mode].sections(spec))
    workload_rng, plugin_rng = run_rngs(spec.seed, plan.seed)
    built = MODES[spec.mode].build(spec, plan, workload_rng, plugin_rng,
                                   partial(watch_run, plan.run_id))
    tables = {name: t.plus(metric_columns(plan, name)).bind(flags=built.flags,
                                                             **built.families)
              for name, t in MODES[spec.mode].tables.items()}
    summary = tables.pop("summary")
    writer = RunWriter(Path(out), plan.run_id, plan.label, plan.seed, constants=plan.params,
                       tables=tables, constant_types=plan.param_types,
                       row_group=spec.metrics.flush_rows)
    try:
        metrics = built.simulate(writer)
        check_batch(f"summary ({spec.mode} mode)", {k: [v] for k, v in metrics.items()},
                    [n for n, _ in summary.columns])
        row = {
            "experiment": plan.experiment,
            "allocator": plan.label,
            "seed": plan.seed,
            **plan.params,
            **metrics,
            "wall_time_s": time.perf_counter() - t0,
            "run_id": plan.run_id,
            "code_id": code["code_id"],
        }
        writer.commit(row, code)
    except BaseException:
        writer.abort()
        raise
    return row
