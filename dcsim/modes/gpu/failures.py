"""GPU mode under node failures: the online engine's cluster as a failure target.

``failures.servers`` (or a trace's ``server`` / ``host`` rows) fail nodes of a run with
``gpu.arrivals``; a GPU cluster has no links. A failed node holds no pod and has nothing
free until it is repaired (:meth:`dcsim.gpu.cluster.GpuCluster.set_down`); the allocated
shares stay shares of every node's capacity, and the fragmentation counts only the free GPU
of nodes that are up. At a failure the node's pods leave it and, by ``on_failure``:

* ``drop``: they are gone; each loses the rest of its holding time (up to the run's end);
* ``reallocate``: each is offered to the GPU allocator again, in the order they arrived;
  placed, it keeps its id and its departure time; rejected, it is dropped.

The ``pods`` table gains ``interruptions`` (times a failure hit the pod), the time series
and the failures table ``avail_gpu`` and ``avail_cpu`` (the share of the cluster's GPUs and
cpu on nodes that are up), and the summary ``n_failures``, ``interrupted``,
``reallocated``, ``lost_pod_time`` (holding time the dropped pods lost), ``lost_gpu_time``
(the same weighted by each pod's GPUs: GPU × time) and the time-averaged ``avail_gpu`` and
``avail_cpu``, all over the measured window (from the first measured arrival to the last).
"""

from __future__ import annotations

import numpy as np

from dcsim.experiment_sections import FailureSpec
from dcsim.gpu.cluster import MILLI
from dcsim.sim.core import Outcome
from dcsim.sim.failure_stream import FLUSH_ROWS, StreamedFailureProcess
from dcsim.sim.failures import Components, FailureSchedule

#: the availability columns, in :meth:`GpuFailures.availability` order
AVAIL = ("avail_gpu", "avail_cpu")


class GpuFailures:
    """Node failures on one online GPU run (``engine``: its
    :class:`~dcsim.modes.gpu.engine.GpuOnline`)."""

    def __init__(self, engine, spec: FailureSpec, rng: np.random.Generator,
                 base_dir: str | None = None):
        self.engine = engine
        cluster = engine.run.cluster
        schedule = FailureSchedule(spec, Components(cluster.n_nodes), rng, base_dir)
        self.reallocate = spec.on_failure == "reallocate"
        #: GPU × time (in GPUs × the arrival times' unit) the dropped pods lost, measured
        self.lost_gpu_time = 0.0
        self.process = StreamedFailureProcess(engine.env, schedule, self, AVAIL, engine.sink,
                                              FLUSH_ROWS, lambda: engine.received,
                                              "pod arrival")

    def measuring(self) -> bool:
        return self.engine.measuring()

    def availability(self) -> list[float]:
        run = self.engine.run   # it keeps the down nodes' milli-GPU
        c = run.cluster
        if not c.down.any():
            return [1.0, 1.0]
        return [1.0 - run.down_gpu / run.cap_gpu,
                1.0 - float(c.cpu_cap[c.down].sum()) / run.cap_cpu]

    def fail(self, kind: str, node: int) -> Outcome:
        e = self.engine
        run = e.run
        now = e.env.now
        e.tick(now)
        hit = sorted(e.on_node[node])
        gone = [e.evict(i) for i in hit]
        run.set_down(node, True)
        out = Outcome(interrupted=len(hit))
        if e.metrics is not None:  # the pods it interrupted leave, for the metrics
            for p in gone:
                e.metrics.departure(now, p.pod)
            e.metrics.failure(now, kind, node)
        if e.notifies_release:
            view = run.cluster.view()
            for p in gone:
                run.allocator.released(p.pod, p, view)
        if e.notifies_failures:
            run.allocator.failed(kind, node, run.cluster.view())
        measured = self.measuring()
        for i in hit:
            e.interruptions[i] += 1
            p = run.offer_again(i) if self.reallocate else None
            if p is not None:
                e.hold(i, p)
                e.active += 1
                out.reallocated += 1
                continue
            left = max(min(float(e.times[i] + e.holding[i]), e.end) - now, 0.0)
            out.lost_time += left
            if measured:
                self.lost_gpu_time += left * e.asks[i] / MILLI
        return out

    def repair(self, kind: str, node: int) -> None:
        e = self.engine
        e.tick(e.env.now)
        e.run.set_down(node, False)
        if e.metrics is not None:
            e.metrics.repair(e.env.now, kind, node)
        if e.notifies_failures:
            e.run.allocator.repaired(kind, node, e.run.cluster.view())
