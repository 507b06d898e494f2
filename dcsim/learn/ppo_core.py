"""The PPO core under dcsim's two PPO trainers (:mod:`dcsim.learn.ppo`, Nara's GNN policy, and
:mod:`dcsim.learn.vmr2l_ppo`, VMR²L's two-stage transformer), as :mod:`dcsim.checkpoints`
sits under the three checkpoint formats: what is the same algorithm in both lives here once,
and each trainer keeps only its rollout (how its network turns observations into actions)
and its network.

* :func:`run` — what ``train()`` does around a trainer's body: the resume state read and
  checked, the output folder, the device, torch's thread count, reproducibility on a GPU
  (:func:`make_deterministic`) and the stop request (Ctrl-C) around the iterations.
* :func:`gae` — generalized advantage estimation over a ``(steps, envs)`` rollout, cut at
  episode ends.
* :func:`update` — the PPO update: ``update_epochs`` passes over shuffled minibatches of
  ``minibatch_size``, the clipped policy loss, the (clipped) value loss × ``vf_coef``, the
  entropy bonus × ``ent_coef``, one Adam step per minibatch with gradient-norm clipping,
  and the early stop on the approximate KL. A trainer gives it a function that
  re-evaluates a minibatch (new log-probabilities, entropies, values).
  The loss itself is :func:`dcsim.learn.ppo_loss.ppo_loss`, which the update's parts
  (:mod:`dcsim.learn.shards`) share.
* :class:`TrainingRecord` — the training's record: the best and the last checkpoint (with
  their JSON, :func:`checkpoint_meta`), the progress rows (``progress.parquet``).
* :class:`Learner` — what a run carries from one iteration to the next (iteration counter,
  learning-rate schedule, random generators, the lock-step environments, the record) and
  its resume state (``resume.npz``, :mod:`dcsim.learn.resume`).

The trainers differ in a few settings, each a parameter here rather than a second copy:
the value clip range (Nara ``10 × clip_coef``, VMR²L ``clip_coef``), where the KL early stop
looks (Nara after each minibatch, VMR²L at the end of an epoch on the epoch's mean), the
networks whose gradient norms are clipped separately, and whether a higher or a lower
evaluation is better.

Every number is computed in the same order as in the trainers this replaces, so a
training gives the same weights, bit for bit, as before the core was shared.
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
from typing import Any, Literal

import numpy as np
import torch

from dcsim import __version__
from dcsim.errors import ConfigError
from dcsim.learn import resume as rs
from dcsim.learn.lockstep import LockstepEnvs
from dcsim.learn.pace import Pace
from dcsim.learn.ppo_loss import ppo_loss
from dcsim.learn.shards import Shards

#: the statistics of an update, each the mean over its minibatches (progress columns)
UPDATE_STATS = ("pg_loss", "v_loss", "entropy", "approx_kl", "clipfrac")


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
    error naming it (:func:`run` turns it into a ConfigError saying to set
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


@dataclasses.dataclass
class Context:
    """What :func:`run` hands a trainer's body: the output folder, the command recorded in
    the checkpoints (a resumed run's is the one it started with), the log, the device, the
    resume state (None for a new run), the stop request, what reproducibility settings
    were made (:func:`make_deterministic`) and ``closing``, an exit stack that closes what
    is entered into it (the environment workers) however the body ends."""

    out: Path
    command: str | None
    say: Callable[[str], None]
    device: torch.device
    state: tuple[dict[str, np.ndarray], dict[str, Any]] | None
    guard: rs.StopRequest
    determinism: dict[str, Any]
    closing: contextlib.ExitStack


def run(kind: str, cfg: Any, out: str | Path, body: Callable[[Context], dict[str, Any]], *,
        command: str | None, log: Callable[[str], None] | None, resume: bool,
        stop_after: int | None) -> dict[str, Any]:
    """What ``train()`` does around a trainer's ``body(context)`` (:class:`Context`):
    with ``resume`` the state of ``out`` is read and checked against ``cfg``
    (:func:`dcsim.learn.resume.load`), reproducibility is set as ``cfg.deterministic``
    says (:func:`make_deterministic`), torch is seeded with ``cfg.seed`` and runs on
    ``cfg.threads`` threads (both settings restored after), and a stop request (Ctrl-C,
    ``stop_after``) is armed around the body. An op that torch cannot run
    deterministically is a ConfigError naming it."""
    out = Path(out)
    state = rs.load(out, kind, cfg.to_dict(), cfg.max_wall_s) if resume else None
    out.mkdir(parents=True, exist_ok=True)
    say = log or (lambda s: None)
    device = device_for(cfg.device)
    threads = torch.get_num_threads()
    was_deterministic = torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(cfg.threads)
    try:
        determinism = make_deterministic(cfg.deterministic, device)
        torch.manual_seed(cfg.seed)
        with rs.StopRequest(stop_after) as guard, contextlib.ExitStack() as closing:
            if state is not None:
                command = state[1]["command"]  # the command these weights come from
            return body(Context(out, command, say, device, state, guard, determinism,
                                closing))
    except RuntimeError as e:
        if "deterministic" not in str(e):
            raise
        first = str(e).strip().splitlines()[0]
        raise ConfigError(f"deterministic: torch cannot run this training deterministically "
                          f"on {device.type}: {first} (set deterministic: false to train "
                          "without bit-for-bit reproducibility)") from None
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(was_deterministic)


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


# --------------------------------------------------------------------------- the algorithm
def gae(rewards: np.ndarray, values: np.ndarray, dones: np.ndarray, next_value: np.ndarray,
        gamma: float, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """Advantages and returns (float32, ``(steps, envs)``) by GAE(γ, λ): ``values`` of the
    stored states, ``next_value`` of the states after the last step, an episode end
    (``dones``) cutting the sums."""
    T, B = rewards.shape
    adv = np.zeros((T, B), dtype=np.float32)
    last = np.zeros(B, dtype=np.float32)
    for t in reversed(range(T)):
        nv = next_value if t == T - 1 else values[t + 1]
        nonterm = 1.0 - dones[t]
        delta = rewards[t] + gamma * nv * nonterm - values[t]
        last = delta + gamma * lam * nonterm * last
        adv[t] = last
    return adv, adv + values


@dataclasses.dataclass(frozen=True)
class Settings:
    """The update's hyper-parameters (a trainer's config fields of the same names, and
    the two that differ between the trainers: ``value_clip``, the value clip range, and
    ``kl_stop``, where the early stop on ``target_kl`` looks)."""

    update_epochs: int
    minibatch_size: int
    clip_coef: float
    value_clip: float
    ent_coef: float
    vf_coef: float
    max_grad_norm: float
    norm_adv: bool
    clip_vloss: bool
    target_kl: float | None
    #: minibatch: stop the update when one minibatch's approximate KL exceeds target_kl;
    #: epoch: after an epoch whose mean approximate KL exceeds it
    kl_stop: Literal["minibatch", "epoch"]

    @classmethod
    def of(cls, cfg: Any, *, value_clip: float, kl_stop: Literal["minibatch", "epoch"]
           ) -> Settings:
        names = [f.name for f in dataclasses.fields(cls) if f.name not in
                 ("value_clip", "kl_stop")]
        return cls(**{n: getattr(cfg, n) for n in names}, value_clip=value_clip,
                   kl_stop=kl_stop)


@dataclasses.dataclass
class Batch:
    """A rollout's per-decision tensors, flattened (``steps × envs``): the log-probability
    of the action taken, its advantage, the return and the value estimate."""

    logp: torch.Tensor
    adv: torch.Tensor
    ret: torch.Tensor
    value: torch.Tensor

    @classmethod
    def of(cls, logp: np.ndarray, adv: np.ndarray, ret: np.ndarray, value: np.ndarray,
           device: torch.device) -> Batch:
        return cls(*(torch.as_tensor(a.reshape(-1), device=device)
                     for a in (logp, adv, ret, value)))


#: re-evaluates minibatch ``mb`` (its indices, as numpy and as a tensor): the new
#: log-probabilities of the actions taken, the entropies and the values, each per decision
Evaluate = Callable[[np.ndarray, torch.Tensor], tuple[torch.Tensor, torch.Tensor, torch.Tensor]]


def update(s: Settings, batch: Batch, evaluate: Evaluate, opt: torch.optim.Optimizer,
           rng: np.random.Generator, clip: list[list[torch.nn.Parameter]], *,
           critic_only: bool = False, shards: Shards | None = None) -> dict[str, float]:
    """One PPO update on ``batch``; returns the means of :data:`UPDATE_STATS` over the
    minibatches. ``clip``: the parameter groups whose gradient norms are clipped (each to
    ``max_grad_norm``); ``critic_only``: the loss is the value loss alone (a frozen
    policy gets no gradient); ``shards``: each minibatch's gradient summed over parts
    (``update_shards`` > 1, :mod:`dcsim.learn.shards`; ``evaluate`` is then unused)."""
    n = len(batch.logp)
    device = batch.logp.device
    stats: dict[str, list[float]] = {k: [] for k in UPDATE_STATS}
    for _epoch in range(s.update_epochs):
        perm = rng.permutation(n)
        kls: list[float] = []
        for start in range(0, n, s.minibatch_size):
            mb = perm[start:start + s.minibatch_size]
            mbt = torch.as_tensor(mb, device=device)
            mb_adv = batch.adv[mbt]
            if s.norm_adv and len(mb) > 1:
                mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
            if shards is None:
                opt.zero_grad(set_to_none=True)
                mb_stats = _backward(s, batch, evaluate(mb, mbt), mbt, mb_adv, critic_only)
            else:
                mb_stats = shards.gradient(mb, mb_adv.cpu().numpy(), s, critic_only)
            for params in clip:
                torch.nn.utils.clip_grad_norm_(params, s.max_grad_norm)
            opt.step()
            for k, x in zip(UPDATE_STATS, mb_stats, strict=True):
                stats[k].append(x)
            kl = mb_stats[3]
            kls.append(kl)
            if s.kl_stop == "minibatch" and s.target_kl is not None and kl > s.target_kl:
                return _means(stats)
        if s.kl_stop == "epoch" and s.target_kl is not None and np.mean(kls) > s.target_kl:
            break
    return _means(stats)


def _backward(s: Settings, batch: Batch, evaluated: tuple[torch.Tensor, ...],
              mbt: torch.Tensor, mb_adv: torch.Tensor, critic_only: bool
              ) -> tuple[float, ...]:
    """A minibatch's loss differentiated in one pass (``update_shards`` 1): the networks'
    ``.grad`` hold its gradient; returns its statistics (:data:`UPDATE_STATS`)."""
    new_logp, entropy, v = evaluated
    total, stats = ppo_loss(s, new_logp, entropy, v, batch.logp[mbt], mb_adv, batch.ret[mbt],
                            batch.value[mbt], torch.mean, critic_only)
    total.backward()
    return stats


def _means(stats: dict[str, list[float]]) -> dict[str, float]:
    return {k: float(np.mean(v)) for k, v in stats.items()}


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


class Rollout:
    """One iteration's rollout of ``steps`` lock-steps of ``envs`` environments: the
    observation batches (:meth:`observe`), the log-probabilities of the actions taken
    (``logp``, filled by the trainer), the rewards and episode ends (:meth:`stepped`), and
    per episode that ended its return and ``metric(info)`` (the trainer's training
    statistic, e.g. the acceptance ratio); its duration for the steps/s column."""

    def __init__(self, steps: int, envs: int, metric: Callable[[dict[str, Any]], float]):
        self.steps, self.envs, self.metric = steps, envs, metric
        self.store: list[dict[str, np.ndarray]] = []
        self.logp = np.zeros((steps, envs), dtype=np.float32)
        self.rewards = np.zeros((steps, envs), dtype=np.float32)
        self.dones = np.zeros((steps, envs), dtype=np.float32)
        self.ended: list[float] = []
        self.returns: list[float] = []
        self.t0 = time.perf_counter()
        self.seconds = float("nan")

    def observe(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.store.append(batch)
        return batch

    def stepped(self, t: int, step: Any) -> list[Any]:
        """Lock-step ``t``'s result (:class:`~dcsim.learn.lockstep.Step`) recorded; the
        next observations."""
        self.rewards[t], self.dones[t] = step.rewards, step.dones
        for _, info, ret in step.ended:
            self.ended.append(self.metric(info))
            self.returns.append(ret)
        if t == self.steps - 1:
            self.seconds = time.perf_counter() - self.t0
        return step.obs

    def flat(self) -> dict[str, np.ndarray]:
        """The stored observations as one batch (``steps × envs`` rows, step-major)."""
        return {k: np.concatenate([s[k] for s in self.store]) for k in self.store[0]}

    def row(self, iteration: int, *, wall: float, env_steps: int, train: str,
            stats: dict[str, float], lr: float, evals: tuple[str, ...]) -> dict[str, Any]:
        """The iteration's progress row: its counters (``wall_s``: seconds since the first
        iteration began; ``steps_per_s``: the rollout's decisions per second of rollout,
        the update excluded), the means over the episodes that ended in it (column
        ``train`` of the metric, and ``train_return``), the update's statistics, the
        learning rate and the evaluation columns (NaN until evaluated)."""
        def mean(v: list[float]) -> float:
            return float(np.mean(v)) if v else float("nan")
        return {"iteration": iteration, "wall_s": wall, "env_steps": env_steps,
                "steps_per_s": self.steps * self.envs / self.seconds,
                "episodes": len(self.returns), train: mean(self.ended),
                "train_return": mean(self.returns), **stats, "lr": lr,
                **dict.fromkeys(evals, float("nan"))}


# --------------------------------------------------------------------------- the learner
class Learner:
    """What a PPO run carries between iterations, and its resume state.

    ``modules`` (the networks, by name), ``opt``, the random generators spawned from
    ``cfg.seed`` (``rngs``: episodes, actions, minibatches), the lock-step environments
    (``envs``) and the record. :meth:`iterations` runs the loop's head (counter, stop on
    the last iteration or ``max_wall_s``, the learning rate annealed linearly to 0);
    :meth:`end_iteration` its tail (the progress row, a halt on Ctrl-C, the resume
    state)."""

    def __init__(self, kind: str, cfg: Any, out: Path, command: str | None,
                 modules: dict[str, torch.nn.Module], opt: torch.optim.Optimizer,
                 record: TrainingRecord):
        self.kind, self.cfg, self.out, self.command = kind, cfg, out, command
        self.modules, self.opt, self.record = modules, opt, record
        seqs = np.random.SeedSequence(cfg.seed).spawn(3)
        self.rngs = dict(zip(("episodes", "actions", "minibatches"),
                             (np.random.default_rng(s) for s in seqs), strict=True))
        self.envs: LockstepEnvs | None = None
        self.it = 0
        self.env_steps = 0
        self.t0 = time.perf_counter()
        #: the head of the progress lines: iteration, steps/s, ETA (dcsim.learn.pace)
        self.pace = Pace(cfg.iterations, cfg.max_wall_s)
        self.say: Callable[[str], None] = lambda s: None

    def start(self, envs: LockstepEnvs, state: tuple[dict[str, np.ndarray], dict[str, Any]]
              | None, say: Callable[[str], None]) -> list[Any]:
        """Reset ``envs`` (each with a seed drawn from the episodes' generator), or, with a
        resume ``state``, restore everything from it; returns the first observations."""
        self.envs = envs
        self.say = say
        obs = envs.reset_all()
        self.t0 = time.perf_counter()
        if state is None:
            self.pace.begin(0, 0.0, 0)
            return obs
        arrays, doc = state
        for name, module in self.modules.items():
            rs.load_module(module, arrays, f"{name}.")
        rs.load_optimizer(self.opt, arrays, doc["optimizer"])
        rs.load_generators(doc["rngs"], **self.rngs)
        rs.load_torch_rng(arrays)
        obs = envs.restore(arrays)
        self.record.restore(arrays, doc["best"])
        self.it, self.env_steps = doc["iteration"], doc["env_steps"]
        self.t0 -= doc["wall_s"]
        self.pace.begin(self.it, self.wall(), self.env_steps)
        say(f"resuming after iteration {self.it} of {self.cfg.iterations} from "
            f"{self.out / rs.RESUME_FILE}")
        return obs

    def wall(self) -> float:
        return time.perf_counter() - self.t0

    def save_state(self, stopped: str | None) -> None:
        assert self.envs is not None
        arrays, opt_doc = rs.learner_arrays(
            self.modules, self.opt, self.record.best.weights,
            {**self.envs.arrays(), "progress": rs.rows_array(self.record.rows)})
        rs.save(self.out, kind=self.kind, config=self.cfg.to_dict(), command=self.command,
                iteration=self.it, iterations=self.cfg.iterations, wall_s=self.wall(),
                stopped=stopped, arrays=arrays, doc={
                    "env_steps": self.env_steps, "optimizer": opt_doc,
                    "rngs": rs.generator_states(**self.rngs),
                    "best": self.record.state_doc()})

    def iterations(self) -> Iterator[tuple[int, bool, float]]:
        """``(iteration, stop, lr)`` for each iteration still to run (``stop``: the last
        one), the optimiser's learning rate set to ``lr``."""
        cfg = self.cfg
        while self.it < cfg.iterations:
            self.it += 1
            it = self.it
            stop = it == cfg.iterations or (
                cfg.max_wall_s is not None and self.wall() >= cfg.max_wall_s)
            lr = cfg.lr * (1.0 - (it - 1) / cfg.iterations) if cfg.anneal_lr else cfg.lr
            for group in self.opt.param_groups:
                group["lr"] = lr
            yield it, stop, lr
            if stop:
                break

    def evaluates(self, stop: bool) -> bool:
        """Whether this iteration ends with an evaluation."""
        return self.it % self.cfg.eval_every == 0 or stop

    def head(self, wall: float | None = None) -> str:
        """The head of this iteration's progress line: ``iter 40/200``, the wall time,
        the steps and steps/s, the ETA (:class:`~dcsim.learn.pace.Pace`)."""
        return self.pace.head(self.it, self.wall() if wall is None else wall,
                              self.env_steps)

    def end_iteration(self, row: dict[str, Any], stop: bool, guard: rs.StopRequest,
                      weights: Callable[[], dict[str, np.ndarray]]) -> None:
        """The iteration's ``row`` recorded; on a halt (Ctrl-C, ``stop_after``) between
        two evaluations the last checkpoint is written with ``weights()``; the progress
        table and the resume state as :func:`dcsim.learn.resume.end_iteration` says."""
        it, rec = self.it, self.record
        rec.rows.append(row)
        if it % self.cfg.eval_every != 0 and not stop and self.pace.due(self.wall()):
            self.say(self.head())  # a long stretch between evaluations: how far it is
        halt = not stop and guard(it)  # Ctrl-C (or stop_after): stop here, resumable
        if halt and it % self.cfg.eval_every != 0:  # between evaluations: not evaluated
            rec.unevaluated(it, weights(), wall=row["wall_s"], env_steps=self.env_steps)
        rs.end_iteration(self.out, iteration=it, iterations=self.cfg.iterations,
                         eval_every=self.cfg.eval_every, stop=stop, halt=halt,
                         rows=rec.rows, progress=rec.paths["progress"],
                         save_state=self.save_state)

    def finish(self, metric: str) -> dict[str, Any]:
        """The best checkpoint written a last time; returns the training's summary (the
        best iteration and its evaluation, ``best_<metric>``, the iterations, env steps,
        wall time and the output files)."""
        wall = self.wall()
        self.record.finish(self.it, wall=wall, env_steps=self.env_steps)
        best = self.record.best
        return {"best_iteration": best.iteration, f"best_{metric}": best.value,
                "iterations": self.it, "env_steps": self.env_steps, "wall_time_s": wall,
                **{k: str(v) for k, v in self.record.paths.items()}}
