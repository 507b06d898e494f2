"""``mode: queue``: jobs wait for the machine and ``schedulers`` pick which starts (DeepRM's
time-slotted environment, :mod:`dcsim.queue`, run by :func:`dcsim.sim.queue.run_queue`)."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from dcsim.queue.env import QueueConfig
from dcsim.runner.modes.base import Built, Mode, plugin_instance, topology_families


def queue_config(spec, topology) -> QueueConfig:
    """The queue environment of an experiment: the ``queue:`` section and the topology's
    total capacity per resource (jobs share the whole machine, as in DeepRM)."""
    q = spec.queue
    return QueueConfig(capacity=tuple(float(c) for c in topology.total_capacity()),
                       horizon=q.horizon, slots=q.slots, backlog=q.backlog,
                       max_steps=q.max_steps)


class QueueMode(Mode):
    name = "queue"
    unused = frozenset({"vm", "gpu"})

    def sections(self, spec) -> dict[str, Any]:
        from dcsim.model.topologies import parse_topology_spec
        from dcsim.queue.spec import parse_jobs

        return {"topology": parse_topology_spec(spec.topology),
                "workload": parse_jobs(spec.workload)}

    def check(self, point, base_dir: str) -> None:
        from dcsim.model.topologies import build_topology
        from dcsim.queue.spec import build_jobsets

        topology = build_topology(point.topology, base_dir)
        jobs = point.workload
        if jobs.kind == "trace":  # load it once (one job set): path and columns checked
            build_jobsets(jobs.model_copy(update={"jobsets": 1}), tuple(topology.resources),
                          float(topology.total_capacity().max()), np.random.default_rng(0),
                          Path(base_dir))

    def resolved(self, spec) -> dict[str, Any]:
        from dcsim.model.topologies import parse_topology_spec
        from dcsim.queue.spec import describe_jobs

        return {"topology": parse_topology_spec(spec.topology).model_dump(
                    mode="json", exclude_none=True),
                "workload": describe_jobs(spec.workload)}

    def build(self, spec, plan, workload_rng, plugin_rng) -> Built:
        from dcsim.model.topologies import build_topology
        from dcsim.queue.spec import build_jobsets
        from dcsim.runner.progress import watch_run
        from dcsim.sim.queue import run_queue

        topology = build_topology(spec.topology, plan.base_dir)
        config = queue_config(spec, topology)
        jobsets = build_jobsets(spec.workload, tuple(topology.resources),
                                float(topology.total_capacity().max()), workload_rng,
                                Path(plan.base_dir))
        scheduler = plugin_instance(plan, "scheduler", plugin_rng)
        families, _ = topology_families(topology)
        watch = partial(watch_run, plan.run_id)   # read-only: dcsim run's progress lines
        return Built(lambda sink: run_queue(config, jobsets, scheduler, sink, watch=watch),
                     families)
