"""Stopping a training run at a safe point, and resuming it (``dcsim train ... --resume``).

**Stopping.** :class:`StopRequest` wraps a trainer's iteration loop: the first SIGINT
(Ctrl-C) or SIGTERM only sets a flag, and the trainer stops at the end of the iteration
under way, writes ``last.npz``/``.json``, ``progress.parquet`` and its resume state, and
raises :class:`TrainingInterrupted` (``dcsim train`` turns it into one line and exit status
130). A second signal raises ``KeyboardInterrupt`` at once (``dcsim train``: one line, exit
130, no traceback); the output folder then keeps the state last saved.

**The resume state** is ``resume.npz`` in the output folder, written (atomically, one file)
whenever the trainer writes ``last.npz`` (every ``eval_every`` iterations and at the end)
and when it is stopped, so a run killed outright resumes from its last evaluation. It holds
everything the next iteration depends on: the iteration counter (the learning-rate schedule
is a function of it), the networks' parameters, the optimiser's state (Adam's moments and
step counts) and learning rate, the state of every random generator (the numpy generators'
bit-generator states, torch's), the environments' episodes in progress, the best policy so
far, the progress rows and the training wall time so far. An environment is a live
simulation (Nara's is a SimPy process), not arrays: an episode in progress is kept as the
seed its environment was reset with and the actions taken since (:class:`EpisodeLog`), and
rebuilt by replaying them. Arrays are plain numbers and the document is JSON stored as a
uint8 array (:func:`dcsim.checkpoints.write_state`); nothing is pickled, and it is read with
``allow_pickle=False``.

**Resuming** (:func:`load`) refuses, naming the reason, when the folder has no state, when
the state is another trainer's, when the training already ran all its iterations, and when
the config differs from the recorded one (naming each differing field; ``max_wall_s``, a
budget of wall time over the whole run, may change). A resumed run gives the same weights,
bit for bit on the same machine, as the run that was never stopped.
"""

from __future__ import annotations

import io
import json
import math
import os
import signal
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from dcsim import __version__
from dcsim.checkpoints import read_state, write_state
from dcsim.errors import ConfigError
from dcsim.learn.workers.process import replay_episode
from dcsim.results.writer import write_atomic

RESUME_FILE = "resume.npz"
FORMAT = "dcsim-train-resume"
FORMAT_VERSION = 1
#: config fields that may differ on --resume: max_wall_s is a budget for the whole run, and
#: the number of processes stepping the environments changes no result
MAY_CHANGE = frozenset({"max_wall_s", "num_workers"})


class TrainingInterrupted(Exception):
    """A training run stopped on request after ``iteration`` of ``iterations``, its
    ``last.npz`` and resume state written to ``out``."""

    def __init__(self, iteration: int, iterations: int, out: Path):
        self.iteration, self.iterations, self.out = iteration, iterations, Path(out)
        super().__init__(f"stopped after iteration {iteration} of {iterations}; the state to "
                         f"resume from is in {out}")


class StopRequest:
    """The stop flag of a trainer's iteration loop (a context manager).

    Inside, once :meth:`arm`-ed (when the iterations start), the first SIGINT or SIGTERM
    sets :attr:`requested` (the trainer stops at the end of the iteration under way); a
    second, or one before the iterations start (nothing to save yet), raises
    ``KeyboardInterrupt`` at once. The handlers are installed only in the main thread
    (elsewhere Python cannot), and not over a signal that is ignored (``nohup``); the
    previous ones come back on exit.
    ``stop_after``: also stop after that iteration (tests, and what a signal would do).
    """

    def __init__(self, stop_after: int | None = None):
        self.stop_after = stop_after
        self.requested = False
        self.armed = False
        self._old: dict[int, Any] = {}

    def arm(self) -> None:
        self.armed = True

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                old = signal.getsignal(sig)
                if old is not signal.SIG_IGN and old is not None:  # None: set outside Python
                    self._old[sig] = old
                    signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old.clear()

    def _handle(self, signum, frame) -> None:
        if self.requested or not self.armed:
            raise KeyboardInterrupt
        self.requested = True
        try:  # os.write, not print: the main thread may be inside a buffered write now
            os.write(2, b"\ninterrupted: stopping at the end of this iteration and saving "
                        b"(interrupt again to stop at once)\n")
        except OSError:  # no stderr
            pass

    def __call__(self, iteration: int) -> bool:
        """Whether to stop after ``iteration`` (just finished)."""
        return self.requested or (self.stop_after is not None
                                  and iteration >= self.stop_after)


