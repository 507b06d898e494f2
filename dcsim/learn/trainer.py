"""The trainer base under dcsim's three trainers (Nara's and VMR²L's PPO,
:mod:`dcsim.learn.ppo`; DeepRM's REINFORCE, :mod:`dcsim.learn.deeprm.train`): a
:class:`Trainer` owns the run (the output folder, the device, torch's threads and seed,
reproducibility on a GPU, the stop request), the iteration loop, the random generators, the
environment workers it is given (:mod:`dcsim.learn.workers`), the checkpoints
(:class:`TrainingRecord`), the resume state (:mod:`dcsim.learn.resume`) and the progress
lines (:class:`Pace`). An algorithm overrides one method, :meth:`Trainer.train_step` (one
iteration's rollout and update, returning its progress row); a policy family gives the
rest, each a method of its trainer: its networks and optimiser (:meth:`Trainer.setup`),
the evaluation (:meth:`Trainer.evaluate`) and its line (:meth:`Trainer.report`), the
policy's weights and the checkpoint they are written to (:meth:`Trainer.weights`,
:meth:`Trainer.write_checkpoint`, :meth:`Trainer.meta`).

One iteration of :meth:`Trainer.run`: the iteration counter, a stop on the last iteration
or when ``max_wall_s`` has passed; ``train_step``; every ``eval_every`` iterations (and on
the last) the evaluation, the best and the last checkpoint; the progress row recorded;
at an evaluation, a stop or a halt (Ctrl-C, ``stop_after``) the progress table and the
resume state written. Every number is computed in the same order as in the trainers this
base replaced, so a training gives the same weights, bit for bit, as before
(``benchmarks/training_identity.py``).

**Progress lines** (:class:`Pace`): ``iter 40/200  123.4s  steps 80000 (650/s)  ETA 6 min
10 s``. The rate and the ETA are this invocation's: a resumed training counts from the
iteration it resumed after (its saved wall time is in the elapsed seconds, not in the
pace). The rate is environment steps (decisions, for DeepRM) per wall second of training,
rollouts, updates and evaluations together; the ETA is the mean wall time per iteration so
far × the iterations left, or the time left to ``max_wall_s`` when that ends the training
first. An evaluation prints a line; between evaluations a shorter line (the same head)
comes when :data:`~dcsim.learn.progress.EVERY` seconds passed without one, so a log shows a
training with a large ``eval_every`` moving.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import platform
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch

from dcsim import __version__
from dcsim.errors import ConfigError
from dcsim.learn import resume as rs
from dcsim.learn.progress import Pace

if TYPE_CHECKING:
    from dcsim.learn.workers.lockstep import LockstepEnvs


# --------------------------------------------------------------------------- the run
def device_for(setting: str) -> torch.device:
    """``cuda`` when asked for, or ``auto`` and CUDA is available; else the CPU."""
    if setting == "cuda" or (setting == "auto" and torch.cuda.is_available()):
        return torch.device("cuda")
    return torch.device("cpu")


#: cuBLAS's workspace setting that makes its GEMMs deterministic (torch's reproducibility
#: notes); cuBLAS reads it when CUDA initialises
CUBLAS_WORKSPACE = ":4096:8"


def make_deterministic(deterministic: bool, device: torch.device) -> dict[str, Any]:
    """Make training on ``device`` reproducible where torch allows; returns what was set
    (recorded in the checkpoint JSON as ``training.determinism``).

    On the CPU dcsim's training is deterministic as it stands (same seed, same machine:
    same weights) and nothing is changed. On CUDA with ``deterministic`` true,
    ``torch.use_deterministic_algorithms(True)`` is set: ops with a deterministic CUDA
    variant use it (the GNN's scatter-add, ``index_add_``, and the backward of indexing
    accumulate with atomic adds otherwise, in an order that varies run to run, so that the
    same seed gives weights that differ in the last bits), and an op without one raises an
    error naming it (:meth:`Trainer.run` turns it into a ConfigError saying to set
    ``deterministic: false``). ``CUBLAS_WORKSPACE_CONFIG=:4096:8`` is set too when the
    environment does not set it; cuBLAS reads it when CUDA initialises, so when CUDA was
    initialised earlier in the process a warning says to set it before starting. With
    ``deterministic`` false nothing is set, and CUDA runs of one seed may differ in the
    last bits."""
    doc: dict[str, Any] = {"deterministic": bool(deterministic), "device": device.type}
    if device.type == "cuda" and deterministic:
        if os.environ.get("CUBLAS_WORKSPACE_CONFIG") not in (CUBLAS_WORKSPACE, ":16:8"):
            if torch.cuda.is_initialized():
                warnings.warn(
                    "deterministic: CUDA was initialised in this process before "
                    f"CUBLAS_WORKSPACE_CONFIG={CUBLAS_WORKSPACE} was set, so cuBLAS may "
                    "not be deterministic; set it in the environment before starting "
                    "(dcsim train sets it itself)", RuntimeWarning, stacklevel=3)
            os.environ["CUBLAS_WORKSPACE_CONFIG"] = CUBLAS_WORKSPACE
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.benchmark = False
    doc["torch_deterministic_algorithms"] = torch.are_deterministic_algorithms_enabled()
    if device.type == "cuda":
        doc["cublas_workspace_config"] = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    return doc


def checkpoint_meta(cfg: Any, *, algorithm: str, command: str | None, iteration: int,
                    iterations: int, wall: float, env_steps: int, metric: str,
                    value: float | None, metric_doc: str, extra: dict[str, Any],
                    best_iteration: int | None, device: str,
                    determinism: dict[str, Any]) -> dict[str, Any]:
    """A trained checkpoint's JSON: how it was trained (``training``: the iteration its
    weights are from, the iterations run when written, the evaluation ``metric`` and its
    ``value``, the trainer's ``extra``, the config) and the library versions."""
    return {"training": {
        "algorithm": algorithm, "command": command,
        "iteration": iteration,        # the iteration these weights are from
        "iterations": iterations,      # iterations run when this file was written
        "env_steps": env_steps,
        "wall_time_s": round(wall, 3),  # training wall time when this file was written
        metric: value, "eval_metric": metric_doc, **extra,
        "best_iteration": best_iteration, "device": device, "determinism": determinism,
        "config": cfg.to_dict()},
        "versions": {"dcsim": __version__, "torch": torch.__version__,
                     "numpy": np.__version__, "python": platform.python_version()}}



