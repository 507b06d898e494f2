"""DeepRM's rollouts: job sets stepped in lock-step through queue environments, the
discounted returns and the per-time-step baseline, and the greedy evaluation
(:mod:`dcsim.learn.deeprm.train` trains with them)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from dcsim.learn.deeprm.config import TrainConfig
from dcsim.queue.env import QueueConfig, QueueEnv
from dcsim.queue.jobs import JobSet
from dcsim.schedulers.deeprm import (
    ArrivalClock,
    ImageSpec,
    fill_images,
    greedy_actions,
)


# --------------------------------------------------------------------------- rollouts
class ObsBuffer:
    """A growable (rows, input) float32 buffer reused across job sets: the images of one
    job set's rollouts are written into it in place (no per-step allocation)."""

    def __init__(self, size: int, rows: int = 4096):
        self.data = np.zeros((rows, size), dtype=np.float32)
        self.n = 0

    def take(self, k: int) -> np.ndarray:
        """The next ``k`` rows (C-contiguous), growing the buffer if needed."""
        if self.n + k > self.data.shape[0]:
            grown = np.zeros((max(2 * self.data.shape[0], self.n + k), self.data.shape[1]),
                             dtype=np.float32)
            grown[:self.n] = self.data[:self.n]
            self.data = grown
        rows = self.data[self.n:self.n + k]
        self.n += k
        return rows


@dataclasses.dataclass
class LockstepResult:
    rewards: list[list[float]]     # per environment, per decision
    actions: list[np.ndarray]      # per lock-step k (recorded only)
    active: list[np.ndarray]       # per lock-step k: indices of the envs active at k


def run_lockstep(envs: list[QueueEnv], jobsets: list[JobSet],
                 logits: Callable[[np.ndarray], np.ndarray], spec: ImageSpec,
                 rng: np.random.Generator | None, *, max_decisions: int | None = None,
                 record: ObsBuffer | None = None) -> LockstepResult:
    """Run one episode per (env, job set) in lock-step: at each step every unfinished env
    makes one decision, all chosen from one batched forward pass ``logits(images)``.
    ``rng`` None: greedy (:func:`greedy_actions`: argmax over the slots holding a job and
    void, as the ``deeprm`` scheduler); else sample from the softmax over all M + 1.
    Stops when all are done or after ``max_decisions`` steps. With ``record``, the images
    go into that buffer (lock-step by lock-step) and the actions are kept."""
    B = len(envs)
    T, M, R = spec.horizon, spec.slots, spec.n_resources
    free = np.empty((B, T, R))
    valid = np.empty((B, M), dtype=bool)
    length = np.empty((B, M), dtype=np.int64)
    demand = np.empty((B, M, R))
    backlog = np.empty(B, dtype=np.int64)
    since = np.empty(B)
    scratch = np.zeros((B, spec.size), dtype=np.float32)
    clocks = [ArrivalClock(spec.max_track) for _ in range(B)]
    for env, js in zip(envs, jobsets, strict=True):
        env.reset(js)
    out = LockstepResult([[] for _ in range(B)], [], [])
    active = [i for i in range(B) if not envs[i].done]
    k = 0
    while active and (max_decisions is None or k < max_decisions):
        n = len(active)
        for j, i in enumerate(active):
            v = envs[i].view()
            free[j] = v.free
            valid[j] = v.slot_valid
            length[j] = v.slot_length
            demand[j] = v.slot_demand
            backlog[j] = v.backlog
            since[j] = clocks[i].update(v)
        x = fill_images(spec, free[:n], valid[:n], length[:n], demand[:n], backlog[:n],
                        since[:n], out=record.take(n) if record is not None else scratch[:n])
        z = logits(x)
        if rng is None:
            a = greedy_actions(z, valid[:n])
        else:
            z = z.astype(np.float64)
            z -= z.max(axis=1, keepdims=True)
            c = np.cumsum(np.exp(z), axis=1)
            u = rng.random(n) * c[:, -1]
            a = np.minimum((c <= u[:, None]).sum(axis=1), M)
        still = []
        for j, i in enumerate(active):
            res = envs[i].step(int(a[j]))
            out.rewards[i].append(res.reward)
            if not res.done:
                still.append(i)
        if record is not None:
            out.actions.append(a)
            out.active.append(np.asarray(active))
        active = still
        k += 1
    return out


