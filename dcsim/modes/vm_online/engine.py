"""Online VM placement with periodic rescheduling (``mode: vm_online``): VMs arrive and
leave a two-NUMA mapping; a placer puts each arrival on a (host, NUMA option) or rejects
it; optionally a rescheduler migrates up to MNL VMs every so often (VMR²L's setting: the
operator's best-fit scheduling, with rescheduling to undo the fragmentation that departures
leave).

The ``vm:`` section (:class:`OnlineSpec`)::

    vm:
      mapping: {hosts: 48}                       # empty hosts; or {synthetic: small,
                                                 #   target_cpu: 0.6}; or {path: FILE.json}
      workload:
        trace: {path: ../traces/azure2017_dev_slice.csv, time_scale: 1, limit: null,
                spread: 300}
        # or synthetic: {count: 2000, rate: 0.5, mean_lifetime: 3600}   (or load: 0.9)
      reschedule: {every: 1800, mnl: 50, algorithm: greedy, options: {}}   # optional
      sample_every: 300                          # optional
      until: null                                # default: the last arrival

**Mapping.** :class:`dcsim.vm.mapping_spec.MappingSpec`. The VMs of the initial mapping stay
for the whole run (they have no lifetime) and may be migrated; they have no per-VM rows.

**Trace workload.** A table (CSV or Parquet) with columns ``arrival`` and ``duration``
(seconds), ``cpu`` (cores) and ``mem`` (GB by default), optionally ``id`` (default: row
number) — dcsim's standard request table, e.g. ``traces/azure2017_dev_slice.csv``. Rows
are sorted by arrival (stable) and the first ``limit`` kept. VMs that share an arrival
time are spread evenly over the ``spread`` seconds that follow (the Azure 2017 slice gives
every VM of a 300-s line the line's time; ``spread: 300`` is the trace importer's
``spread: even``). The first arrival is moved to time 0 (``start_at_zero``), then arrival
and duration are multiplied by ``time_scale``. Each row becomes one VM:

* cpu: ``ceil(cpu)`` cores (at least 1); memory: ``ceil(mem × mem_unit_mb)`` MB
  (``mem_unit_mb`` 1024: GB → MB, as the paper's Table 1 sizes are converted);
* NUMA deployment: with ``double_numa_from: null`` (default) a VM is single-NUMA when it
  fits one NUMA node of the largest host (cpu ≤ its cores and memory ≤ its MB: one NUMA is
  half of a host, so the VM takes at most a half-host share), otherwise double-NUMA; with
  ``double_numa_from: C`` a VM of C cores or more is double-NUMA (Table 1's rule is
  ``C = 32``: 16-core types are single, 32-core ones double). A double-NUMA VM's cpu and
  memory are rounded up to even numbers (half on each node). The Azure 2017 slice's VMs
  have 1–8 cores and ≤ 56 GB, so all of them are single-NUMA under either rule.

**Synthetic workload.** ``count`` VMs of VMR²L's Table 1 types (drawn i.i.d. with the
table's shares, NUMA deployment as in the table), Poisson arrivals at ``rate`` per second
(the first after one exponential gap), exponential lifetimes of mean ``mean_lifetime``
seconds, or of the mean that makes the offered cpu load ``load`` of the hosts' total cores
(``load × total cores / (rate × 11.63 mean cores)``).

**Events.** One SimPy process walks the arrivals and the rescheduling and sampling times;
each accepted VM's departure is a plain SimPy ``Timeout`` at arrival + duration. The process
creates it before it creates its own next wake-up, and SimPy runs events of one instant in
the order they were scheduled, so at any instant departures come first, then the
rescheduling, then the periodic sample, then arrivals (in trace order). A VM of duration 0
arrives and leaves at the same instant. The run ends at ``until`` (default: the last
arrival's time); VMs still present then are left as they are (their departures are not
simulated), arrivals after it
are not offered.

**Placement.** Each arrival is offered to the placer (:class:`dcsim.placers.Placer`); its
choice is validated (a choice that does not fit is a :class:`PluginError` naming the
placer) and the VM placed, or the VM is rejected (None) and counted.

**Rescheduling.** With ``reschedule:``, at ``every``, 2·``every``, … (< the end) the
rescheduler ``algorithm`` (a registered rescheduler, ``options`` validated by its
``Options``) runs on the live state under ``mnl``; its migration list is validated step by
step (:meth:`dcsim.reschedulers.Rescheduler.run`, an invalid list is a PluginError) and
applied to the live state.

**Records.** ``sink("timeseries", columns)`` gets one row per sample: ``time``, ``event``
(``start``, ``sample``, ``before_reschedule``, ``after_reschedule``, ``end``),
``fragment_rate``, ``util_cpu``, ``util_mem``, ``vms`` (present, initial ones included),
``received``, ``accepted``, ``migrations_so_far``. Samples are taken at time 0, every
``sample_every`` seconds, before and after each rescheduling and at the end.
``sink("vms", columns)`` gets one row per offered VM: ``id``, ``arrival``,
``duration``, ``cpu`` (cores), ``mem`` (MB), ``numas``, ``accepted``, ``host`` (host index
at arrival, −1 if rejected), ``numa`` (0/1, −1 both NUMAs, −2 rejected), ``migrations``
(times the VM was migrated) and ``decision_s`` (the placer's time).

**Summary** (:func:`run_online`'s return): ``received``, ``accepted``, ``rejected``,
``acceptance_ratio``, ``mean_fragment_rate`` (time average over [0, end] of the
piecewise-constant FR), ``final_fragment_rate``, ``migrations``, ``reschedules``,
``util_cpu``/``util_mem`` (time averages), ``final_util_cpu``, ``reschedule_seconds``
(the rescheduler's own time), ``mean_decision_s``, ``sim_time`` (the end), ``hosts``,
``initial_vms``.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from contextlib import AbstractContextManager as ContextManager
from functools import partial
from typing import Any

import numpy as np

from dcsim.errors import ConfigError, DcsimError, PluginError
from dcsim.metrics import Observers, RunStart
from dcsim.modes.base import Sink
from dcsim.modes.vm_online.spec import OnlineSpec, build_rescheduler
from dcsim.placers.base import Placer
from dcsim.sim.core import SimCore, TimeAverage
from dcsim.validation import validate_section
from dcsim.vm.arrivals import VMStream, synthetic_stream, trace_stream
from dcsim.vm.mapping_spec import build_mapping
from dcsim.vm.model import BOTH, VM, InvalidMigration, MappingState
from dcsim.vm.view import MappingView

#: numa column of a rejected VM's row
REJECTED = -2


# -- the engine -----------------------------------------------------------------------------
class OnlineEngine(SimCore):
    """One online run (see the module docstring); :meth:`run` returns the summary."""

    def __init__(self, spec: OnlineSpec, state: MappingState, stream: VMStream, placer,
                 rescheduler=None, sink: Sink | None = None,
                 failures: Callable[[OnlineEngine], Any] | None = None,
                 metrics: Observers | None = None):
        self.spec = spec
        #: the run's metric plugins (dcsim.metrics), or None: then no metric hook is called;
        #: they see the arriving VMs (not those of the initial mapping), placed as
        #: ``(host, numa)``
        self.metrics = metrics
        self.state = state
        self.stream = stream
        self.placer = placer
        self.rescheduler = rescheduler
        # the placer's optional hooks, called only where it overrides them (Placer.released,
        # failed, repaired; the failure adapter reads these too)
        self.notifies_release = type(placer).released is not Placer.released
        self.notifies_failures = (type(placer).failed is not Placer.failed
                                  or type(placer).repaired is not Placer.repaired)
        self.sink = sink
        SimCore.__init__(self)
        n0 = state.n_vms
        self.n0 = n0
        # per present VM, in index order: its serial (initial VMs 0..n0-1, arrival i n0+i);
        # ascending unless a failure re-placed a VM (appended with its old serial)
        # (public: the failure adapter removes and re-appends the serials of the VMs it moves)
        self.serials = np.arange(n0, dtype=np.int64)
        n = len(stream)
        self.accepted_flag = np.zeros(n, dtype=bool)
        self.host = np.full(n, -1, dtype=np.int64)
        self.numa = np.full(n, REJECTED, dtype=np.int64)
        self.moves = np.zeros(n, dtype=np.int64)
        self.decision = np.zeros(n, dtype=np.float64)
        self.received = self.accepted = self.released = 0
        self.migrations = self.reschedules = 0
        self.reschedule_seconds = 0.0
        self._ids = [f"arrival-{x}" for x in stream.id.tolist()]
        self._samples: dict[str, list] = {k: [] for k in (
            "time", "event", "fragment_rate", "util_cpu", "util_mem", "vms", "received",
            "accepted", "migrations_so_far")}
        # time averages of the piecewise-constant FR and utilisations, over [0, end]
        self._dirty = True
        self._cur = (0.0, 0.0, 0.0)
        self._avg = TimeAverage(3, open_at=0.0)
        if n and stream.arrival[0] < 0:
            raise ConfigError("vm.workload: arrival times must be >= 0")
        self.end = float(spec.until) if spec.until is not None else \
            (float(stream.arrival[-1]) if n else 0.0)
        # component failures (dcsim.modes.vm_online.failures.VMFailures): VMs a failure dropped
        self.dropped: set[int] = set()  # their serials
        self.interruptions = np.zeros(n, dtype=np.int64)
        self._failures = failures(self) if failures is not None else None

    # -- bookkeeping --------------------------------------------------------------------
    def _metrics(self) -> tuple[float, float, float]:
        if self._dirty:
            s = self.state
            self._cur = (s.fragment_rate(), s.util_cpu(), s.util_mem())
            self._dirty = False
        return self._cur

    def advance(self, t: float) -> None:
        """Bring the time averages up to ``t`` (the mapping unchanged since the last call);
        called before every change, by the engine and by its failure adapter."""
        if t > self._avg.last:
            self._avg.advance(t, self._metrics())

    def changed(self) -> None:
        """Note that the mapping changed (its metrics are recomputed at the next
        :meth:`advance`; with ``check_invariants`` the mapping is checked now)."""
        self._dirty = True
        if self.spec.check_invariants:
            self.state.check_invariants()
            if len(self.serials) != self.state.n_vms or (
                    np.unique(self.serials).size != self.serials.size):
                raise DcsimError("online engine: VM bookkeeping out of step with the state")

    def _sample(self, event: str) -> None:
        fr, uc, um = self._metrics()
        row = self._samples
        if self.metrics is not None:
            for k, v in self.metrics.sample(float(self.env.now)).items():
                row.setdefault(k, []).append(v)
        row["time"].append(float(self.env.now))
        row["event"].append(event)
        row["fragment_rate"].append(fr)
        row["util_cpu"].append(uc)
        row["util_mem"].append(um)
        row["vms"].append(self.state.n_vms)
        row["received"].append(self.received)
        row["accepted"].append(self.accepted)
        row["migrations_so_far"].append(self.migrations)
        if self._failures is not None:
            for k, v in zip(("avail_cpu", "avail_mem"), self.state.available(), strict=True):
                row.setdefault(k, []).append(v)

    # -- processes ------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        self.placer.setup(MappingView(self.state))
        if self.metrics is not None:
            self.metrics.start(RunStart("vm_online", None, MappingView(self.state),
                                        ("cpu", "mem")))
        main = self.env.process(self._main())
        self.failures_window(0.0, open_=True)  # the whole run is measured
        self.start_failures()
        self.simulate(until=main)
        return self._finish()

    def _main(self):
        env = self.env
        every = self.spec.reschedule.every if self.rescheduler is not None else None
        end = self.end
        self._sample("start")
        # at one instant: departures, then the rescheduling, then the sample, then arrivals
        yield from self.walk(
            self.stream.arrival.tolist(), lambda i, t: self._arrive(i),
            periodic=[(every, lambda t: self._reschedule() if t < end else None),
                      (self.spec.sample_every, lambda t: self._sample("sample"))],
            end=end, tick=self.advance)
        if env.now < end:
            yield env.timeout(end - env.now)
        self.advance(end)
        self.failures_window(end, open_=False)
        if self._failures is not None:
            self._failures.process.stopped = True
        self._sample("end")

    def _arrive(self, i: int) -> None:
        st = self.stream
        self.received += 1
        vm = VM(self._ids[i], int(st.cpu[i]), int(st.mem[i]), int(st.numas[i]))
        metrics = self.metrics
        if metrics is not None:
            metrics.arrival(float(self.env.now), vm)
        t0 = time.perf_counter()
        choice = self.placer.place(vm, MappingView(self.state))
        self.decision[i] = time.perf_counter() - t0
        if choice is None:
            if metrics is not None:
                metrics.decision(float(self.env.now), vm, None)
            return
        h, n = self.validate(choice, vm)
        self.state.add_vm(vm, h, n)
        self.serials = np.append(self.serials, np.int64(self.n0 + i))
        self.accepted += 1
        self.accepted_flag[i] = True
        self.host[i], self.numa[i] = h, n
        self.changed()
        if metrics is not None:
            metrics.decision(float(self.env.now), vm, (h, n))
        # a plain Timeout: it is created before the main process's next wake-up is, so at
        # an instant shared with an arrival, a sample or a rescheduling it runs first
        self.depart_after(float(st.duration[i]), partial(self._depart, self.n0 + i))

    def validate(self, choice: Any, vm: VM) -> tuple[int, int]:
        """The placer's ``choice`` for ``vm`` as ``(host, numa)``, checked to fit; a bad
        choice is a :class:`~dcsim.errors.PluginError` naming the placer."""
        label = self.placer.label
        try:
            h, n = choice
            if not all(isinstance(x, int | np.integer) and not isinstance(x, bool)
                       for x in (h, n)):
                raise TypeError
        except (TypeError, ValueError):
            raise PluginError(f"placer {label!r} returned {choice!r} for VM {vm.id!r}; "
                              "expected (host index, numa) or None") from None
        why = self.state.place_reason(vm, int(h), int(n))
        if why is not None:
            where = "both NUMAs" if n == BOTH else f"NUMA {n}"
            raise PluginError(f"placer {label!r} chose host {h} {where} for VM {vm.id!r} "
                              f"({vm.cpu} cpu, {vm.mem} MB, {vm.numas} NUMA): {why}")
        return int(h), int(n)

    def _depart(self, serial: int, _event) -> None:
        if serial in self.dropped:  # a failure took it away earlier
            return
        self.advance(self.env.now)
        at = np.flatnonzero(self.serials == serial)
        k = int(at[0]) if at.size else -1
        if k < 0:
            raise DcsimError(f"online engine: VM serial {serial} departed but is not present")
        if self.notifies_release:  # what the placer hears, read before the VM goes
            gone = (self.state.vms[k], (int(self.state.vm_host[k]), int(self.state.vm_numa[k])))
        vm = self.state.vms[k] if self.metrics is not None else None
        self.state.remove_vm(k)
        self.serials = np.delete(self.serials, k)
        self.released += 1
        self.changed()
        if self.notifies_release:
            self.placer.released(*gone, MappingView(self.state))
        if vm is not None:
            self.metrics.departure(float(self.env.now), vm)

    def _reschedule(self) -> None:
        r = self.spec.reschedule
        self._sample("before_reschedule")
        result = self.rescheduler.run(self.state, r.mnl)
        try:
            records = self.state.apply_all(result.migrations, mnl=r.mnl)
        except InvalidMigration as e:  # run() validated it on a copy: cannot happen
            raise PluginError(f"rescheduler {self.rescheduler.label!r} returned an invalid "
                              f"migration list: {e}") from None
        moved = self.serials[[rec.vm for rec in records]] - self.n0
        np.add.at(self.moves, moved[moved >= 0], 1)
        self.migrations += len(records)
        self.reschedules += 1
        self.reschedule_seconds += result.seconds
        if records:
            self.changed()
        self._sample("after_reschedule")

    # -- output ---------------------------------------------------------------------------
    def _finish(self) -> dict[str, Any]:
        st = self.stream
        present = self.state.n_vms
        lost = len(self.dropped)
        if present != self.n0 + self.accepted - self.released - lost:
            raise DcsimError(f"online engine: {present} VMs present, expected "
                             f"{self.n0} + {self.accepted} - {self.released} - {lost}")
        m = self.received
        if self.sink is not None:
            self.sink("timeseries", {k: list(v) for k, v in self._samples.items()})
            self.sink("vms", {
                "id": st.id[:m], "arrival": st.arrival[:m], "duration": st.duration[:m],
                "cpu": st.cpu[:m], "mem": st.mem[:m], "numas": st.numas[:m],
                "accepted": self.accepted_flag[:m], "host": self.host[:m],
                "numa": self.numa[:m], "migrations": self.moves[:m],
                "decision_s": self.decision[:m],
                **({"interruptions": self.interruptions[:m]} if self._failures else {})})
            if self._failures is not None and self._failures.process.rows["time"]:
                self.sink("component_failures", self._failures.process.columns())
        fr, uc, _ = self._metrics()
        self._avg.close(self.end, self._metrics())
        avg = self._avg.mean(fallback=self._metrics())
        out = {
            "received": m,
            "accepted": self.accepted,
            "rejected": m - self.accepted,
            "acceptance_ratio": self.accepted / m if m else math.nan,
            "mean_fragment_rate": float(avg[0]),
            "final_fragment_rate": fr,
            "migrations": self.migrations,
            "reschedules": self.reschedules,
            "util_cpu": float(avg[1]),
            "util_mem": float(avg[2]),
            "final_util_cpu": uc,
            "reschedule_seconds": self.reschedule_seconds,
            "mean_decision_s": float(self.decision[:m].mean()) if m else math.nan,
            "sim_time": self.end,
            "hosts": self.state.n_hosts,
            "initial_vms": self.n0,
        }
        if self._failures is not None:
            out.update(self._failures.process.summary("lost_vm_time"))
        if self.metrics is not None:
            out.update(self.metrics.summary())
        return out


def run_online(spec: dict[str, Any], placer, rescheduler_cls_lookup: Callable[[str], type]
               | None, rng: np.random.Generator, sink: Sink | None, *,
               base_dir: str | os.PathLike | None = None, where: str = "vm",
               failures=None, failure_rng: np.random.Generator | None = None,
               watch: Callable[[Callable[[], tuple]], ContextManager] | None = None,
               metrics: Observers | None = None) -> dict[str, Any]:
    """Run the online mode of ``spec`` (the ``vm:`` section, validated as
    :class:`OnlineSpec`; errors are ConfigErrors naming ``where.field``) with ``placer`` (an
    instance); ``rescheduler_cls_lookup(name)`` gives the rescheduler class of
    ``vm.reschedule.algorithm`` (default: the registered reschedulers). ``rng`` (the run's
    workload generator) draws the mapping, the synthetic workload and seeds the rescheduler,
    so every placer of a seed sees the same mapping and VMs. Relative paths are resolved
    against ``base_dir``. Sends ``"timeseries"`` and ``"vms"`` columns to ``sink`` and
    returns the summary metrics (see the module docstring). ``failures`` (a validated
    ``failures:`` section) fails hosts, drawn from ``failure_rng``
    (:mod:`dcsim.modes.vm_online.failures`). ``watch(probe)``, if given, is entered around the
    simulation; ``probe()`` reads (VMs arrived, VMs in all, simulated time) and changes
    nothing (``dcsim run``'s progress lines). ``metrics``: the run's metric plugins
    (:class:`dcsim.metrics.Observers`), or None."""
    s = validate_section(OnlineSpec, spec if spec is not None else {}, where)
    # the three streams of randomness, independent of each other and of the mapping kind
    mapping_seed, workload_seed, resched_seed = rng.integers(2**63, size=3).tolist()
    state = build_mapping(s.mapping, np.random.default_rng(mapping_seed), base_dir,
                          f"{where}.mapping")
    numa_cpu = int(state.cap_cpu.max()) if state.n_hosts else 0
    numa_mem = int(state.cap_mem.max()) if state.n_hosts else 0
    if s.workload.trace is not None:
        stream = trace_stream(s.workload.trace, base_dir, numa_cpu, numa_mem,
                              f"{where}.workload.trace")
    else:
        stream = synthetic_stream(s.workload.synthetic, int(state.cap_cpu.sum()),
                                  np.random.default_rng(workload_seed))
    if s.until is not None:
        keep = int(np.searchsorted(stream.arrival, s.until, side="right"))
        stream = VMStream(stream.id[:keep], stream.arrival[:keep], stream.duration[:keep],
                          stream.cpu[:keep], stream.mem[:keep], stream.numas[:keep])
    resched = None
    if s.reschedule is not None:
        resched = build_rescheduler(s.reschedule, rescheduler_cls_lookup,
                                    np.random.default_rng(resched_seed), where)
    make = None
    if failures is not None:
        from dcsim.modes.vm_online.failures import VMFailures

        def make(engine):
            return VMFailures(engine, failures, failure_rng, base_dir)
    engine = OnlineEngine(s, state, stream, placer, resched, sink, failures=make,
                          metrics=metrics)
    if watch is None:
        return engine.run()
    with watch(lambda: (engine.received, len(stream.arrival), float(engine.env.now))):
        return engine.run()