# --------------------------------------------------------------------------- pieces
class EpisodeLog:
    """Per environment, the seed of its episode in progress and the actions taken since
    its reset: enough to rebuild the environment by replaying them. ``width``: integers
    per action (1 for a discrete action, 2 for VMR²L's (VM, slot))."""

    def __init__(self, n: int, width: int = 1):
        self.width = width
        self.seeds = [0] * n
        self.actions: list[list[Any]] = [[] for _ in range(n)]

    def reset(self, i: int, seed: int) -> None:
        self.seeds[i] = int(seed)
        self.actions[i] = []

    def step(self, i: int, action: Any) -> None:
        self.actions[i].append(action)

    def arrays(self) -> dict[str, np.ndarray]:
        flat = [a for acts in self.actions for a in acts]
        return {"episodes.seeds": np.array(self.seeds, dtype=np.int64),
                "episodes.lengths": np.array([len(a) for a in self.actions], dtype=np.int64),
                "episodes.actions": np.array(flat, dtype=np.int64).reshape(
                    len(flat), self.width)}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], n: int, width: int = 1
                    ) -> EpisodeLog:
        log = cls(n, width)
        seeds, lengths = arrays["episodes.seeds"], arrays["episodes.lengths"]
        acts = arrays["episodes.actions"]
        if len(seeds) != n or len(lengths) != n or acts.shape != (int(lengths.sum()), width):
            raise ConfigError(f"the resume state has {len(seeds)} environments' episodes "
                              f"(the config runs {n})")
        ends = np.cumsum(lengths)
        for i in range(n):
            log.seeds[i] = int(seeds[i])
            rows = acts[ends[i] - lengths[i]:ends[i]]
            log.actions[i] = ([int(r[0]) for r in rows] if width == 1 else
                              [tuple(int(x) for x in r) for r in rows])
        return log

    def replay(self, envs: list) -> list[Any]:
        """Reset each of ``envs`` with its seed and replay its actions; returns the
        observations they end on."""
        return [replay_episode(env, self.seeds[i], self.actions[i])
                for i, env in enumerate(envs)]


def module_arrays(module: torch.nn.Module, prefix: str) -> dict[str, np.ndarray]:
    """Every parameter and buffer of ``module`` as ``prefix + name``."""
    return {prefix + k: v.detach().cpu().numpy().copy()
            for k, v in module.state_dict().items()}


def load_module(module: torch.nn.Module, arrays: dict[str, np.ndarray], prefix: str) -> None:
    sd = {k[len(prefix):]: torch.from_numpy(v.copy()) for k, v in arrays.items()
          if k.startswith(prefix)}
    try:
        module.load_state_dict(sd)
    except RuntimeError as e:
        raise ConfigError(f"the resume state's {prefix.rstrip('.')} network does not fit: "
                          f"{e}") from None


def optimizer_state(opt: torch.optim.Optimizer) -> tuple[dict[str, np.ndarray],
                                                         dict[str, Any]]:
    """The optimiser's per-parameter state (moments, step counts) as arrays
    ``opt.<index>.<name>``, and its class and learning rates as a JSON document."""
    sd = opt.state_dict()
    arrays = {}
    for idx, st in sd["state"].items():
        for k, v in st.items():
            if not torch.is_tensor(v):
                raise TypeError(f"optimizer state {k!r} is a {type(v).__name__}")
            arrays[f"opt.{idx}.{k}"] = v.detach().cpu().numpy().copy()
    return arrays, {"class": type(opt).__name__, "lr": [g["lr"] for g in sd["param_groups"]]}


