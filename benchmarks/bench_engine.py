"""Engine throughput: dcsim with first_fit vs bare SimPy on the same arrival/departure stream.

    python benchmarks/bench_engine.py [--requests 50000] [--repeat 3] [--power]

Both sides process the identical stream of Poisson arrivals and exponential holding times
(load kept low enough that first_fit accepts every request, so both handle the same events).
Two bare-SimPy baselines are measured in the same run:

* ``callbacks``: one arrival process, each departure a Timeout with a callback — the
  cheapest way to drive SimPy (dcsim's general path schedules departures this way; its
  fused path runs its own departures in SimPy's order, with no event per arrival);
* ``processes``: the textbook idiom, one SimPy process per request.

The printed ratio is dcsim's requests/s over the baseline's (1.0 = no overhead). Goals:
>= 0.5 of bare SimPy at 1k servers (issue #2); at least 1.0 of the process-per-request
baseline at 1k servers (issue #37).

``--power`` runs dcsim with energy accounting on (a linear power model, servers idle-off:
``dcsim.modes.loss.power``), to measure what it costs (issue #38).

A second table is the M/M/c/c loss system (issue #51): ``--mmcc-servers`` unit servers,
unit requests, Poisson arrivals at ``--mmcc-load`` × c per unit of time, exponential
holding of mean 1, ``--mmcc-requests`` arrivals. dcsim (``first_fit``, ``capacity:
reject``) and both SimPy baselines (which block an arrival when c are busy) must block the
same arrivals (checked), and the blocking is printed beside Erlang B for that c and
offered load, the value queueing theory gives. On that stream dcsim runs three ways:
``dcsim compiled`` (``DCSIM_KERNELS=numba``: first_fit's whole loop in one numba call per
batch, :mod:`dcsim.modes.loss.compiled_loop`; loaded before the clock starts), ``dcsim
fused`` (``numpy``: the Python fused loop) and ``dcsim py-plugin`` (a pure-Python
first-fit plugin, :class:`PyFirstFit`); with Cimba installed (``pip install cimba``, for
this benchmark only) a Cimba model of the same stream too (:class:`CimbaMMcc`). Goals
(issue #51): dcsim compiled >= 1.0 of Cimba, dcsim with a pure-Python plugin >= 1.0 of
SimPy callbacks; each is printed as met or not by the run.
"""

from __future__ import annotations

import argparse
import os
import time

import networkx as nx
import numpy as np
import simpy

from dcsim.allocators.base import Allocator
from dcsim.allocators.single import FirstFitAllocator
from dcsim.model import Topology
from dcsim.modes.loss import Engine, EngineConfig
from dcsim.workload import RequestBatch


def flat_topology(n: int) -> Topology:
    g = nx.Graph()
    for i in range(n):
        g.add_node(f"h{i}", kind="server", cpu=16.0, mem=64.0)
    return Topology.from_graph(g, name=f"flat{n}", allow_disconnected=True)


