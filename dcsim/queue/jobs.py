"""Job sets for queue mode (DeepRM's setting): synthetic (the authors' distribution) or
trace-driven (Alibaba 2018 ``batch_task``).

A :class:`JobSet` lists jobs by integer arrival step. Demands are in *slots* of the
machine (DeepRM: 10 slots per resource), lengths in time steps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = ["JobSet", "deeprm_jobset", "jobs_from_table", "offered_load"]


@dataclass(frozen=True)
class JobSet:
    """Jobs sorted by arrival step (the order within one step is the arrival order).

    ``arrival`` (n,) int64 in ``0..steps-1``, non-decreasing; ``length`` (n,) int64 ≥ 1;
    ``demand`` (n, R) float64 ≥ 0, one column per name in ``resources``; ``steps`` is the
    number of arrival steps the set spans (arrivals happen only in steps ``0..steps-1``).
    The arrays are stored as read-only copies.
    """

    arrival: np.ndarray
    length: np.ndarray
    demand: np.ndarray
    resources: tuple[str, ...] = ("cpu", "mem")
    steps: int = 50

    def __post_init__(self):
        arrival = np.array(self.arrival, dtype=np.float64, ndmin=1)
        length = np.array(self.length, dtype=np.float64, ndmin=1)
        demand = np.array(self.demand, dtype=np.float64)
        resources = tuple(str(r) for r in self.resources)
        n = arrival.shape[0]
        if arrival.ndim != 1:
            raise ValueError(f"JobSet: arrival must be 1-D, got shape {arrival.shape}")
        if length.shape != (n,):
            raise ValueError(f"JobSet: length has shape {length.shape}, expected ({n},) "
                             "like arrival")
        if not resources:
            raise ValueError("JobSet: resources must name at least one resource")
        if len(set(resources)) != len(resources):
            raise ValueError(f"JobSet: duplicate resource names in {resources}")
        if n == 0 and demand.size == 0:
            demand = demand.reshape(0, len(resources))
        if demand.shape != (n, len(resources)):
            raise ValueError(f"JobSet: demand has shape {demand.shape}, expected "
                             f"({n}, {len(resources)}) = (jobs, resources {resources})")
        if int(self.steps) != self.steps or self.steps < 0:
            raise ValueError(f"JobSet: steps must be a non-negative integer, not {self.steps}")
        steps = int(self.steps)
        if n:
            if not np.all(np.isfinite(arrival)) or np.any(arrival != np.round(arrival)):
                raise ValueError("JobSet: arrival steps must be integers")
            if arrival.min() < 0 or arrival.max() >= steps:
                raise ValueError(f"JobSet: arrival steps must lie in 0..{steps - 1} "
                                 f"(steps={steps}); got {arrival.min():g}..{arrival.max():g}")
            if np.any(np.diff(arrival) < 0):
                raise ValueError("JobSet: jobs must be sorted by arrival step")
            if not np.all(np.isfinite(length)) or np.any(length != np.round(length)):
                raise ValueError("JobSet: lengths must be integers")
            if length.min() < 1:
                raise ValueError(f"JobSet: lengths must be >= 1, got {length.min():g}")
            if not np.all(np.isfinite(demand)) or demand.min() < 0:
                raise ValueError("JobSet: demands must be finite and >= 0")
        arrival = arrival.astype(np.int64)
        length = length.astype(np.int64)
        for a in (arrival, length, demand):
            a.flags.writeable = False
        object.__setattr__(self, "arrival", arrival)
        object.__setattr__(self, "length", length)
        object.__setattr__(self, "demand", demand)
        object.__setattr__(self, "resources", resources)
        object.__setattr__(self, "steps", steps)

    def __len__(self) -> int:
        return int(self.arrival.shape[0])

    @property
    def n_resources(self) -> int:
        return len(self.resources)


def _check_range(name: str, lo_hi: Sequence[int]) -> tuple[int, int]:
    lo, hi = (int(x) for x in lo_hi)
    if lo > hi:
        raise ValueError(f"{name}: lower bound {lo} exceeds upper bound {hi}")
    return lo, hi


def deeprm_jobset(rng: np.random.Generator, *, steps: int = 50, new_job_rate: float = 0.7,
                  resources: Sequence[str] = ("cpu", "mem"), short_prob: float = 0.8,
                  short_len: Sequence[int] = (1, 3), long_len: Sequence[int] = (10, 15),
                  dominant: Sequence[int] = (5, 10), other: Sequence[int] = (1, 2)) -> JobSet:
    """A job set from DeepRM's synthetic distribution (Mao et al., HotNets 2016).

    In each of ``steps`` arrival steps one job arrives with probability ``new_job_rate``
    (Bernoulli, at most one job per step). Its length is uniform in ``short_len`` with
    probability ``short_prob``, else uniform in ``long_len``; one dominant resource is chosen
    uniformly; its demand is uniform in ``dominant``, every other resource's uniform in
    ``other`` (all bounds inclusive integers, in slots).

    Draw order (fixed, so one seed gives one set): for all ``steps`` steps at once, (1) the
    arrival coin flips ``rng.random(steps)``, (2) the short/long flips ``rng.random(steps)``,
    (3) short lengths ``rng.integers(.., size=steps)``, (4) long lengths (same), (5) the
    dominant resource ``rng.integers(R, size=steps)``, (6) dominant demands
    ``rng.integers(.., size=steps)``, (7) other demands ``rng.integers(.., size=(steps, R))``;
    then the steps without an arrival are discarded. Drawing for every step (not only those
    with a job) makes one seed give nested sets across rates: a higher ``new_job_rate``
    adds jobs but leaves the jobs of the other steps unchanged (common random numbers).
    """
    if not 0.0 <= new_job_rate <= 1.0:
        raise ValueError(f"new_job_rate must be in [0, 1], not {new_job_rate}")
    if not 0.0 <= short_prob <= 1.0:
        raise ValueError(f"short_prob must be in [0, 1], not {short_prob}")
    if steps < 0:
        raise ValueError(f"steps must be >= 0, not {steps}")
    resources = tuple(resources)
    r = len(resources)
    s_lo, s_hi = _check_range("short_len", short_len)
    l_lo, l_hi = _check_range("long_len", long_len)
    d_lo, d_hi = _check_range("dominant", dominant)
    o_lo, o_hi = _check_range("other", other)
    if min(s_lo, l_lo) < 1:
        raise ValueError("job lengths must be >= 1")

    arrive = rng.random(steps) < new_job_rate
    short = rng.random(steps) < short_prob
    slen = rng.integers(s_lo, s_hi + 1, size=steps)
    llen = rng.integers(l_lo, l_hi + 1, size=steps)
    dom = rng.integers(r, size=steps)
    dval = rng.integers(d_lo, d_hi + 1, size=steps)
    demand = rng.integers(o_lo, o_hi + 1, size=(steps, r)).astype(np.float64)
    demand[np.arange(steps), dom] = dval
    length = np.where(short, slen, llen)
    idx = np.flatnonzero(arrive)
    return JobSet(arrival=idx, length=length[idx], demand=demand[idx],
                  resources=resources, steps=steps)


def offered_load(new_job_rate: float, capacity: float = 10.0, *, n_resources: int = 2,
                 short_prob: float = 0.8, short_len: Sequence[int] = (1, 3),
                 long_len: Sequence[int] = (10, 15), dominant: Sequence[int] = (5, 10),
                 other: Sequence[int] = (1, 2)) -> float:
    """Expected offered load of :func:`deeprm_jobset`'s distribution, per resource.

    load = rate · E[length] · E[demand on one resource] / capacity, where
    E[length] = p·mean(short_len) + (1−p)·mean(long_len) and, the dominant resource being
    uniform over R, E[demand] = mean(dominant)/R + mean(other)·(R−1)/R (length and demand are
    independent). Every resource has the same load by symmetry, so this is also the
    resource-averaged load. Defaults: 4.1 · 4.5 / 10 = 1.845 × rate (docs/reproductions.md, DeepRM).
    """
    s_lo, s_hi = _check_range("short_len", short_len)
    l_lo, l_hi = _check_range("long_len", long_len)
    d_lo, d_hi = _check_range("dominant", dominant)
    o_lo, o_hi = _check_range("other", other)
    e_len = short_prob * (s_lo + s_hi) / 2 + (1 - short_prob) * (l_lo + l_hi) / 2
    e_dem = ((d_lo + d_hi) / 2 + (n_resources - 1) * (o_lo + o_hi) / 2) / n_resources
    return float(new_job_rate * e_len * e_dem / capacity)


#: Default slot scaling for the Alibaba 2018 standard table: cpu in cores → 1 slot per core;
#: mem as a fraction of a machine → 10 slots per machine (DeepRM's 10 slots per resource).
ALIBABA_SCALE = {"cpu": 1.0, "mem": 10.0}


def jobs_from_table(df: pd.DataFrame, *, resources: Sequence[str] = ("cpu", "mem"),
                    time_unit: float = 10.0, length_unit: float | None = None,
                    scale: Mapping[str, float] | None = None, cap: float = 10.0,
                    steps: int = 50, max_length: int | None = None,
                    start: float | None = None) -> JobSet:
    """Trace-driven jobs from a standard request table (e.g. :func:`import_alibaba2018`).

    - arrival step = ⌊(arrival − ``start``) / ``time_unit``⌋ (by default the first job is
      at step 0); only jobs with arrival step < ``steps`` are kept; several may share a
      step, in the table's (stable, arrival-sorted) order.
    - length = ⌈duration / ``length_unit``⌉, at least 1 (``length_unit`` defaults to
      ``time_unit``); with ``max_length`` set, longer jobs are clipped to it (otherwise a
      job longer than the environment's horizon can never start).
    - demand of resource r = ⌈column r × ``scale[r]``⌉ (a 1e-9 tolerance absorbs float noise,
      so 0.3 × 10 is 3 slots), capped at ``cap`` (the slot capacity). Default scale
      :data:`ALIBABA_SCALE`: cpu cores × 1, mem fraction × 10, i.e. one slot per core and
      10 slots per machine's memory; ``scale`` entries override these, and any other
      column needs one.

    ``start`` (seconds) is where step 0 begins; default the first arrival. Jobs arriving
    before ``start`` are left out. Real traces are bursty (a job's tasks share one start
    time), so several jobs per step and long empty stretches are normal; on the committed
    Alibaba slice (5000 tasks over ~70 000 s) pick ``time_unit``/``steps``/``start`` for
    the window you want.
    """
    resources = tuple(resources)
    if time_unit <= 0:
        raise ValueError(f"time_unit must be > 0, not {time_unit}")
    length_unit = time_unit if length_unit is None else length_unit
    if length_unit <= 0:
        raise ValueError(f"length_unit must be > 0, not {length_unit}")
    if max_length is not None and max_length < 1:
        raise ValueError(f"max_length must be >= 1, not {max_length}")
    scale = {**ALIBABA_SCALE, **(scale or {})}
    missing = [c for c in ("arrival", "duration", *resources) if c not in df.columns]
    if missing:
        raise ValueError(f"table lacks column(s) {missing}; columns are: "
                         f"{', '.join(map(str, df.columns))}")
    unscaled = [r for r in resources if r not in scale]
    if unscaled:
        raise ValueError(f"no scale given for resource(s) {unscaled}")
    d = df.sort_values("arrival", kind="stable")
    arr = d["arrival"].to_numpy(np.float64)
    if arr.size == 0:
        return JobSet(np.zeros(0), np.zeros(0), np.zeros((0, len(resources))),
                      resources=resources, steps=steps)
    t0 = arr[0] if start is None else float(start)
    step = np.floor((arr - t0) / time_unit + 1e-9).astype(np.int64)
    keep = (arr >= t0) & (step < steps)
    dur = d["duration"].to_numpy(np.float64)[keep]
    length = np.maximum(1, np.ceil(dur / length_unit - 1e-9)).astype(np.int64)
    if max_length is not None:
        length = np.minimum(length, max_length)
    demand = np.stack([d[r].to_numpy(np.float64)[keep] * scale[r] for r in resources], axis=1)
    demand = np.minimum(np.ceil(demand - 1e-9), cap)
    demand = np.maximum(demand, 0.0)
    return JobSet(arrival=step[keep], length=length, demand=demand,
                  resources=resources, steps=steps)