def load_optimizer(opt: torch.optim.Optimizer, arrays: dict[str, np.ndarray],
                   doc: dict[str, Any]) -> None:
    if doc["class"] != type(opt).__name__:
        raise ConfigError(f"the resume state's optimizer is {doc['class']}, not "
                          f"{type(opt).__name__}")
    state: dict[int, dict[str, torch.Tensor]] = {}
    for name, a in arrays.items():
        if name.startswith("opt."):
            _, idx, key = name.split(".", 2)
            state.setdefault(int(idx), {})[key] = torch.from_numpy(a.copy())
    groups = opt.state_dict()["param_groups"]
    for g, lr in zip(groups, doc["lr"], strict=True):
        g["lr"] = lr
    opt.load_state_dict({"state": state, "param_groups": groups})


def torch_rng_arrays() -> dict[str, np.ndarray]:
    out = {"rng.torch": torch.get_rng_state().numpy().copy()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        out["rng.torch_cuda"] = torch.cuda.get_rng_state().numpy().copy()
    return out


def load_torch_rng(arrays: dict[str, np.ndarray]) -> None:
    torch.set_rng_state(torch.from_numpy(arrays["rng.torch"].copy()))
    if "rng.torch_cuda" in arrays and torch.cuda.is_available():
        torch.cuda.set_rng_state(torch.from_numpy(arrays["rng.torch_cuda"].copy()))


def generator_states(**rngs: np.random.Generator) -> dict[str, Any]:
    """The numpy generators' bit-generator states (JSON: PCG64's are big integers)."""
    return {k: g.bit_generator.state for k, g in rngs.items()}


def load_generators(states: dict[str, Any], **rngs: np.random.Generator) -> None:
    for k, g in rngs.items():
        g.bit_generator.state = states[k]


def rows_array(rows: list[dict[str, Any]]) -> np.ndarray:
    """The progress rows as the bytes of their Parquet table (uint8)."""
    data = pd.DataFrame(rows).to_parquet(index=False) if rows else b""
    return np.frombuffer(data, dtype=np.uint8)


def rows_from_array(a: np.ndarray) -> list[dict[str, Any]]:
    if a.size == 0:
        return []
    return pd.read_parquet(io.BytesIO(a.tobytes())).to_dict("records")


# --------------------------------------------------------------------------- the file
def stop_reason(halt: bool, stop: bool, iteration: int, iterations: int) -> str | None:
    """What a state written after ``iteration`` records as ``stopped`` (see :func:`save`)."""
    if halt:
        return "interrupted"
    if iteration == iterations:
        return "finished"
    return "max_wall_s" if stop else None


def end_iteration(out: Path, *, iteration: int, iterations: int, eval_every: int,
                  stop: bool, halt: bool, rows: list[dict[str, Any]], progress: Path,
                  save_state: Any) -> None:
    """What every trainer does after an iteration: at an evaluation, a stop or a halt, write
    the progress table and the resume state (:func:`stop_reason` says why); on a halt
    (Ctrl-C, ``stop_after``) raise :class:`TrainingInterrupted`."""
    if iteration % eval_every == 0 or stop or halt:
        write_atomic(progress, pd.DataFrame(rows).to_parquet(index=False))
        save_state(stop_reason(halt, stop, iteration, iterations))
    if halt:
        raise TrainingInterrupted(iteration, iterations, out)


def learner_arrays(modules: dict[str, torch.nn.Module], opt: torch.optim.Optimizer,
                   best: dict[str, np.ndarray] | None, extra: dict[str, np.ndarray]
                   ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """What every trainer's state holds as arrays: each module's parameters (under
    ``<name>.``), torch's generator, the optimiser's state, the best weights so far (under
    ``best.``) and the trainer's own ``extra``; with the optimiser's JSON part."""
    arrays: dict[str, np.ndarray] = {}
    for name, module in modules.items():
        arrays.update(module_arrays(module, f"{name}."))
    arrays.update(torch_rng_arrays())
    arrays.update(extra)
    opt_arrays, opt_doc = optimizer_state(opt)
    arrays.update(opt_arrays)
    if best is not None:
        arrays.update({f"best.{k}": v for k, v in best.items()})
    return arrays, opt_doc


def _json_config(cfg_dict: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(cfg_dict))


def save(out: Path, *, kind: str, config: dict[str, Any], command: str | None,
         iteration: int, iterations: int, wall_s: float, stopped: str | None,
         arrays: dict[str, np.ndarray], doc: dict[str, Any]) -> Path:
    """Write ``out/resume.npz``. ``stopped``: None while training goes on, ``interrupted``
    (stopped on request), ``max_wall_s`` (stopped by the wall-time budget) or
    ``finished`` (ran all its iterations)."""
    return write_state(Path(out) / RESUME_FILE, arrays, {
        "format": FORMAT, "format_version": FORMAT_VERSION, "trainer": kind,
        "iteration": iteration, "iterations": iterations, "wall_s": wall_s,
        "stopped": stopped, "command": command, "config": _json_config(config),
        "dcsim_version": __version__, "torch": torch.__version__, **doc})


def saved_iteration(out: Path) -> int | None:
    """The iteration of ``out``'s resume state (None when there is none readable)."""
    try:
        _, doc = read_state(Path(out) / RESUME_FILE, FORMAT)
    except ConfigError:
        return None
    return doc.get("iteration")


def config_differences(recorded: Any, current: Any, prefix: str = "") -> list[str]:
    """``field: value (recorded: value)`` for each field that differs (dotted into
    sections)."""
    if isinstance(recorded, dict) and isinstance(current, dict):
        out = []
        for k in [*recorded, *(k for k in current if k not in recorded)]:
            if not prefix and k in MAY_CHANGE:
                continue
            missing = "(absent)"
            out += config_differences(recorded.get(k, missing), current.get(k, missing),
                                      f"{prefix}{k}.")
        return out
    if recorded == current:
        return []
    return [f"{prefix.rstrip('.')}: {json.dumps(current)} (recorded: {json.dumps(recorded)})"]


def load(out: str | Path, kind: str, config: dict[str, Any], max_wall_s: float | None
         ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The arrays and document of ``out``'s resume state, checked to continue a ``kind``
    training with ``config`` (a :class:`ConfigError` saying why not otherwise)."""
    out = Path(out)
    path = out / RESUME_FILE
    if not path.is_file():
        why = "no such folder" if not out.is_dir() else f"no {RESUME_FILE}"
        raise ConfigError(f"{out}: nothing to resume ({why}; training writes it with each "
                          "last.npz and when stopped by Ctrl-C); run without --resume to "
                          "start a new training")
    arrays, doc = read_state(path, FORMAT)
    if doc.get("format_version") != FORMAT_VERSION:
        raise ConfigError(f"{path}: resume state version {doc.get('format_version')} "
                          f"(this dcsim reads {FORMAT_VERSION})")
    if doc.get("trainer") != kind:
        raise ConfigError(f"{path}: the state of a `dcsim train {doc.get('trainer')}` run, "
                          f"not of `dcsim train {kind}`")
    diffs = config_differences(doc["config"], _json_config(config))
    if diffs:
        raise ConfigError(f"{out}: cannot resume: the config differs from the one the "
                          f"training ran with: {'; '.join(diffs)}")
    it, total = doc["iteration"], doc["iterations"]
    if doc["stopped"] == "finished" or it >= total:
        raise ConfigError(f"{out}: nothing to resume: the training ran all its {total} "
                          "iterations")
    if doc["stopped"] == "max_wall_s" and max_wall_s is not None and (
            doc["wall_s"] >= max_wall_s):
        raise ConfigError(f"{out}: nothing to resume: the training stopped after iteration "
                          f"{it} when its max_wall_s ({max_wall_s:g} s) ran out; raise it "
                          "(--set max_wall_s=SECONDS, or null) to continue")
    return arrays, doc


def prefixed(arrays: dict[str, np.ndarray], prefix: str) -> dict[str, np.ndarray]:
    """The arrays named ``prefix + name``, by ``name``."""
    return {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}


def finite_or_none(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)