def stream(n_requests: int, n_servers: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    rate = 10.0
    demand = np.column_stack([rng.integers(1, 5, n_requests), rng.integers(1, 16, n_requests)])
    # mean cpu 2.5 per request; aim at 40 % of total cpu so that nothing is rejected
    hold = 0.4 * 16.0 * n_servers / (rate * 2.5)
    arrival = np.cumsum(rng.exponential(1 / rate, n_requests))
    duration = rng.exponential(hold, n_requests)
    return arrival, duration, demand.astype(float)


class Source:
    def __init__(self, arrival, duration, demand, batch=4096):
        self.a, self.d, self.m, self.batch = arrival, duration, demand, batch

    def batches(self, rng):
        for i in range(0, len(self.a), self.batch):
            s = slice(i, i + self.batch)
            yield RequestBatch(self.a[s], self.d[s], self.m[s], np.zeros(len(self.a[s])))


def bare_callbacks(arrival, duration) -> float:
    env = simpy.Environment()
    counter = {"active": 0, "done": 0}

    def depart(_ev):
        counter["active"] -= 1
        counter["done"] += 1

    def arrivals():
        for t, d in zip(arrival.tolist(), duration.tolist(), strict=True):
            if t > env.now:
                yield env.timeout(t - env.now)
            counter["active"] += 1
            env.timeout(d).callbacks.append(depart)

    t0 = time.perf_counter()
    env.process(arrivals())
    env.run()
    assert counter["done"] == len(arrival)
    return time.perf_counter() - t0


def bare_processes(arrival, duration) -> float:
    env = simpy.Environment()
    counter = {"done": 0}

    def request(d):
        yield env.timeout(d)
        counter["done"] += 1

    def arrivals():
        for t, d in zip(arrival.tolist(), duration.tolist(), strict=True):
            if t > env.now:
                yield env.timeout(t - env.now)
            env.process(request(d))

    t0 = time.perf_counter()
    env.process(arrivals())
    env.run()
    assert counter["done"] == len(arrival)
    return time.perf_counter() - t0


#: the power section of ``--power``
POWER = {"server": {"model": "linear", "idle_w": 100.0, "peak_w": 250.0},
         "idle_policy": "off", "power_on_j": 1000.0}


def dcsim_run(topo, arrival, duration, demand, power: bool = False) -> float:
    setup = None
    if power:
        from dcsim.modes.loss.power import build_power
        from dcsim.modes.loss.spec import PowerSpec

        setup = build_power(PowerSpec.model_validate(POWER), topo)
    eng = Engine(topo, Source(arrival, duration, demand), FirstFitAllocator(),
                 np.random.default_rng(0), EngineConfig(), sink=lambda kind, cols: None,
                 power=setup)
    t0 = time.perf_counter()
    summary = eng.run()
    elapsed = time.perf_counter() - t0
    assert summary["accepted"] == len(arrival), "first_fit rejected requests: raise capacity"
    return elapsed


def mmcc_stream(n: int, c: int, load: float, seed: int = 1):
    """``n`` arrivals of an M/M/c/c system offered ``load`` x c Erlangs (mean holding 1)."""
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(1.0 / (load * c), n))
    return arrival, rng.exponential(1.0, n), np.ones((n, 2))


def erlang_b(c: int, a: float) -> float:
    """The blocking probability of M/M/c/c offered ``a`` Erlangs (the stable recursion)."""
    b = 1.0
    for k in range(1, c + 1):
        b = a * b / (k + a * b)
    return b


#: which arrivals the last callback run blocked (for the blocking's standard error)
BLOCKED: list[bool] = []


def bare_callbacks_blocking(arrival, duration, c: int) -> tuple[float, int]:
    """SimPy, a Timeout with a callback per admitted arrival; (seconds, blocked)."""
    env = simpy.Environment()
    state = {"active": 0, "blocked": 0}
    BLOCKED.clear()
    flag = BLOCKED.append

    def depart(_ev):
        state["active"] -= 1

    def arrivals():
        for t, d in zip(arrival.tolist(), duration.tolist(), strict=True):
            if t > env.now:
                yield env.timeout(t - env.now)
            full = state["active"] >= c
            flag(full)
            if full:
                state["blocked"] += 1
                continue
            state["active"] += 1
            env.timeout(d).callbacks.append(depart)

    t0 = time.perf_counter()
    env.process(arrivals())
    env.run()
    return time.perf_counter() - t0, state["blocked"]


def bare_processes_blocking(arrival, duration, c: int) -> tuple[float, int]:
    """SimPy, a process per admitted arrival; (seconds, blocked)."""
    env = simpy.Environment()
    state = {"active": 0, "blocked": 0}

    def request(d):
        yield env.timeout(d)
        state["active"] -= 1

    def arrivals():
        for t, d in zip(arrival.tolist(), duration.tolist(), strict=True):
            if t > env.now:
                yield env.timeout(t - env.now)
            if state["active"] >= c:
                state["blocked"] += 1
                continue
            state["active"] += 1
            env.process(request(d))

    t0 = time.perf_counter()
    env.process(arrivals())
    env.run()
    return time.perf_counter() - t0, state["blocked"]


def dcsim_blocking(topo, arrival, duration, demand, kernels: str = "auto",
                   allocator=None) -> tuple[float, int]:
    """dcsim on the stream; ``kernels`` is DCSIM_KERNELS for this run (``numba``: the
    compiled loop, loaded before the clock starts; ``numpy``: the fused loop in Python)."""
    os.environ["DCSIM_KERNELS"] = kernels
    eng = Engine(topo, Source(arrival, duration, demand), allocator or FirstFitAllocator(),
                 np.random.default_rng(0), EngineConfig(), sink=lambda kind, cols: None)
    if eng._compiled is not None:
        eng._compiled.ready()  # the loading is start-up, not the engine
    t0 = time.perf_counter()
    summary = eng.run()
    return time.perf_counter() - t0, int(summary["received"] - summary["accepted"])


try:  # Cimba (pip install cimba; a benchmark dependency only)
    import cimba as cb
    from cimba import inputs as cb_inputs
    CIMBA_MISSING = ""
