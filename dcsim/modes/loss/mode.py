"""``mode: loss``: requests arrive on a topology and ``allocators`` place or reject them
(the SimPy :class:`~dcsim.modes.loss.engine.Engine`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel

from dcsim.errors import ConfigError
from dcsim.experiment_sections import FailureSpec
from dcsim.modes.base import (
    Built,
    Mode,
    Section,
    metric_observers,
    plugin_instance,
    topology_families,
)
from dcsim.modes.loss.spec import PowerSpec, WarmupSpec


class LossMode(Mode):
    name = "loss"
    plugin_key, plugin_kind = "allocators", "allocator"
    runs_metrics = True
    own_sections = {
        "topology": Section(dict[str, Any] | BaseModel, ...),
        "workload": Section(dict[str, Any] | BaseModel, ...),
        # lack of total cpu/mem: drop the request, or hold it until departures make room
        "capacity": Section(Literal["reject", "wait"], "reject"),
        # requests ending at t: released before the arrival at t, or after its first step
        "departures": Section(Literal["before_arrivals", "after_first_step"],
                              "before_arrivals"),
        "failures": Section(FailureSpec | None),  # component failures (dcsim.sim.failures)
        "power": Section(PowerSpec | None),  # power and energy (dcsim.modes.loss.power)
        "warmup": Section(WarmupSpec, factory=WarmupSpec),
    }

    def sections(self, spec) -> dict[str, Any]:
        from dcsim.model.topologies import parse_topology_spec
        from dcsim.workload.spec import parse_workload

        return {"topology": parse_topology_spec(spec.topology),
                "workload": parse_workload(spec.workload)}

    def check(self, point, base_dir: str) -> None:
        from dcsim.model.topologies import build_topology
        from dcsim.results.names import RESERVED_COLUMNS
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
            from dcsim.modes.loss.power import build_power

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

    def build(self, spec, plan, workload_rng, plugin_rng, watch) -> Built:
        from dcsim.model.topologies import build_topology
        from dcsim.modes.loss import Engine, EngineConfig
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
            from dcsim.modes.loss.failures import LossFailures
            from dcsim.sim.failures import failure_rng

            rng = failure_rng(spec.seed, plan.seed)
            fspec = spec.failures
            flags = [*flags, "failures", *(["link_failures"] if topology.n_links else [])]

            def failures(engine):
                return LossFailures(engine, fspec, rng, plan.base_dir)

        power = None
        if spec.power is not None:
            from dcsim.modes.loss.power import build_power

            power = build_power(spec.power, topology, plan.base_dir)
            flags = [*flags, "power", *(["carbon"] if spec.power.carbon is not None else [])]
        total = spec.workload.requests

        def simulate(sink) -> dict[str, Any]:
            engine = Engine(topology, source, allocator, workload_rng, config, sink=sink,
                            failures=failures, power=power,
                            metrics=metric_observers(plan, spec))
            # read-only: the terminal's progress line (dcsim.runner.progress)
            with watch(lambda: (engine.received, total, engine.env.now)):
                return engine.run()

        return Built(simulate, families, flags)


def failure_schedule(spec, topology, rng, base_dir):
    """The failure schedule of ``spec`` on ``topology`` (its errors are ConfigErrors)."""
    from dcsim.sim.failures import Components, FailureSchedule

    return FailureSchedule(spec, Components.of_topology(topology), rng, base_dir)


#: the mode this package provides (:data:`dcsim.modes.MODES` reads it)
MODE = LossMode()