def _returns(rewards: list[float], gamma: float) -> np.ndarray:
    r = np.asarray(rewards, dtype=np.float64)
    if gamma == 1.0:
        return np.cumsum(r[::-1])[::-1].copy()
    g = np.empty_like(r)
    acc = 0.0
    for t in range(len(r) - 1, -1, -1):
        acc = r[t] + gamma * acc
        g[t] = acc
    return g


@dataclasses.dataclass
class JobsetBatch:
    """The R rollouts of one job set, ready for the policy-gradient loss."""

    obs: np.ndarray          # (n, input) float32 (a view of the ObsBuffer)
    actions: np.ndarray      # (n,)
    advantages: np.ndarray   # (n,)
    returns: np.ndarray      # (R,) total return of each rollout
    slowdowns: np.ndarray    # slowdowns of the jobs finished in all R rollouts


def rollout_jobset(envs: list[QueueEnv], jobset: JobSet,
                   logits: Callable[[np.ndarray], np.ndarray], spec: ImageSpec,
                   rng: np.random.Generator, cfg: TrainConfig,
                   buffer: ObsBuffer | None = None) -> JobsetBatch:
    """R = len(envs) stochastic rollouts of ``jobset`` in lock-step, with the
    per-time-step baseline (see the module docstring)."""
    R = len(envs)
    buffer = buffer if buffer is not None else ObsBuffer(spec.size)
    buffer.n = 0
    res = run_lockstep(envs, [jobset] * R, logits, spec, rng,
                       max_decisions=cfg.episode_max_length, record=buffer)
    G = [_returns(r, cfg.discount) for r in res.rewards]
    maxlen = max(len(g) for g in G)
    padded = np.zeros((R, maxlen))
    for i, g in enumerate(G):
        padded[i, :len(g)] = g
    adv = padded - padded.mean(axis=0)  # shorter rollouts count 0 (authors' padding)
    advantages = np.concatenate([adv[idx, k] for k, idx in enumerate(res.active)])
    slow = []
    for env in envs:
        rec = env.records()
        fin = ~np.isnan(rec["finish"])
        slow.append(rec["slowdown"][fin])
    return JobsetBatch(obs=buffer.data[:buffer.n], actions=np.concatenate(res.actions),
                       advantages=advantages,
                       returns=np.array([float(np.sum(r)) for r in res.rewards]),
                       slowdowns=np.concatenate(slow))


def evaluate(logits: Callable[[np.ndarray], np.ndarray], spec: ImageSpec,
             queue: QueueConfig, jobsets: list[JobSet],
             rng: np.random.Generator | None = None) -> tuple[float, int]:
    """The greedy policy (or, with ``rng``, the sampling one) on ``jobsets`` (lock-step):
    (mean slowdown over their non-dropped jobs, unfinished jobs counting (end − arrival)
    / length; number of unfinished jobs)."""
    envs = [QueueEnv(queue) for _ in jobsets]
    run_lockstep(envs, jobsets, logits, spec, rng)
    slow, unfinished = [], 0
    for env in envs:
        rec = env.records()
        fin = ~np.isnan(rec["finish"])
        left = ~fin & ~rec["dropped"]
        unfinished += int(left.sum())
        slow.append(rec["slowdown"][fin])
        slow.append((env.time - rec["arrival"][left]) / rec["length"][left])
    s = np.concatenate(slow)
    return (float(s.mean()) if s.size else float("nan")), unfinished