# --------------------------------------------------------------------------- the record
@dataclasses.dataclass
class Best:
    """The best policy so far: its evaluation, iteration, weights and the trainer's
    ``info`` about it (kept in the resume state's ``best`` document)."""

    value: float
    iteration: int = -1
    weights: dict[str, np.ndarray] | None = None
    info: dict[str, Any] = dataclasses.field(default_factory=dict)


class TrainingRecord:
    """A training's record in its output folder: ``progress.parquet`` (one row per
    iteration), ``checkpoint.npz``/``.json`` (the best evaluation so far) and
    ``last.npz``/``.json`` (the latest weights).

    ``write(path, weights, meta)`` writes one checkpoint in the trainer's format;
    ``meta(iteration=, iterations=, wall=, env_steps=, value=, best_iteration=, info=)``
    builds its JSON (:func:`checkpoint_meta`); ``higher_is_better`` says which way the
    evaluation improves."""

    def __init__(self, out: Path, *, higher_is_better: bool,
                 write: Callable[[Path, dict[str, np.ndarray], dict[str, Any]], Any],
                 meta: Callable[..., dict[str, Any]]):
        self.paths = {"progress": out / "progress.parquet", "best": out / "checkpoint.npz",
                      "last": out / "last.npz"}
        self.higher_is_better = higher_is_better
        self.write, self.meta = write, meta
        self.rows: list[dict[str, Any]] = []
        self.best = Best(-np.inf if higher_is_better else np.inf)

    def better(self, value: float) -> bool:
        b = self.best
        if b.weights is None:
            return True
        return value > b.value if self.higher_is_better else value < b.value

    def save(self, path: Path, weights: dict[str, np.ndarray], *, iteration: int,
             iterations: int, wall: float, env_steps: int, value: float | None,
             best_iteration: int | None, info: dict[str, Any] | None) -> None:
        self.write(path, weights, self.meta(
            iteration=iteration, iterations=iterations, wall=wall, env_steps=env_steps,
            value=value, best_iteration=best_iteration, info=info))

    def evaluated(self, iteration: int, weights: dict[str, np.ndarray], value: float,
                  info: dict[str, Any], *, wall: float, env_steps: int) -> None:
        """Weights evaluated at ``iteration``: the best checkpoint when they are better,
        the last checkpoint always."""
        at = {"iteration": iteration, "iterations": iteration, "wall": wall,
              "env_steps": env_steps, "value": value, "info": info}
        if self.better(value):
            self.best = Best(value, iteration, weights, info)
            self.save(self.paths["best"], weights, best_iteration=iteration, **at)
        self.save(self.paths["last"], weights, best_iteration=self.best.iteration, **at)

    def unevaluated(self, iteration: int, weights: dict[str, np.ndarray], *, wall: float,
                    env_steps: int) -> None:
        """The last checkpoint of a run stopped between two evaluations."""
        self.save(self.paths["last"], weights, iteration=iteration, iterations=iteration,
                  wall=wall, env_steps=env_steps, value=None, info=None,
                  best_iteration=self.best.iteration if self.best.weights is not None
                  else None)

    def finish(self, iterations: int, *, wall: float, env_steps: int) -> None:
        """The best checkpoint again, saying how many iterations the run had."""
        b = self.best
        self.save(self.paths["best"], b.weights, iteration=b.iteration, iterations=iterations,
                  wall=wall, env_steps=env_steps, value=b.value, best_iteration=b.iteration,
                  info=b.info)

    def state_doc(self) -> dict[str, Any]:
        b = self.best
        return {"value": rs.finite_or_none(b.value), "iteration": b.iteration, **b.info}

    def restore(self, arrays: dict[str, np.ndarray], doc: dict[str, Any]) -> None:
        self.rows = rs.rows_from_array(arrays["progress"])
        if doc["value"] is not None:
            self.best = Best(doc["value"], doc["iteration"], rs.prefixed(arrays, "best."),
                             {k: v for k, v in doc.items() if k not in ("value", "iteration")})


