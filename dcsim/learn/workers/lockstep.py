"""A PPO trainer's ``num_envs`` environments, stepped in lock-step, in this process or in
``num_workers`` worker processes.

:class:`LockstepEnvs` steps every environment with its action, resets one whose episode
ended with the next seed drawn from the trainer's episode generator (drawn here, in
environment order, so the seeds are those of a loop over the environments), and keeps what
``--resume`` rebuilds the episodes in progress from (:class:`~dcsim.learn.resume.
EpisodeLog`: each episode's seed and the actions since) and each episode's return so far.

**Workers.** With ``workers`` > 1 the environments are split into that many contiguous
blocks, one per process: the first stays in the trainer's process, each other lives in a
spawned worker and is stepped over a pipe. A worker's start (a fresh interpreter, its
imports, its environments) is not waited for: the trainer goes on with its own set-up, and
the first request that needs the worker waits for it. A lock-step sends each worker its
block's actions, steps the first block meanwhile, gathers the workers' results, then
resets (with the seeds drawn here) the environments whose episodes ended. Everything
random stays in the trainer's process (the policy's forward, the sampled actions, the
episode seeds), and an environment is a function of its seed and its actions, so the same
seed gives the same rollouts, hence the same weights, whatever the number of workers.
(With rollout groups, :mod:`dcsim.learn.workers.groups`, each process runs its groups'
forward passes itself; the variates and seeds are still drawn in the trainer's process,
and :meth:`LockstepEnvs.recorded` records the steps.) The workers ignore
SIGINT/SIGTERM (Ctrl-C is the trainer's: it stops at the end of the iteration) and exit
when their pipe closes, so none outlives the trainer; an error in one (an exception in an
environment, a worker that died) is an :class:`EnvWorkerError` naming the worker and the
cause, and the others are closed.
"""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
from collections.abc import Callable
from typing import Any

import numpy as np

from dcsim.errors import DcsimError
from dcsim.learn.resume import EpisodeLog
from dcsim.learn.workers.process import Local, serve, unpacked


class EnvWorkerError(DcsimError):
    """An environment worker process failed (its environment raised, or it died)."""


@dataclasses.dataclass
class Step:
    """One lock-step: each environment's next observation (the first of a new episode
    where one ended), reward and whether its episode ended; ``ended``: ``(env, info,
    episode return)`` of each episode that ended, in environment order."""

    obs: list[Any]
    rewards: np.ndarray
    dones: np.ndarray
    ended: list[tuple[int, dict[str, Any], float]]


