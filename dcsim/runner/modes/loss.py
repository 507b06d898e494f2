"""``mode: loss``: requests arrive on a topology and ``allocators`` place or reject them
(the SimPy :class:`~dcsim.sim.engine.Engine`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from dcsim.errors import ConfigError
from dcsim.runner.modes.base import Built, Mode, plugin_instance, topology_families


class LossMode(Mode):
    name = "loss"
    unused = frozenset({"queue", "vm", "gpu"})

    def sections(self, spec) -> dict[str, Any]:
        from dcsim.model.topologies import parse_topology_spec
        from dcsim.workload.spec import parse_workload

        return {"topology": parse_topology_spec(spec.topology),
                "workload": parse_workload(spec.workload)}

    def check(self, point, base_dir: str) -> None:
        from dcsim.model.topologies import build_topology
        from dcsim.runner.config import RESERVED_COLUMNS
        from dcsim.workload.spec import build_source

        topology = build_topology(point.topology, base_dir)
        build_source(point.workload, topology, Path(base_dir), check=True)
        n = point.workload.requests
        if n is not None and point.workload.trace is None and point.warmup.requests >= n:
            raise ConfigError(f"warmup.requests: {point.warmup.requests} is not below "
                              f"workload.requests ({n}): no request would be measured")
        if point.failures is not None:  # a bad trace or tier name fails here, not in a run
            failure_schedule(point.failures, topology, np.random.default_rng(0), base_dir)
        if point.power is not None:  # a bad model, option, resource or trace fails here
            from dcsim.sim.power import build_power

            build_power(point.power, topology, base_dir)
        attrs = point.workload.attrs
        taken = [a for a in attrs if a in RESERVED_COLUMNS or a in topology.resources]
        if taken:
            raise ConfigError(f"workload.attrs.{taken[0]}: the name is a results column; "
                              "choose another")

    def resolved(self, spec) -> dict[str, Any]:
        from dcsim.model.topologies import parse_topology_spec
        from dcsim.workload.spec import parse_workload

        return {"topology": parse_topology_spec(spec.topology).model_dump(
                    mode="json", exclude_none=True),
                "workload": parse_workload(spec.workload).model_dump(
                    mode="json", exclude_none=True)}

    def build(self, spec, plan, workload_rng, plugin_rng) -> Built:
        from dcsim.model.topologies import build_topology
        from dcsim.sim import Engine, EngineConfig
        from dcsim.workload.spec import build_source

        topology = build_topology(spec.topology, plan.base_dir)
        source = build_source(spec.workload, topology, Path(plan.base_dir))
        allocator = plugin_instance(plan, "allocator", plugin_rng, topology=topology)
        config = EngineConfig(
            warmup_requests=spec.warmup.requests,
            warmup_time=spec.warmup.time,
            sample_interval=spec.metrics.sample_interval,
            sample_every=spec.metrics.sample_every,
            flush_rows=spec.metrics.flush_rows,
            capacity=spec.capacity,
            departures=spec.departures,
        )
        families, flags = topology_families(topology)
        failures = None
        if spec.failures is not None:
            from dcsim.sim.failures import failure_rng
            from dcsim.sim.loss_failures import LossFailures

            rng = failure_rng(spec.seed, plan.seed)
            fspec = spec.failures
            flags = [*flags, "failures", *(["link_failures"] if topology.n_links else [])]

            def failures(engine):
                return LossFailures(engine, fspec, rng, plan.base_dir)

        power = None
        if spec.power is not None:
            from dcsim.sim.power import build_power

            power = build_power(spec.power, topology, plan.base_dir)
            flags = [*flags, "power", *(["carbon"] if spec.power.carbon is not None else [])]
        total = spec.workload.requests

        def simulate(sink) -> dict[str, Any]:
            from dcsim.runner.progress import watch_run

            engine = Engine(topology, source, allocator, workload_rng, config, sink=sink,
                            failures=failures, power=power)
            # read-only: the terminal's progress line (dcsim.runner.progress)
            with watch_run(plan.run_id, lambda: (engine.received, total, engine.env.now)):
                return engine.run()

        return Built(simulate, families, flags)


def failure_schedule(spec, topology, rng, base_dir):
    """The failure schedule of ``spec`` on ``topology`` (its errors are ConfigErrors)."""
    from dcsim.sim.failures import Components, FailureSchedule

    return FailureSchedule(spec, Components.of_topology(topology), rng, base_dir)
