"""VM online mode under host failures: the online engine's mapping as a failure target.

``failures.servers`` (or a trace's ``server`` / ``host`` rows) fail hosts; VM online mode
has no links. A failed host holds no VM and has no free cpu or memory until it is repaired
(:meth:`dcsim.vm.model.MappingState.set_host_down`); utilisation stays a share of every
host's capacity. At a failure the host's VMs leave it and, by ``on_failure``:

* ``drop``: they are gone; each loses the rest of its lifetime (a VM of the initial mapping,
  which has none, the rest of the run);
* ``reallocate``: each is offered to the placer again, in the order they arrived (initial
  VMs first); placed, it keeps its id, its departure time and its migration count; rejected,
  it is dropped.

The ``vms`` table gains ``interruptions`` (times a failure hit the VM). Failures happen over
the run, [0, end]; every one is counted in the summary.
"""

from __future__ import annotations

import numpy as np

from dcsim.experiment_sections import FailureSpec
from dcsim.sim.core import Outcome
from dcsim.sim.failure_stream import FLUSH_ROWS, StreamedFailureProcess
from dcsim.sim.failures import Components, FailureSchedule
from dcsim.vm.view import MappingView


class VMFailures:
    """Host failures on one online run (``engine``: its
    :class:`~dcsim.modes.vm_online.engine.OnlineEngine`)."""

    def __init__(self, engine, spec: FailureSpec, rng: np.random.Generator,
                 base_dir: str | None = None):
        self.engine = engine
        schedule = FailureSchedule(spec, Components(engine.state.n_hosts), rng, base_dir)
        self.reallocate = spec.on_failure == "reallocate"
        # rows to the sink in batches; at most so many events per VM arrival
        self.process = StreamedFailureProcess(engine.env, schedule, self,
                                              ["avail_cpu", "avail_mem"], engine.sink,
                                              FLUSH_ROWS, lambda: engine.received,
                                              "VM arrival")

    def measuring(self) -> bool:
        return True

    def availability(self) -> list[float]:
        return list(self.engine.state.available())

    def fail(self, kind: str, host: int) -> Outcome:
        e = self.engine
        st = e.state
        now = e.env.now
        e.advance(now)
        ks = np.flatnonzero(st.vm_host == host)
        serials = e.serials[ks]
        order = np.argsort(serials, kind="stable")
        hit = [(int(serials[j]), st.vms[int(ks[j])], int(st.vm_numa[int(ks[j])]))
               for j in order]
        for k in sorted(ks.tolist(), reverse=True):
            st.remove_vm(k)
            e.serials = np.delete(e.serials, k)
        st.set_host_down(host, True)
        out = Outcome(interrupted=len(hit))
        view = MappingView(st)
        metrics = e.metrics
        if metrics is not None:  # the arrived VMs it interrupted leave, for the metrics
            for serial, vm, _numa in hit:
                if serial >= e.n0:
                    metrics.departure(now, vm)
            metrics.failure(now, kind, host)
        if e.notifies_release:
            for _serial, vm, numa in hit:
                e.placer.released(vm, (host, numa), view)
        if e.notifies_failures:
            e.placer.failed(kind, host, view)
        for serial, vm, _numa in hit:
            i = serial - e.n0  # arrival index; negative for a VM of the initial mapping
            end = float(e.stream.arrival[i] + e.stream.duration[i]) if i >= 0 else e.end
            if i >= 0:
                e.interruptions[i] += 1
            choice = e.placer.place(vm, view) if self.reallocate else None
            if choice is not None:
                h, n = e.validate(choice, vm)
                st.add_vm(vm, h, n)
                e.serials = np.append(e.serials, np.int64(serial))
                out.reallocated += 1
                if metrics is not None and i >= 0:
                    metrics.decision(now, vm, (h, n))
            else:
                e.dropped.add(serial)
                out.lost_time += max(min(end, e.end) - now, 0.0)
        e.changed()
        return out

    def repair(self, kind: str, host: int) -> None:
        e = self.engine
        e.advance(e.env.now)
        e.state.set_host_down(host, False)
        e.changed()
        if e.metrics is not None:
            e.metrics.repair(e.env.now, kind, host)
        if e.notifies_failures:
            e.placer.repaired(kind, host, MappingView(e.state))
