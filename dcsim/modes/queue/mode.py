"""``mode: queue``: jobs wait for the machine and ``schedulers`` pick which starts (DeepRM's
time-slotted environment, :mod:`dcsim.queue`, run by :func:`dcsim.modes.queue.engine.run_queue`)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel

from dcsim.modes.base import Built, Mode, Section, plugin_instance, topology_families
from dcsim.modes.queue.spec import QUEUE_TOPOLOGY, QueueSpec
from dcsim.queue.env import QueueConfig


def queue_config(spec, topology) -> QueueConfig:
    """The queue environment of an experiment: the ``queue:`` section and the topology's
    total capacity per resource (jobs share the whole machine, as in DeepRM)."""
    q = spec.queue
    return QueueConfig(capacity=tuple(float(c) for c in topology.total_capacity()),
                       horizon=q.horizon, slots=q.slots, backlog=q.backlog,
                       max_steps=q.max_steps)


class QueueMode(Mode):
    name = "queue"
    plugin_key, plugin_kind = "schedulers", "scheduler"
    own_sections = {
        # the machine (default: DeepRM's, one server of 10 cpu / 10 mem), the job source
        # (dcsim.modes.queue.spec) and DeepRM's environment
        "topology": Section(dict[str, Any] | BaseModel,
                            factory=lambda: copy.deepcopy(QUEUE_TOPOLOGY)),
        "workload": Section(dict[str, Any] | BaseModel, ...),
        "queue": Section(QueueSpec, factory=QueueSpec),
    }

    def sections(self, spec) -> dict[str, Any]:
        from dcsim.model.topologies import parse_topology_spec
        from dcsim.modes.queue.spec import parse_jobs

        return {"topology": parse_topology_spec(spec.topology),
                "workload": parse_jobs(spec.workload)}

    def check(self, point, base_dir: str) -> None:
        from dcsim.model.topologies import build_topology
        from dcsim.modes.queue.spec import build_jobsets

        topology = build_topology(point.topology, base_dir)
        jobs = point.workload
        if jobs.kind == "trace":  # load it once (one job set): path and columns checked
            build_jobsets(jobs.model_copy(update={"jobsets": 1}), tuple(topology.resources),
                          float(topology.total_capacity().max()), np.random.default_rng(0),
                          Path(base_dir))

    def resolved(self, spec) -> dict[str, Any]:
        from dcsim.model.topologies import parse_topology_spec
        from dcsim.modes.queue.spec import describe_jobs

        return {"topology": parse_topology_spec(spec.topology).model_dump(
                    mode="json", exclude_none=True),
                "workload": describe_jobs(spec.workload)}

    def build(self, spec, plan, workload_rng, plugin_rng, watch) -> Built:
        from dcsim.model.topologies import build_topology
        from dcsim.modes.queue.engine import run_queue
        from dcsim.modes.queue.spec import build_jobsets

        topology = build_topology(spec.topology, plan.base_dir)
        config = queue_config(spec, topology)
        jobsets = build_jobsets(spec.workload, tuple(topology.resources),
                                float(topology.total_capacity().max()), workload_rng,
                                Path(plan.base_dir))
        scheduler = plugin_instance(plan, "scheduler", plugin_rng)
        families, _ = topology_families(topology)
        return Built(lambda sink: run_queue(config, jobsets, scheduler, sink, watch=watch),
                     families)


#: the mode this package provides (:data:`dcsim.modes.MODES` reads it)
MODE = QueueMode()