class LockstepEnvs:
    """``n`` environments made by ``make()`` (picklable when ``workers`` > 1, e.g. a
    ``functools.partial`` of the environment class and its config); ``rng`` draws their
    episodes' seeds; ``width``: integers per action in the episode log (1: a discrete
    action, 2: VMR²L's (VM, slot)); ``workers``: processes stepping them, this one
    included (1: only this one); ``groups``: the rollout's groups
    (:mod:`dcsim.learn.workers.groups`), each kept whole in one process.
    A context manager: :meth:`close` ends the workers."""

    def __init__(self, make: Callable[[], Any], n: int, rng: np.random.Generator, *,
                 width: int = 1, workers: int = 1, groups: int = 1):
        self.n, self.rng, self.width = n, rng, width
        self.episodes = EpisodeLog(n, width)
        self.returns = np.zeros(n)
        #: the rollout's groups of environments (:mod:`dcsim.learn.workers.groups`)
        self.groups = [[int(i) for i in g] for g in np.array_split(np.arange(n), groups)]
        if workers > 1:
            runs = np.array_split(np.arange(groups), min(workers, groups))
            blocks = None if groups == 1 else [[i for k in run for i in self.groups[k]]
                                               for run in runs]
            self.envs: Any = _Pool(make, n, min(workers, n), blocks)
        else:
            self.envs = Local([make() for _ in range(n)])

    def __enter__(self) -> LockstepEnvs:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _new_seed(self, i: int) -> int:
        seed = int(self.rng.integers(2**62))
        self.episodes.reset(i, seed)
        return seed

    def reset_all(self) -> list[Any]:
        """Every environment reset with a new seed; their first observations."""
        return self.envs.reset([(i, self._new_seed(i)) for i in range(self.n)])

    def call(self, method: str, args: list[Any]) -> list[Any]:
        """``env.method(arg)`` of each environment with its ``arg``."""
        return self.envs.call(method, args)

    def step(self, actions: list[Any]) -> Step:
        """Each environment stepped with its action; an ended episode's environment reset
        with a new seed (drawn in environment order)."""
        step = Step([None] * self.n, np.zeros(self.n), np.zeros(self.n, dtype=bool), [])
        self._stepped(step, 0, actions, self.envs.step(actions))
        return step

    def _stepped(self, step: Step, lo: int, actions: list[Any], results: list[Any]) -> None:
        """Environments ``lo, lo + 1, ...`` stepped with ``actions`` (their ``results``):
        recorded into ``step``, an ended episode's environment reset with a new seed."""
        resets = self._record(step, lo, actions, results, self._new_seed)
        for (i, _), o in zip(resets, self.envs.reset(resets) if resets else [], strict=True):
            step.obs[i] = o

    def _record(self, step: Step, lo: int, actions: list[Any], results: list[Any],
                seed_of: Callable[[int], int]) -> list[tuple[int, int]]:
        """Environments ``lo, lo + 1, ...`` stepped with ``actions`` (their ``results``)
        recorded into ``step`` and the episode log, an ended episode's next seed taken
        from ``seed_of(env)``; the ``(env, seed)`` to reset."""
        resets = []
        for i, (a, (o, r, done, info)) in enumerate(zip(actions, results, strict=True),
                                                    start=lo):
            self.episodes.step(i, a)
            step.rewards[i] = r
            self.returns[i] += r
            if done:
                step.dones[i] = True
                step.ended.append((i, info, self.returns[i]))
                self.returns[i] = 0.0
                resets.append((i, seed_of(i)))
            step.obs[i] = o
        return resets

    def recorded(self, actions: np.ndarray, rewards: np.ndarray, dones: np.ndarray,
                 ended: list[tuple[int, int, dict[str, Any]]], seeds: np.ndarray,
                 obs: list[Any]) -> list[Step]:
        """A rollout the processes computed in groups (:mod:`dcsim.learn.workers.groups`;
        ``(steps, environments)`` arrays, ``ended``: ``(step, env, info)``, ``seeds``: the
        seed an episode ending at each step and environment was reset with, ``obs``: the
        observations the environments end on) recorded as if stepped here: the episode
        log and returns; one :class:`Step` per step (only the last with observations)."""
        infos = {(t, i): info for t, i, info in ended}
        steps = []
        for t in range(len(actions)):
            step = Step([None] * self.n, np.zeros(self.n), np.zeros(self.n, dtype=bool), [])

            def seed_of(i: int, t: int = t) -> int:
                self.episodes.reset(i, int(seeds[t, i]))
                return int(seeds[t, i])

            self._record(step, 0, [int(a) for a in actions[t]],
                         [(None, rewards[t, i], bool(dones[t, i]), infos.get((t, i)))
                          for i in range(self.n)], seed_of)
            steps.append(step)
        steps[-1].obs = list(obs)
        return steps

    def arrays(self) -> dict[str, np.ndarray]:
        """The episodes in progress, for a resume state."""
        return {**self.episodes.arrays(), "ep_return": self.returns}

    def restore(self, arrays: dict[str, np.ndarray]) -> list[Any]:
        """The episodes of a resume state rebuilt (each environment reset with its seed and
        its actions replayed); the observations they are at."""
        self.episodes = EpisodeLog.from_arrays(arrays, self.n, self.width)
        self.returns = arrays["ep_return"].copy()
        return self.envs.replay(list(zip(self.episodes.seeds, self.episodes.actions,
                                         strict=True)))

    def close(self) -> None:
        """The workers ended (nothing to do in this process)."""
        self.envs.close()

    @property
    def processes(self) -> int:
        """The processes stepping the environments, this one included."""
        return len(self.envs.blocks) if isinstance(self.envs, _Pool) else 1

    @property
    def local(self) -> Local:
        """The environments in this process (the first block)."""
        return self.envs.local if isinstance(self.envs, _Pool) else self.envs

    @property
    def blocks(self) -> list[list[int]]:
        """The environments of each process, this one's first."""
        return self.envs.blocks if isinstance(self.envs, _Pool) else [list(range(self.n))]

    def attach(self, name: str, factory: Callable[[Local], Any]
               | dict[int, Callable[[Local], Any]]) -> None:
        """Each worker process builds ``factory(its environments)`` (picklable; a dict:
        worker ``w``'s own ``factory[w]``) under ``name``, which then answers
        :meth:`post_workers`'s requests to that name: how the update's parts
        (:mod:`dcsim.learn.workers.shards`) or the rollout's groups
        (:mod:`dcsim.learn.workers.groups`) are computed there. Not waited for (a
        failure is raised at the next request), so the workers build it while this
        process goes on with its own set-up. Nothing to do without workers."""
        if isinstance(self.envs, _Pool):
            self.envs.attach(name, factory if isinstance(factory, dict)
                             else dict.fromkeys(self.envs.conns, factory))

    def post_workers(self, name: str, what: str, args: dict[int, tuple]
                     ) -> Callable[[], dict[int, Any]]:
        """Request ``what`` with ``args[w]`` sent to worker ``w``'s object ``name`` (``w``
        in 1 .. processes - 1); returns a function that waits for their answers (by
        worker), so that this process can work meanwhile."""
        if not args:
            return dict
        return self.envs.post_attached({w: (name, what, a) for w, a in args.items()})

    def each_worker(self, name: str, what: str, args: tuple) -> dict[int, Any]:
        """Request ``what`` with the same ``args`` to every worker's object ``name``."""
        return self.post_workers(name, what, {w: args for w in range(1, self.processes)})()