# --------------------------------------------------------------------------- the trainer
class Trainer:
    """A training run of ``cfg`` (a family's ``TrainConfig``): :meth:`run` trains it.

    What a run carries from one iteration to the next is here: ``modules`` (the networks,
    by name: the resume state's ``<name>.`` arrays), ``opt``, the numpy generators
    spawned from ``cfg.seed`` (``rngs``, named :attr:`rng_names`), the lock-step
    environments (``envs``, when the family has them; their episodes are part of the resume
    state), the iteration counter, the environment steps, the record and the wall clock.

    An algorithm overrides :meth:`train_step`; a family's trainer (a subclass of the
    algorithm's) overrides :meth:`setup`, :meth:`evaluate`, :meth:`report`,
    :meth:`weights`, :meth:`write_checkpoint` and :meth:`meta`, and may override
    :meth:`begin` (before the first iteration) and :meth:`finish` (the summary)."""

    #: ``dcsim train KIND``: the trainer a resume state belongs to
    kind: ClassVar[str] = ""
    #: the evaluation's progress column, ``best_<metric>`` in the summary
    metric: ClassVar[str] = ""
    #: which way the evaluation improves
    higher_is_better: ClassVar[bool] = True
    #: the numpy generators spawned from ``cfg.seed``, in spawn order
    rng_names: ClassVar[tuple[str, ...]] = ("episodes", "actions", "minibatches")
    #: the iteration's width in the progress lines
    line_width: ClassVar[int] = 4

    def __init__(self, cfg: Any):
        self.cfg = cfg
        seqs = np.random.SeedSequence(cfg.seed).spawn(len(self.rng_names))
        self.rngs = dict(zip(self.rng_names, (np.random.default_rng(s) for s in seqs),
                             strict=True))
        self.modules: dict[str, torch.nn.Module] = {}
        self.opt: torch.optim.Optimizer | None = None
        self.envs: LockstepEnvs | None = None
        self.obs: list[Any] | None = None
        self.it = 0
        self.env_steps = 0
        self.t0 = time.perf_counter()
        #: the head of the progress lines: iteration, steps/s, ETA
        self.pace = Pace(cfg.iterations, cfg.max_wall_s)
        self.say: Callable[[str], None] = lambda s: None

    # ----------------------------------------------------------------- what subclasses give
    def setup(self) -> None:
        """Build the networks (``modules``), ``opt`` and the environments (``envs``,
        entered into ``closing``), and whatever runs before the iterations (a warm start);
        torch is seeded, ``state`` is the resume state (None for a new run)."""
        raise NotImplementedError

    def begin(self) -> None:
        """After the environments' reset (or the resume state's restore), before the
        first iteration: nothing here."""

    def train_step(self, it: int) -> dict[str, Any]:
        """Iteration ``it``: the rollout and the update; returns its progress row (the
        evaluation's columns NaN, filled by :meth:`evaluate` when it evaluates)."""
        raise NotImplementedError

    def weights(self) -> dict[str, np.ndarray]:
        """The policy's weights in its checkpoint's layout (copies)."""
        raise NotImplementedError

    def evaluate(self, weights: dict[str, np.ndarray], row: dict[str, Any]
                 ) -> tuple[float, dict[str, Any]]:
        """Evaluate ``weights`` (the policy now), filling ``row``'s evaluation columns;
        returns the value of :attr:`metric` and what the record keeps about it (the
        best's ``info``, in the resume state)."""
        raise NotImplementedError

    def report(self, row: dict[str, Any], wall: float) -> None:
        """Say the evaluated iteration's lines (:meth:`head` first)."""
        raise NotImplementedError

    def write_checkpoint(self, path: Path, weights: dict[str, np.ndarray],
                         meta: dict[str, Any]) -> None:
        """Write a checkpoint in the family's format."""
        raise NotImplementedError

    def meta(self, *, iteration: int, iterations: int, wall: float, env_steps: int,
             value: float | None, best_iteration: int | None, info: dict[str, Any] | None
             ) -> dict[str, Any]:
        """A checkpoint's JSON (:func:`checkpoint_meta` for the PPO families)."""
        raise NotImplementedError

    # ----------------------------------------------------------------- the run
    def run(self, out: str | Path, *, command: str | None = None,
            log: Callable[[str], None] | None = print, resume: bool = False,
            stop_after: int | None = None) -> dict[str, Any]:
        """Train into ``out``; returns the summary (:meth:`finish`).

        ``resume``: continue the training whose state ``out`` holds (``resume.npz``,
        :func:`dcsim.learn.resume.load`; a ConfigError when there is none, or ``cfg``
        differs from the recorded config). Reproducibility is set as ``cfg.deterministic``
        says (:func:`make_deterministic`), torch is seeded with ``cfg.seed`` and runs on
        ``cfg.threads`` threads (both settings restored after). A first SIGINT/SIGTERM
        during the iterations, or the end of iteration ``stop_after``, stops the run after
        the iteration under way: ``last.npz``, ``progress.parquet`` and the resume state
        are written and :class:`~dcsim.learn.resume.TrainingInterrupted` is raised. An op
        that torch cannot run deterministically is a ConfigError naming it."""
        cfg = self.cfg
        self.out = out = Path(out)
        self.state = rs.load(out, self.kind, cfg.to_dict(), cfg.max_wall_s) if resume else None
        out.mkdir(parents=True, exist_ok=True)
        self.say = log or (lambda s: None)
        # DeepRM's config has neither setting: it trains on the CPU
        self.device = device = device_for(getattr(cfg, "device", "cpu"))
        threads = torch.get_num_threads()
        was_deterministic = torch.are_deterministic_algorithms_enabled()
        torch.set_num_threads(cfg.threads)
        try:
            self.determinism = make_deterministic(getattr(cfg, "deterministic", True), device)
            torch.manual_seed(cfg.seed)
            with rs.StopRequest(stop_after) as guard, contextlib.ExitStack() as closing:
                self.guard, self.closing = guard, closing
                # a resumed run's command is the one its weights come from
                self.command = command if self.state is None else self.state[1]["command"]
                self.record = TrainingRecord(out, higher_is_better=self.higher_is_better,
                                             write=self.write_checkpoint, meta=self.meta)
                return self.loop()
        except RuntimeError as e:
            if "deterministic" not in str(e):
                raise
            first = str(e).strip().splitlines()[0]
            raise ConfigError(f"deterministic: torch cannot run this training "
                              f"deterministically on {device.type}: {first} (set "
                              "deterministic: false to train without bit-for-bit "
                              "reproducibility)") from None
        finally:
            torch.set_num_threads(threads)
            torch.use_deterministic_algorithms(was_deterministic)

    def loop(self) -> dict[str, Any]:
        """Set up, start (or restore), then the iterations; returns the summary."""
        self.setup()
        self.start()  # the training's clock starts with the workers ready
        self.begin()
        self.guard.arm()  # from here a first SIGINT/SIGTERM stops after the iteration
        for it, stop in self.iterations():
            row = self.train_step(it)
            if self.evaluates(stop):
                weights = self.weights()
                value, info = self.evaluate(weights, row)
                wall = self.wall()
                row["wall_s"] = wall
                self.record.evaluated(it, weights, value, info, wall=wall,
                                      env_steps=self.env_steps)
                self.report(row, wall)
            self.end_iteration(row, stop)
        return self.finish()

    def start(self) -> None:
        """Reset ``envs`` (each with a seed drawn from the episodes' generator), or, with a
        resume state, restore everything from it; ``obs``: the first observations."""
        if self.envs is not None:
            self.obs = self.envs.reset_all()
        self.t0 = time.perf_counter()
        if self.state is None:
            self.pace.begin(0, 0.0, 0)
            return
        arrays, doc = self.state
        for name, module in self.modules.items():
            rs.load_module(module, arrays, f"{name}.")
        assert self.opt is not None
        rs.load_optimizer(self.opt, arrays, doc["optimizer"])
        rs.load_generators(doc["rngs"], **self.rngs)
        rs.load_torch_rng(arrays)
        if self.envs is not None:
            self.obs = self.envs.restore(arrays)
        self.record.restore(arrays, doc["best"])
        self.it = doc["iteration"]
        # DeepRM's states from before this base have no env_steps: its rows count them
        self.env_steps = doc["env_steps"] if "env_steps" in doc else int(
            sum(r.get("decisions", 0) for r in self.record.rows))
        self.t0 -= doc["wall_s"]
        self.pace.begin(self.it, self.wall(), self.env_steps)
        self.say(f"resuming after iteration {self.it} of {self.cfg.iterations} from "
                 f"{self.out / rs.RESUME_FILE}")

    def wall(self) -> float:
        """Seconds of training so far (a resumed run's saved wall time included)."""
        return time.perf_counter() - self.t0

    def iterations(self) -> Iterator[tuple[int, bool]]:
        """``(iteration, stop)`` for each iteration still to run (``stop``: the last one,
        by the count or by ``max_wall_s``)."""
        cfg = self.cfg
        while self.it < cfg.iterations:
            self.it += 1
            stop = self.it == cfg.iterations or (
                cfg.max_wall_s is not None and self.wall() >= cfg.max_wall_s)
            yield self.it, stop
            if stop:
                break

    def evaluates(self, stop: bool) -> bool:
        """Whether this iteration ends with an evaluation."""
        return self.it % self.cfg.eval_every == 0 or stop

    def head(self, wall: float | None = None) -> str:
        """The head of this iteration's progress line: ``iter 40/200``, the wall time,
        the steps and steps/s, the ETA (:class:`Pace`)."""
        return self.pace.head(self.it, self.wall() if wall is None else wall,
                              self.env_steps, width=self.line_width)

    def save_state(self, stopped: str | None) -> None:
        """Write the resume state (:func:`dcsim.learn.resume.save`)."""
        assert self.opt is not None
        envs = {} if self.envs is None else self.envs.arrays()
        arrays, opt_doc = rs.learner_arrays(
            self.modules, self.opt, self.record.best.weights,
            {**envs, "progress": rs.rows_array(self.record.rows)})
        rs.save(self.out, kind=self.kind, config=self.cfg.to_dict(), command=self.command,
                iteration=self.it, iterations=self.cfg.iterations, wall_s=self.wall(),
                stopped=stopped, arrays=arrays, doc={
                    "env_steps": self.env_steps, "optimizer": opt_doc,
                    "rngs": rs.generator_states(**self.rngs),
                    "best": self.record.state_doc()})

    def end_iteration(self, row: dict[str, Any], stop: bool) -> None:
        """The iteration's ``row`` recorded; on a halt (Ctrl-C, ``stop_after``) between
        two evaluations the last checkpoint is written; the progress table and the resume
        state as :func:`dcsim.learn.resume.end_iteration` says."""
        it, rec = self.it, self.record
        rec.rows.append(row)
        if it % self.cfg.eval_every != 0 and not stop and self.pace.due(self.wall()):
            self.say(self.head())  # a long stretch between evaluations: how far it is
        halt = not stop and self.guard(it)  # Ctrl-C (or stop_after): stop here, resumable
        if halt and it % self.cfg.eval_every != 0:  # between evaluations: not evaluated
            rec.unevaluated(it, self.weights(), wall=row["wall_s"], env_steps=self.env_steps)
        rs.end_iteration(self.out, iteration=it, iterations=self.cfg.iterations,
                         eval_every=self.cfg.eval_every, stop=stop, halt=halt,
                         rows=rec.rows, progress=rec.paths["progress"],
                         save_state=self.save_state)

    def finish(self) -> dict[str, Any]:
        """The best checkpoint written a last time; returns the training's summary (the
        best iteration and its evaluation, ``best_<metric>``, the iterations, env steps,
        wall time and the output files)."""
        wall = self.wall()
        self.record.finish(self.it, wall=wall, env_steps=self.env_steps)
        best = self.record.best
        return {"best_iteration": best.iteration, f"best_{self.metric}": best.value,
                "iterations": self.it, "env_steps": self.env_steps, "wall_time_s": wall,
                **{k: str(v) for k, v in self.record.paths.items()}}


# --------------------------------------------------------------------------- the pace
