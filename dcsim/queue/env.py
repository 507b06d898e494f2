"""DeepRM's time-slotted queue environment (the authors' ``environment.py`` semantics).

One machine with ``R`` resources of ``capacity`` slots each, seen ``horizon`` (T) steps
ahead; ``slots`` (M) visible job slots and a FIFO backlog of ``backlog`` jobs. At each
decision the scheduler picks a visible slot (start that job) or the void action ``M``
(advance time). Time is frozen while jobs start, so several may start in one step.

Semantics, and where they differ from the authors' code:

- **Arrivals.** The jobs of arrival step ``s`` enter when time reaches ``s``, *including*
  ``s = 0`` (offered at :meth:`QueueEnv.reset`). The authors' code only adds jobs after a
  time advance (its sequence index starts at 0 and is incremented before it is read), so
  the job of step 0 is never offered there. A job enters the first empty visible slot,
  else the end of the backlog if it holds fewer than ``backlog`` jobs, else it is dropped
  (recorded with ``dropped=True``; the authors print "Backlog is full." and lose it).
  Several jobs may arrive in one step (trace-driven sets); they enter in set order.
- **Starting a job** (the authors' ``Machine.allocate_job``): the earliest offset ``o`` in
  ``0..T-length`` such that ``free[o:o+length] >= demand`` on every resource; the job
  starts at ``t + o`` and finishes at ``t + o + length``. A learned or random policy may
  pick a job that only fits later; it is then reserved for later (the authors' semantics).
  The authors' loop is ``range(0, T - length)``, which never tries the last offset
  ``T - length`` (so there a job of length T can never start); dcsim tries it. A job with
  ``length > T`` (or a demand above capacity) can never start: it waits forever and counts
  as unfinished. The started job's slot is emptied and the head of the backlog (if any)
  moves into it. Time does not advance; the reward is 0.
- **Moving on** (void action, an empty slot, or a job that cannot be placed): reward =
  Σ over every job in the system (running but not finished, in a slot, in the backlog) of
  ``penalty / length`` (penalties −1: DeepRM's slowdown reward), taken *before* the
  advance; then ``t += 1``, ``free`` shifts up one row (the new last row is full
  capacity), running jobs with ``finish <= t`` finish (all of them: the authors remove
  from ``running_job`` while iterating over it, which can leave a finished job listed, and
  penalised, one step longer), and the jobs of step ``t`` arrive.
  The authors take the sum after the advance and the arrivals; both give every job
  exactly ``finish − arrival`` penalties, so with discount 1 the return of an episode is
  −Σ slowdown over finished jobs either way.
- **End.** ``done`` once every arrival step of the set has been reached (``t >=
  steps − 1``) and no job is running, in a slot or in the backlog; or, forced, once ``t >=
  max_steps`` (remaining jobs are unfinished). The authors' ``all_done`` test is the same
  up to their off-by-one in arrival indexing.

Records per job: ``start``/``finish`` (NaN if never started/finished), ``dropped``, and
``slowdown = (finish − arrival) / length`` for finished jobs (NaN otherwise).
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from dcsim.errors import PluginError
from dcsim.queue.jobs import JobSet
from dcsim.schedulers.base import QueueView, Scheduler

__all__ = ["QueueConfig", "QueueEnv", "StepResult"]

_EPS = 1e-9
# job states
PENDING, SLOT, BACKLOG, RUNNING, FINISHED, DROPPED = range(6)


@dataclass(frozen=True)
class QueueConfig:
    """DeepRM's environment parameters (defaults: the authors' ``parameters.py``).

    ``capacity`` is per resource (one number for all, or one per resource); ``horizon`` T
    is how far ahead the machine image reaches (and the longest job that can ever start);
    ``slots`` M visible jobs; ``backlog`` jobs queued behind them; ``max_steps`` caps time
    (the episode ends forced). ``penalty_running``/``penalty_slots``/``penalty_backlog``
    are the authors' ``delay_penalty``/``hold_penalty``/``dismiss_penalty``: a move-on step
    earns ``penalty / length`` for each job in that place.
    """

    capacity: float | tuple[float, ...] = 10.0
    horizon: int = 20
    slots: int = 10
    backlog: int = 60
    max_steps: int = 10_000
    penalty_running: float = -1.0
    penalty_slots: float = -1.0
    penalty_backlog: float = -1.0

    def __post_init__(self):
        cap = np.atleast_1d(np.asarray(self.capacity, dtype=np.float64))
        if cap.ndim != 1 or cap.size == 0 or not np.all(np.isfinite(cap)) or cap.min() <= 0:
            raise ValueError(f"QueueConfig.capacity must be positive, not {self.capacity!r}")
        object.__setattr__(self, "capacity", float(cap[0]) if np.ndim(self.capacity) == 0
                           else tuple(float(c) for c in cap))
        for name, lo in (("horizon", 1), ("slots", 1), ("backlog", 0), ("max_steps", 1)):
            v = getattr(self, name)
            if isinstance(v, bool) or int(v) != v or v < lo:
                raise ValueError(f"QueueConfig.{name} must be an integer >= {lo}, not {v!r}")
            object.__setattr__(self, name, int(v))

    def capacity_for(self, n_resources: int) -> np.ndarray:
        """Capacity as an (R,) array; one number is broadcast to every resource."""
        cap = np.atleast_1d(np.asarray(self.capacity, dtype=np.float64))
        if cap.size == 1:
            return np.full(n_resources, float(cap[0]))
        if cap.size != n_resources:
            raise ValueError(f"QueueConfig.capacity has {cap.size} values but the job set "
                             f"has {n_resources} resources")
        return cap.copy()


class StepResult(NamedTuple):
    reward: float
    done: bool
    started: bool  # True: the chosen job started (time frozen); False: time advanced


def _readonly(a: np.ndarray) -> np.ndarray:
    v = a.view()
    v.flags.writeable = False
    return v


class QueueEnv:
    """The queue environment; see the module docstring for the exact semantics.

    ``reset(jobset)`` starts an episode; then ``view()`` → scheduler → ``step(action)``
    until ``done``; :meth:`run` does that loop for a :class:`Scheduler`. Arrays in
    :meth:`view` are read-only views of the live state (valid until the next ``step``);
    pass ``copy=True`` to keep them.
    """

    def __init__(self, config: QueueConfig | None = None):
        self.config = config if config is not None else QueueConfig()
        self._jobset: JobSet | None = None

    # ------------------------------------------------------------------ episode
    def reset(self, jobset: JobSet) -> QueueView:
        """Start an episode on ``jobset`` at t = 0 with an empty machine; the jobs of
        arrival step 0 are offered at once. Returns the first view."""
        cfg = self.config
        r = jobset.n_resources
        T, M = cfg.horizon, cfg.slots
        n = len(jobset)
        self._jobset = jobset
        self._arrival = jobset.arrival
        self._length = jobset.length
        self._demand = jobset.demand
        self._inv_len = 1.0 / jobset.length if n else np.zeros(0)
        self._cap = cfg.capacity_for(r)
        self._free = np.tile(self._cap, (T, 1))
        self._slot_job = np.full(M, -1, dtype=np.int64)
        self._slot_valid = np.zeros(M, dtype=bool)
        self._slot_length = np.zeros(M, dtype=np.int64)
        self._slot_demand = np.zeros((M, r), dtype=np.float64)
        self._slot_arrival = np.zeros(M, dtype=np.int64)
        self._n_slot = 0
        self._backlog: deque[int] = deque()
        self._running: list[tuple[int, int]] = []  # heap of (finish, job)
        self._state = np.full(n, PENDING, dtype=np.int8)
        self._start = np.full(n, np.nan)
        self._finish = np.full(n, np.nan)
        self._weights = np.zeros(6)
        self._weights[SLOT] = cfg.penalty_slots
        self._weights[BACKLOG] = cfg.penalty_backlog
        self._weights[RUNNING] = cfg.penalty_running
        self._ptr = 0
        self._t = 0
        self._done = False
        self._forced = False
        ro = _readonly
        self._ro = (ro(self._cap), ro(self._free), ro(self._slot_valid),
                    ro(self._slot_length), ro(self._slot_demand), ro(self._slot_arrival))
        self._arrive_now()
        self._check_done()
        return self.view()

    @property
    def time(self) -> int:
        return self._t

    @property
    def done(self) -> bool:
        return self._done

    @property
    def forced(self) -> bool:
        """The episode ended because ``t`` reached ``max_steps``."""
        return self._forced

    @property
    def jobset(self) -> JobSet:
        self._require_reset()
        return self._jobset  # type: ignore[return-value]

    def _require_reset(self) -> None:
        if self._jobset is None:
            raise RuntimeError("QueueEnv: call reset(jobset) first")

    def view(self, copy: bool = False) -> QueueView:
        """The scheduler's view of the current state (read-only arrays)."""
        self._require_reset()
        cap, free, valid, length, demand, arrival = self._ro
        if copy:
            cap, free, valid, length, demand, arrival = (
                _readonly(a.copy()) for a in (cap, free, valid, length, demand, arrival))
        return QueueView(time=self._t, capacity=cap, free=free, slot_valid=valid,
                         slot_length=length, slot_demand=demand, slot_arrival=arrival,
                         backlog=len(self._backlog))

    # ------------------------------------------------------------------ dynamics
    def step(self, action: int) -> StepResult:
        """Apply ``action`` (a slot ``0..M-1`` or the void action ``M``)."""
        self._require_reset()
        if self._done:
            raise RuntimeError("QueueEnv: the episode is over; call reset()")
        M = self.config.slots
        if isinstance(action, bool) or not isinstance(action, int | np.integer) \
                or not 0 <= action <= M:
            raise ValueError(f"QueueEnv: action must be an int in 0..{M}, not {action!r}")
        a = int(action)
        if a < M and self._slot_valid[a]:
            j = int(self._slot_job[a])
            o = self._earliest_offset(j)
            if o >= 0:
                self._start_job(j, a, o)
                return StepResult(0.0, False, True)
        reward = self._reward()
        self._advance()
        return StepResult(reward, self._done, False)

    def _earliest_offset(self, j: int) -> int:
        """Earliest offset o in 0..T-length with free[o:o+length] >= demand, or -1."""
        L = int(self._length[j])
        T = self.config.horizon
        if L > T:
            return -1
        ok = (self._free >= self._demand[j] - _EPS).all(axis=1)
        if ok[:L].all():
            return 0
        bad = np.empty(T + 1, dtype=np.int64)
        bad[0] = 0
        np.cumsum(~ok, out=bad[1:])
        win = np.flatnonzero(bad[L:] == bad[:-L])  # windows [o, o+L) with no bad row
        return int(win[0]) if win.size else -1

    def _start_job(self, j: int, a: int, o: int) -> None:
        L = int(self._length[j])
        self._free[o:o + L] -= self._demand[j]
        start = self._t + o
        self._start[j] = start
        self._state[j] = RUNNING
        heapq.heappush(self._running, (start + L, j))
        if self._backlog:
            self._put_in_slot(self._backlog.popleft(), a)
        else:
            self._slot_job[a] = -1
            self._slot_valid[a] = False
            self._slot_length[a] = 0
            self._slot_demand[a] = 0.0
            self._slot_arrival[a] = 0
            self._n_slot -= 1

    def _put_in_slot(self, j: int, a: int) -> None:
        if not self._slot_valid[a]:
            self._n_slot += 1
        self._slot_job[a] = j
        self._slot_valid[a] = True
        self._slot_length[a] = self._length[j]
        self._slot_demand[a] = self._demand[j]
        self._slot_arrival[a] = self._arrival[j]
        self._state[j] = SLOT

    def _reward(self) -> float:
        p = self._ptr
        if p == 0:
            return 0.0
        return float(np.dot(self._weights[self._state[:p]], self._inv_len[:p]))

    def _advance(self) -> None:
        self._t += 1
        t = self._t
        free = self._free
        free[:-1] = free[1:]
        free[-1] = self._cap
        run = self._running
        while run and run[0][0] <= t:
            f, j = heapq.heappop(run)
            self._finish[j] = f
            self._state[j] = FINISHED
        self._arrive_now()
        self._check_done()

    def _arrive_now(self) -> None:
        arrival, n, t = self._arrival, len(self._arrival), self._t
        M = self.config.slots
        while self._ptr < n and arrival[self._ptr] <= t:
            j = self._ptr
            self._ptr += 1
            if self._n_slot < M:
                self._put_in_slot(j, int(np.argmin(self._slot_valid)))
            elif len(self._backlog) < self.config.backlog:
                self._backlog.append(j)
                self._state[j] = BACKLOG
            else:
                self._state[j] = DROPPED

    def _check_done(self) -> None:
        js = self._jobset
        assert js is not None
        if (self._ptr == len(js) and self._t >= js.steps - 1 and not self._running
                and self._n_slot == 0 and not self._backlog):
            self._done = True
        elif self._t >= self.config.max_steps:
            self._done = True
            self._forced = True

    # ------------------------------------------------------------------ running
    def run(self, scheduler: Scheduler, jobset: JobSet | None = None) -> dict[str, Any]:
        """One episode with ``scheduler`` on ``jobset`` (default: the last job set given to
        :meth:`reset`, from the start); returns :meth:`summary`. An action that is not an
        int in ``0..M`` is a :class:`PluginError` naming the scheduler."""
        if jobset is None:
            self._require_reset()
            jobset = self._jobset
        self.reset(jobset)  # type: ignore[arg-type]
        scheduler.setup(self.view())
        M = self.config.slots
        name = getattr(scheduler, "name", type(scheduler).__name__)
        while not self._done:
            a = scheduler.choose(self.view())
            if isinstance(a, bool) or not isinstance(a, int | np.integer) or not 0 <= a <= M:
                raise PluginError(f"scheduler {name!r} returned {a!r}; expected an int in "
                                  f"0..{M} (a slot, or {M} for void)")
            self.step(a)
        return self.summary()

    # ------------------------------------------------------------------ results
    def records(self) -> dict[str, np.ndarray]:
        """Per-job columns: id, arrival, length, demand_<resource>…, start, finish,
        dropped, completion_time (finish − arrival) and slowdown (NaN unless finished)."""
        js = self.jobset
        out: dict[str, np.ndarray] = {
            "id": np.arange(len(js), dtype=np.int64),
            "arrival": js.arrival.copy(),
            "length": js.length.copy(),
        }
        for k, r in enumerate(js.resources):
            out[f"demand_{r}"] = js.demand[:, k].copy()
        out["start"] = self._start.copy()
        out["finish"] = self._finish.copy()
        out["dropped"] = self._state == DROPPED
        out["completion_time"] = self._finish - js.arrival
        out["slowdown"] = out["completion_time"] / js.length
        return out

    def summary(self) -> dict[str, Any]:
        """mean_slowdown and mean_completion_time over finished jobs (NaN if none), job
        counts (jobs = finished + dropped + unfinished), steps (the final t), forced."""
        js = self.jobset
        fin = self._state == FINISHED
        nf = int(fin.sum())
        dropped = int((self._state == DROPPED).sum())
        comp = self._finish[fin] - js.arrival[fin]
        return {
            "mean_slowdown": float((comp / js.length[fin]).mean()) if nf else float("nan"),
            "mean_completion_time": float(comp.mean()) if nf else float("nan"),
            "jobs": len(js),
            "finished": nf,
            "dropped": dropped,
            "unfinished": len(js) - nf - dropped,
            "steps": self._t,
            "forced": self._forced,
        }
