"""One run: build what its mode needs from the validated plan, simulate, and commit its
tables and summary row through the declared schemas (:mod:`dcsim.results.schema`).

``execute_run`` is a plain top-level function of a picklable :class:`RunPlan`, so the same
code runs in-process, in a local process pool, or on Dask (:mod:`dcsim.runner.executors`);
a run's randomness comes only from (experiment seed, seed index), so every executor gives
the same rows.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from dcsim.queue.env import QueueConfig
from dcsim.runner.plan import RunPlan


def run_rngs(seed: int, index: int) -> tuple[np.random.Generator, np.random.Generator]:
    """Independent workload and allocator generators of run ``index`` of experiment ``seed``.

    The workload stream does not depend on the allocator, so every allocator of a seed sees
    the same requests (common random numbers, as the papers compare).
    """
    workload, allocator = np.random.SeedSequence(entropy=seed, spawn_key=(index,)).spawn(2)
    return np.random.default_rng(workload), np.random.default_rng(allocator)


def execute_run(plan: RunPlan, out: str | Path) -> dict[str, Any]:
    """Simulate one run, commit its files into ``out`` and return its summary row."""
    from dcsim.model.topologies import build_topology
    from dcsim.results.schema import TABLES, check_batch
    from dcsim.results.writer import RunWriter
    from dcsim.runner.config import validate_spec

    t0 = time.perf_counter()
    spec = validate_spec(plan.config, plan.experiment)
    workload_rng, allocator_rng = run_rngs(spec.seed, plan.seed)
    families: dict[str, list[str]] = {}
    flags: list[str] = []
    if spec.mode in ("reschedule", "vm_online"):  # hosts come from the vm: section
        simulate = _VM_RUNS[spec.mode](spec, plan, workload_rng, allocator_rng)
    else:
        topology = build_topology(spec.topology, plan.base_dir)
        run = _queue_run if spec.mode == "queue" else _loss_run
        simulate = run(spec, plan, topology, workload_rng, allocator_rng)
        families = {"resource": list(topology.resources),
                    "tier": [topology.tier_label(t) for t in topology.tiers()]}
        flags = ["links"] if topology.n_links else []
    tables = {name: t.bind(flags=flags, **families)
              for name, t in TABLES[spec.mode].items()}
    summary = tables.pop("summary")
    writer = RunWriter(Path(out), plan.run_id, plan.label, plan.seed, constants=plan.params,
                       tables=tables, constant_types=plan.param_types,
                       row_group=spec.metrics.flush_rows)
    try:
        metrics = simulate(writer)
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
        }
        writer.commit(row)
    except BaseException:
        writer.abort()
        raise
    return row


def _loss_run(spec, plan: RunPlan, topology, workload_rng, allocator_rng):
    """Loss mode: requests arrive and the allocator places or rejects them."""
    from dcsim.sim import Engine, EngineConfig
    from dcsim.workload.spec import build_source

    source = build_source(spec.workload, topology, Path(plan.base_dir))
    allocator = _plugin(plan, "allocator", allocator_rng, topology=topology)
    config = EngineConfig(
        warmup_requests=spec.warmup.requests,
        warmup_time=spec.warmup.time,
        sample_interval=spec.metrics.sample_interval,
        sample_every=spec.metrics.sample_every,
        flush_rows=spec.metrics.flush_rows,
        capacity=spec.capacity,
        departures=spec.departures,
    )
    return lambda sink: Engine(topology, source, allocator, workload_rng, config,
                               sink=sink).run()


def queue_config(spec, topology) -> QueueConfig:
    """The queue environment of an experiment: the ``queue:`` section and the topology's
    total capacity per resource (jobs share the whole machine, as in DeepRM)."""
    q = spec.queue
    return QueueConfig(capacity=tuple(float(c) for c in topology.total_capacity()),
                       horizon=q.horizon, slots=q.slots, backlog=q.backlog,
                       max_steps=q.max_steps)


def _queue_run(spec, plan: RunPlan, topology, workload_rng, allocator_rng):
    """Queue mode: job sets wait for the machine and the scheduler picks which starts."""
    from dcsim.queue.spec import build_jobsets
    from dcsim.sim.queue import run_queue

    config = queue_config(spec, topology)
    jobsets = build_jobsets(spec.workload, tuple(topology.resources),
                            float(topology.total_capacity().max()), workload_rng,
                            Path(plan.base_dir))
    scheduler = _plugin(plan, "scheduler", allocator_rng)
    return lambda sink: run_queue(config, jobsets, scheduler, sink)


def _plugin(plan: RunPlan, kind: str, rng, **kwargs):
    """This run's plugin of ``kind``, built with its validated options and generator."""
    from dcsim.plugins import get_plugin_class

    cls = get_plugin_class(plan.allocator["name"], kind)
    return cls(cls.parse_options(plan.allocator["options"], where=plan.where), rng=rng,
               **kwargs)


def _reschedule_run(spec, plan: RunPlan, workload_rng, allocator_rng):
    """Static rescheduling: one rescheduler on one mapping (drawn per seed) under an MNL."""
    from dcsim.sim.vm_static import run_static

    resched = _plugin(plan, "rescheduler", allocator_rng)
    return lambda sink: run_static(spec.vm, resched, workload_rng, sink, plan.base_dir)


def _vm_online_run(spec, plan: RunPlan, workload_rng, allocator_rng):
    """Online VM placement with optional periodic rescheduling."""
    from functools import partial

    from dcsim.plugins import get_plugin_class
    from dcsim.sim.vm_online import run_online

    placer = _plugin(plan, "placer", allocator_rng)
    lookup = partial(get_plugin_class, kind="rescheduler")
    return lambda sink: run_online(spec.vm, placer, lookup, workload_rng, sink,
                                   base_dir=plan.base_dir)


_VM_RUNS = {"reschedule": _reschedule_run, "vm_online": _vm_online_run}