# --------------------------------------------------------------------------- workers
class _Pool:
    """The environments in contiguous blocks, one per process (``blocks``, or ``workers``
    even ones): the first in the trainer's process (stepped while the others' workers step
    theirs), each other in a spawned worker."""

    def __init__(self, make: Callable[[], Any], n: int, workers: int,
                 blocks: list[list[int]] | None = None):
        ctx = mp.get_context("spawn")  # not fork: the trainer holds torch's threads
        self.blocks = blocks or [[int(i) for i in b]
                                 for b in np.array_split(np.arange(n), workers)]
        self.conns: dict[int, Any] = {}
        self.procs: dict[int, Any] = {}
        #: what each worker was asked and has not been waited for (its environments built,
        #: an attachment): answered before its next request's answer, an error raised then
        self.owed: dict[int, list[str]] = {}
        self.local = Local([make() for _ in self.blocks[0]])  # a bad config fails here
        try:
            for w, block in enumerate(self.blocks[1:], start=1):
                parent, child = ctx.Pipe()
                p = ctx.Process(target=serve, args=(child, make, len(block)), daemon=True,
                                name=f"dcsim-env-worker-{w}")
                p.start()
                child.close()
                self.conns[w], self.procs[w] = parent, p
                self.owed[w] = ["building its environments"]
        except BaseException:
            self.close()
            raise

    def _span(self, w: int) -> str:
        b = self.blocks[w]
        return f"{b[0]}-{b[-1]}" if len(b) > 1 else f"{b[0]}"

    def _died(self, w: int) -> EnvWorkerError:
        code = self.procs[w].exitcode
        self.close()
        return EnvWorkerError(f"environment worker {w} (envs {self._span(w)}) died"
                              + (f" (exit code {code})" if code is not None else ""))

    def _receive(self, w: int) -> Any:
        """Worker ``w``'s answer to its latest request, after those it owes."""
        owed = self.owed[w]
        while owed:
            self._answer(w, owed[0])
            owed.pop(0)
        return self._answer(w, None)

    def _answer(self, w: int, doing: str | None) -> Any:
        try:
            status, result = self.conns[w].recv()
        except (EOFError, OSError):
            raise self._died(w) from None
        if status == "error":
            self.close()
            raise EnvWorkerError(f"environment worker {w} (envs {self._span(w)}) failed"
                                 + (f" {doing}" if doing else "") + f": {result}")
        return result

    def _send(self, w: int, msg: tuple[str, Any]) -> None:
        try:
            self.conns[w].send(msg)
        except (OSError, ValueError):  # its end of the pipe is closed
            raise self._died(w) from None

    def _post(self, requests: dict[int, tuple[str, Any]]) -> Callable[[], dict[int, Any]]:
        """Workers' requests ``(what, payload)`` sent; a function that gathers their
        answers (call it once)."""
        for w, msg in requests.items():
            self._send(w, msg)
        return lambda: {w: unpacked(what, self._receive(w))
                        for w, (what, _) in requests.items()}

    def _run(self, requests: dict[int, tuple[str, Any]]) -> dict[int, Any]:
        """Each block's request ``(what, payload)`` (:meth:`Local.handle`): sent to the
        workers, block 0's done here meanwhile, then the workers' answers gathered."""
        gather = self._post({w: msg for w, msg in requests.items() if w})
        out = {0: self.local.handle(*requests[0])} if 0 in requests else {}
        return {**out, **gather()}

    def attach(self, name: str, factories: dict[int, Callable[[Local], Any]]) -> None:
        """Worker ``w`` builds ``factories[w](its environments)`` (picklable) under
        ``name``, which then answers :meth:`post_attached`'s requests. Not waited for:
        the worker builds it (importing what it needs) while this process goes on, and a
        failure is raised at the worker's next request."""
        for w, f in factories.items():
            self._send(w, ("attach", (name, f)))
            self.owed[w].append(f"attaching {name}")

    def post_attached(self, requests: dict[int, tuple[str, str, Any]]
                      ) -> Callable[[], dict[int, Any]]:
        """Requests ``(name, what, args)`` to the workers' attached objects; a function
        that gathers their answers."""
        return self._post({w: ("attached", msg) for w, msg in requests.items()})

    def _scatter(self, what: str, per_env: list[Any], extra: tuple = ()) -> list[Any]:
        """``what`` on every environment with its entry of ``per_env``; results in order."""
        got = self._run({w: (what, (*extra, [per_env[i] for i in b]))
                         for w, b in enumerate(self.blocks)})
        return [r for w in range(len(self.blocks)) for r in got[w]]

    def step(self, actions: list[Any]) -> list[Any]:
        return self._scatter("step", actions)

    def replay(self, episodes: list[Any]) -> list[Any]:
        return self._scatter("replay", episodes)

    def call(self, method: str, args: list[Any]) -> list[Any]:
        return self._scatter("call", args, (method,))

    def reset(self, which: list[tuple[int, int]]) -> list[Any]:
        """Reset environments ``(index, seed)``; their observations in the order given."""
        mine: dict[int, list[tuple[int, int]]] = {}
        where = {}
        for i, seed in which:
            w = next(k for k, b in enumerate(self.blocks) if i in b)
            where[i] = (w, len(mine.setdefault(w, [])))
            mine[w].append((self.blocks[w].index(i), seed))
        got = self._run({w: ("reset", (items,)) for w, items in mine.items()})
        return [got[where[i][0]][where[i][1]] for i, _ in which]

    def close(self) -> None:
        """Ask each worker to stop, wait a moment, then terminate any still running."""
        for c in self.conns.values():
            try:
                c.send(("close", ()))
            except (OSError, ValueError):
                pass
        for p in self.procs.values():
            p.join(timeout=2.0)
            if p.is_alive():
                p.terminate()
                p.join(timeout=2.0)
            if p.is_alive():
                p.kill()
                p.join()
        for c in self.conns.values():
            c.close()
        self.conns, self.procs = {}, {}