except ImportError as e:
    cb = None
    CIMBA_MISSING = str(e)

if cb is not None:
    class CimbaMMcc(cb.Model):
        """M/M/c/c in Cimba, written as its documentation writes models: an arrivals
        process that holds for each gap (a trace input: the same stream as the others),
        and, for an arrival that finds fewer than c busy, a departure event scheduled
        after its holding time (``cb.schedule`` of a ``cb.event``); blocked otherwise."""

        gaps: cb.Input[float]
        holds: cb.Input[float]
        c: cb.Param[int]
        arrivals_n: cb.Param[int]
        busy: cb.Output[int]
        blocked: cb.Output[int]

        @cb.process
        def arrivals(self):
            for _ in range(self.arrivals_n):
                cb.hold(self.gaps.next())
                d = self.holds.next()
                if self.busy < self.c:
                    self.busy += 1
                    cb.schedule(self.depart, d)
                else:
                    self.blocked += 1

        @cb.event
        def depart(self):
            self.busy -= 1

    def cimba_mmcc(arrival, duration, c: int) -> tuple[float, int]:
        """Cimba on the stream (the model compiled before the clock starts, once per
        process: Cimba caches its compiled classes); (seconds, blocked)."""
        m = CimbaMMcc()
        m.gaps = cb_inputs.trace(np.diff(arrival, prepend=0.0))
        m.holds = cb_inputs.trace(duration)
        m.c = c
        m.arrivals_n = len(arrival)
        exp = cb.Experiment(m, replications=1, window=cb.Window.until_idle(), seed=1)
        t0 = time.perf_counter()
        res = exp.run()
        elapsed = time.perf_counter() - t0
        assert not res.failed.any(), res.failure_reasons
        return elapsed, int(res[m].blocked.values[0, 0])
else:
    cimba_mmcc = None


def unit_topology(c: int) -> Topology:
    g = nx.Graph()
    for i in range(c):
        g.add_node(f"h{i}", kind="server", cpu=1.0, mem=1.0)
    return Topology.from_graph(g, name=f"unit{c}", allow_disconnected=True)


class PyFirstFit(Allocator):
    """A pure-Python first-fit plugin (a loop over the free columns): what a user's own
    allocator costs the engine per arrival."""

    name = "py_first_fit"

    def allocate(self, request, view):
        d0, d1 = request.demand.tolist()
        c0, c1 = view.columns
        for i, (f0, f1) in enumerate(zip(c0.tolist(), c1.tolist(), strict=True)):
            if f0 >= d0 - 1e-9 and f1 >= d1 - 1e-9:
                return i
        return None


def mmcc_table(n: int, c: int, load: float, repeat: int) -> list[str]:
    a, d, m = mmcc_stream(n, c, load)
    topo = unit_topology(c)
    names = ["dcsim compiled", "dcsim fused", "dcsim py-plugin", "simpy-cb", "simpy-proc"]
    runs = [lambda: dcsim_blocking(topo, a, d, m, "numba"),
            lambda: dcsim_blocking(topo, a, d, m, "numpy"),
            lambda: dcsim_blocking(topo, a, d, m, "numpy", PyFirstFit()),
            lambda: bare_callbacks_blocking(a, d, c),
            lambda: bare_processes_blocking(a, d, c)]
    if cimba_mmcc is not None:
        names.append("cimba")
        runs.append(lambda: cimba_mmcc(a, d, c))
        cimba_mmcc(a[:1000], d[:1000], c)  # compiled before the rounds
    saved = os.environ.get("DCSIM_KERNELS")
    rounds, blocked = [], {}
    try:
        for r in range(repeat):  # interleaved, the order turned every round
            order = list(range(len(runs))) if r % 2 == 0 else list(range(len(runs)))[::-1]
            got = {i: runs[i]() for i in order}
            rounds.append([got[i][0] for i in range(len(runs))])
            for i in range(len(runs)):
                blocked.setdefault(got[i][1], []).append(names[i])
    finally:
        if saved is None:
            os.environ.pop("DCSIM_KERNELS", None)
        else:
            os.environ["DCSIM_KERNELS"] = saved
    assert len(blocked) == 1, f"the engines blocked different arrivals: {blocked}"
    (b,) = blocked
    # the blocking's standard error by batch means (20 batches of consecutive arrivals)
    bare_callbacks_blocking(a, d, c)
    batches = np.array_split(np.asarray(BLOCKED, dtype=np.float64), 20)
    se = float(np.std([x.mean() for x in batches], ddof=1) / np.sqrt(len(batches)))
    t = np.array(rounds)
    best = t.min(axis=0)
    print(f"\nM/M/c/c: c = {c}, offered {load * c:g} Erlangs, {n:,} arrivals: blocked {b:,} "
          f"in all {len(runs)} engines, {b / n:.5f} ± {2 * se:.5f} (2 s.e., batch means); "
          f"Erlang B {erlang_b(c, load * c):.5f}")
    if cimba_mmcc is None:
        print(f"(cimba not importable: {CIMBA_MISSING}; its column is left out)")
    print(f"{'engine':>16} {'req/s':>12}   time ratio to it (median over rounds) of:")
    print(f"{'':>16} {'':>12} " + " ".join(f"{x:>15}" for x in names[:3]))
    ratio = {}
    for j, name in enumerate(names):
        cells = []
        for i in range(3):
            r = float(np.median(t[:, j] / t[:, i]))
            ratio[(names[i], name)] = r
            cells.append(f"{r:>15.3f}")
        print(f"{name:>16} {n / best[j]:>12,.0f} " + " ".join(cells))
    goals = []
    if cimba_mmcc is not None:
        r = ratio[("dcsim compiled", "cimba")]
        goals.append(f"M/M/c/c: dcsim (first_fit, compiled loop) {r:.3f} of Cimba "
                     f"(goal >= 1.0: {'met' if r >= 1.0 else 'not met'})")
    else:
        goals.append("M/M/c/c: dcsim against Cimba not measured (cimba not importable)")
    r = ratio[("dcsim py-plugin", "simpy-cb")]
    goals.append(f"M/M/c/c: dcsim with a pure-Python plugin {r:.3f} of SimPy callbacks "
                 f"(goal >= 1.0: {'met' if r >= 1.0 else 'not met'})")
    r = ratio[("dcsim compiled", "simpy-cb")]
    goals.append(f"M/M/c/c: dcsim (compiled loop) {r:.3f} of SimPy callbacks")
    return goals


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=50_000)
    ap.add_argument("--repeat", type=int, default=5,
                    help="rounds; each times all three back to back")
    ap.add_argument("--servers", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--power", action="store_true",
                    help="dcsim with energy accounting on (linear model, idle-off servers)")
    ap.add_argument("--mmcc-requests", type=int, default=100_000,
                    help="arrivals of the M/M/c/c table (0: leave it out)")
    ap.add_argument("--mmcc-servers", type=int, default=100)
    ap.add_argument("--mmcc-load", type=float, default=0.95,
                    help="offered load per server, in Erlangs")
    args = ap.parse_args()
    n = args.requests
    print(f"requests per run: {n}; {args.repeat} interleaved rounds; req/s = best round, "
          "ratio = median over rounds of (baseline time / dcsim time)")
    print(f"{'servers':>8} {'dcsim req/s':>12} {'simpy-cb req/s':>15} {'ratio':>6} "
          f"{'simpy-proc req/s':>17} {'ratio':>6}")
    goals: list[str] = []
    for n_servers in args.servers:
        topo = flat_topology(n_servers)
        a, d, m = stream(n, n_servers)
        rounds = []
        for _ in range(args.repeat):  # interleaved, so machine noise hits all three alike
            rounds.append((dcsim_run(topo, a, d, m, args.power), bare_callbacks(a, d),
                           bare_processes(a, d)))
        t = np.array(rounds)
        best = t.min(axis=0)
        r_cb = float(np.median(t[:, 1] / t[:, 0]))
        r_pr = float(np.median(t[:, 2] / t[:, 0]))
        print(f"{n_servers:>8} {n / best[0]:>12,.0f} {n / best[1]:>15,.0f} {r_cb:>6.3f} "
              f"{n / best[2]:>17,.0f} {r_pr:>6.3f}")
        if n_servers == 1000:  # the docstring's goals, checked by this run
            goals.append(f"at 1k servers: {r_cb:.3f} of SimPy callbacks (goal >= 0.5: "
                         f"{'met' if r_cb >= 0.5 else 'not met'}), {r_pr:.3f} of SimPy "
                         f"processes (goal >= 1.0: {'met' if r_pr >= 1.0 else 'not met'})")
    if args.mmcc_requests:
        goals += mmcc_table(args.mmcc_requests, args.mmcc_servers, args.mmcc_load,
                            args.repeat)
    for line in goals:
        print(line)


if __name__ == "__main__":
    main()
