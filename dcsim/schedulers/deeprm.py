"""DeepRM's learned scheduler: the image state, the policy network (numpy inference), the
checkpoint format and the ``deeprm`` scheduler plugin.

This module needs numpy only; training lives in :mod:`dcsim.learn.deeprm.train` (PyTorch), which
the core never imports.

**Image state** (:func:`image_state`, the authors' ``Env.observe()`` with
``repre='image'``). A ``T × W`` image, flattened row-major (time step by time step) to a
float32 vector of ``T·W`` values. Its columns, left to right::

    for each resource r (in the job set's order):
        machine   T × capacity_r      row t: the first (capacity_r − free[t, r]) cells are 1
        slot 0    T × max_job_size    first `length` rows: the first `demand[r]` cells are 1
        …
        slot M−1  T × max_job_size
    backlog       T × backlog_width   cell by cell, row-major, one 1 per waiting job
    extra         T × 1               min(time since the last new job, max_track) / max_track

so ``W = Σ_r (capacity_r + M·max_job_size) + backlog_width + 1``; with the authors'
defaults (2 resources × 10 slots, T = 20, M = 10, max_job_size 10, backlog 60 → width 3)
the image is 20 × 224 = 4480 values. Where this differs from the authors' code:

- The authors' machine canvas paints each running job in its own colour (a value in
  (0, 1)) and in whichever cells were free when it started; dcsim's view has only the
  free amount per step, so the used cells are 1 and packed to the left (the same
  occupancy, without job identities).
- A demand above ``max_job_size`` (or a length above T) is clipped to the block; the
  authors' generator never produces one. Waiting jobs beyond ``T·backlog_width`` are not
  shown (with the defaults the backlog holds 60 = 20·3 jobs, so all are).
- :class:`QueueView` does not carry the time since the last new job. :class:`ArrivalClock`
  recovers it from the successive views of one episode (a job that arrived at step t is,
  at the first decision of step t, either in a slot with ``slot_arrival == t`` or one more
  job in the backlog); it is exact except that jobs dropped on a full backlog are not
  seen. Like the authors' ``ExtraInfo`` it starts at 0, grows by one per time step up to
  ``max_track`` (10) and resets to 0 on an arrival. The scheduler and the trainer use the
  same clock, so training and inference see identical images.

**Policy** (:func:`policy_logits`, :func:`policy_probs`): image → fully connected hidden
layer of 20 units with ReLU → fully connected layer to M + 1 logits → softmax. The paper
says one hidden layer of 20 neurons; ReLU is the authors' (Mao et al.'s Lasagne network,
``nonlinearity=rectify``). Weights use PyTorch's ``nn.Linear`` layout: ``w1`` (hidden,
input), ``b1`` (hidden,), ``w2`` (actions, hidden), ``b2`` (actions,).

**Checkpoint** (:func:`save_checkpoint`, :func:`load_checkpoint`): ``NAME.npz`` with exactly
those four float arrays (read with ``np.load(..., allow_pickle=False)``; no pickle anywhere)
and ``NAME.json`` beside it with the architecture, the image parameters, the
:class:`~dcsim.queue.env.QueueConfig` and job distribution it was trained for, and how it
was trained. Loading checks the arrays against the JSON, and the scheduler checks the JSON
against the environment at its first decision; every mismatch is a
:class:`~dcsim.errors.ConfigError` naming the file.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import field_validator

from dcsim.checkpoints import read_arrays, read_metadata, write_checkpoint
from dcsim.errors import ConfigError
from dcsim.hookspecs import hookimpl
from dcsim.schedulers.base import QueueView, Scheduler
from dcsim.tie_break import greedy_argmax

__all__ = ["CHECKPOINT_FORMAT", "SHIPPED_CHECKPOINT", "ArrivalClock", "Checkpoint",
           "DeepRMScheduler", "ImageSpec", "greedy_action", "greedy_actions", "image_state",
           "load_checkpoint", "policy_logits", "policy_probs", "save_checkpoint"]

#: The ``format`` field of every checkpoint JSON.
CHECKPOINT_FORMAT = "dcsim-deeprm-policy"
CHECKPOINT_VERSION = 1
#: The checkpoint the ``deeprm`` scheduler loads by default.
SHIPPED_CHECKPOINT = Path(__file__).resolve().parents[1] / "learn" / "checkpoints" / "deeprm.npz"
#: The authors' defaults (``parameters.py``): max_job_size, max_track_since_new, backlog.
MAX_JOB_SIZE = 10
MAX_TRACK = 10
DEFAULT_BACKLOG = 60
WEIGHT_NAMES = ("w1", "b1", "w2", "b2")


# --------------------------------------------------------------------------- image state
@dataclass(frozen=True)
class ImageSpec:
    """The parameters that fix the image's layout (and so the network's input size)."""

    horizon: int                      # T
    capacity: tuple[int, ...]         # slots per resource (one block width per resource)
    slots: int                        # M
    max_job_size: int = MAX_JOB_SIZE
    backlog_width: int = math.ceil(DEFAULT_BACKLOG / 20)
    max_track: int = MAX_TRACK

    def __post_init__(self):
        cap = tuple(int(c) for c in self.capacity)
        if not cap or min(cap) < 1:
            raise ValueError(f"ImageSpec: capacity must be positive integers, not {self.capacity}")
        object.__setattr__(self, "capacity", cap)
        for name in ("horizon", "slots", "max_job_size", "backlog_width", "max_track"):
            v = getattr(self, name)
            if int(v) != v or v < (0 if name == "backlog_width" else 1):
                raise ValueError(f"ImageSpec: {name} must be a positive integer, not {v!r}")
            object.__setattr__(self, name, int(v))

    @classmethod
    def for_queue(cls, config, n_resources: int = 2, *, max_job_size: int = MAX_JOB_SIZE,
                  max_track: int = MAX_TRACK) -> ImageSpec:
        """The spec for a :class:`~dcsim.queue.env.QueueConfig`: backlog_width =
        ⌈backlog / T⌉ (the authors' rule: 60 / 20 = 3)."""
        cap = config.capacity_for(n_resources)
        if np.any(cap != np.round(cap)):
            raise ValueError(f"the image needs integer capacities, not {cap.tolist()}")
        return cls(horizon=config.horizon, capacity=tuple(int(c) for c in cap),
                   slots=config.slots, max_job_size=max_job_size,
                   backlog_width=math.ceil(config.backlog / config.horizon),
                   max_track=max_track)

    @property
    def n_resources(self) -> int:
        return len(self.capacity)

    @property
    def width(self) -> int:
        return (sum(self.capacity) + self.n_resources * self.slots * self.max_job_size
                + self.backlog_width + 1)

    @property
    def size(self) -> int:
        """Length of the flattened image: horizon × width."""
        return self.horizon * self.width

    @property
    def actions(self) -> int:
        return self.slots + 1

    def mismatch(self, view: QueueView) -> str | None:
        """Why ``view`` does not fit this spec (None if it does)."""
        cap = np.asarray(view.capacity, dtype=np.float64)
        if view.horizon != self.horizon:
            return f"horizon {view.horizon} != {self.horizon}"
        if view.slots != self.slots:
            return f"slots {view.slots} != {self.slots}"
        if cap.shape[0] != self.n_resources:
            return f"{cap.shape[0]} resources != {self.n_resources}"
        if not np.array_equal(cap, np.asarray(self.capacity, dtype=np.float64)):
            return f"capacity {cap.tolist()} != {list(self.capacity)}"
        return None


def fill_images(spec: ImageSpec, free: np.ndarray, valid: np.ndarray, length: np.ndarray,
                demand: np.ndarray, backlog: np.ndarray, since: np.ndarray,
                out: np.ndarray | None = None) -> np.ndarray:
    """Images of a batch of B states, (B, spec.size) float32 (see the module docstring).

    ``free`` (B, T, R), ``valid`` (B, M), ``length`` (B, M), ``demand`` (B, M, R),
    ``backlog`` (B,) waiting jobs, ``since`` (B,) steps since the last new job. ``out``: a
    C-contiguous (B, spec.size) float32 array to fill (overwritten) instead of a new one.
    """
    B = free.shape[0]
    T, M, S = spec.horizon, spec.slots, spec.max_job_size
    if out is None:
        out = np.zeros((B, spec.size), dtype=np.float32)
    else:
        if out.shape != (B, spec.size) or out.dtype != np.float32 or not out.flags.c_contiguous:
            raise ValueError(f"out must be a C-contiguous float32 array of shape {(B, spec.size)}")
        out.fill(0.0)
    img = out.reshape(B, T, spec.width)  # a view: out must be C-contiguous
    rows = np.arange(T)
    cells = np.arange(S)
    lens = np.where(valid, length, 0)
    long_enough = rows[None, :, None, None] < lens[:, None, :, None]     # (B, T, M, 1)
    col = 0
    for r, c in enumerate(spec.capacity):
        used = np.rint(c - free[:, :, r])                                 # (B, T)
        img[:, :, col:col + c] = np.arange(c) < used[:, :, None]
        col += c
        dem = np.rint(np.where(valid, demand[:, :, r], 0.0))              # (B, M)
        block = long_enough & (cells < dem[:, None, :, None])             # (B, T, M, S)
        img[:, :, col:col + M * S] = block.reshape(B, T, M * S)
        col += M * S
    bw = spec.backlog_width
    if bw:
        waiting = np.arange(T * bw).reshape(T, bw)
        img[:, :, col:col + bw] = waiting < np.asarray(backlog)[:, None, None]
        col += bw
    img[:, :, col] = (np.minimum(since, spec.max_track) / spec.max_track)[:, None]
    return out


def image_state(view: QueueView, *, max_job_size: int = MAX_JOB_SIZE,
                backlog_width: int | None = None, since_arrival: int = 0,
                max_track: int = MAX_TRACK) -> np.ndarray:
    """The authors' image of one state as a flat float32 vector (layout: module docstring).

    ``backlog_width`` defaults to ⌈60 / T⌉ (the authors' backlog of 60; for another backlog
    size use :meth:`ImageSpec.for_queue`). ``since_arrival`` is the number of time steps
    since the last new job (the view lacks it; :class:`ArrivalClock` tracks it), shown as
    min(since_arrival, max_track) / max_track; 0 (the episode-start value) by default.
    Capacities must be whole numbers of slots.
    """
    cap = np.asarray(view.capacity, dtype=np.float64)
    if np.any(cap != np.round(cap)):
        raise ValueError(f"image_state needs integer capacities, not {cap.tolist()}")
    if backlog_width is None:
        backlog_width = math.ceil(DEFAULT_BACKLOG / view.horizon)
    spec = ImageSpec(horizon=view.horizon, capacity=tuple(int(c) for c in cap),
                     slots=view.slots, max_job_size=max_job_size,
                     backlog_width=backlog_width, max_track=max_track)
    return _image(spec, view, since_arrival)


def _image(spec: ImageSpec, view: QueueView, since: int) -> np.ndarray:
    return fill_images(spec, view.free[None], view.slot_valid[None], view.slot_length[None],
                       view.slot_demand[None], np.array([view.backlog]),
                       np.array([since], dtype=np.float64))[0]


class ArrivalClock:
    """Time steps since the last new job, recovered from one episode's successive views.

    Call :meth:`update` with every view of the episode (each decision, in order) and
    :meth:`reset` before the next episode. At the first decision of a new time step ``t``
    a job arrived iff a slot holds a job with ``slot_arrival == t`` or the backlog grew
    since the last decision (between two time steps no job starts, so the backlog can only
    grow by arrivals). Jobs dropped on a full backlog go unseen.
    """

    def __init__(self, max_track: int = MAX_TRACK):
        self.max_track = max_track
        self.reset()

    def reset(self) -> None:
        self._time: int | None = None
        self._backlog = 0
        self.since = 0

    def update(self, view: QueueView) -> int:
        t = view.time
        if self._time is None or t < self._time:  # a new episode (time went back)
            self.since = 0  # the authors' ExtraInfo starts at 0
        elif t != self._time:
            arrived = view.backlog > self._backlog or bool(
                np.any(view.slot_valid & (view.slot_arrival == t)))
            self.since = 0 if arrived else min(self.since + (t - self._time), self.max_track)
        self._time = t
        self._backlog = view.backlog
        return self.since


# --------------------------------------------------------------------------- policy
def policy_logits(weights: dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    """Logits (B, actions) of the policy for images ``x`` (B, input) (or (input,))."""
    h = x @ weights["w1"].T
    h += weights["b1"]
    np.maximum(h, 0.0, out=h)
    z = h @ weights["w2"].T
    z += weights["b2"]
    return z


def policy_probs(weights: dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    """Softmax action probabilities (B, actions) for images ``x`` (B, input)."""
    z = policy_logits(weights, x)
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def greedy_action(scores: np.ndarray, slot_valid: np.ndarray) -> int:
    """Argmax of ``scores`` (M+1 probabilities or logits) over the *valid* actions: the
    slots holding a job, and void (ties, within float32 rounding, to the lowest index:
    :func:`dcsim.tie_break.greedy_argmax`).

    An empty slot does what void does (time moves on), but a policy trained on all M + 1
    actions spreads its "move on" mass over them by position, and its argmax can be an
    empty slot in an idle state that then never changes (machine empty, the same jobs
    waiting): a deterministic policy would wait forever. Only the explicit void action
    means "wait" here. Sampling (``greedy: false``) uses all M + 1 actions, as in training.
    """
    s = np.where(np.append(slot_valid, True), scores, -np.inf)
    return greedy_argmax(s)


def greedy_actions(scores: np.ndarray, slot_valid: np.ndarray) -> np.ndarray:
    """:func:`greedy_action` for a batch: ``scores`` (B, M+1), ``slot_valid`` (B, M)."""
    ok = np.concatenate([slot_valid, np.ones((slot_valid.shape[0], 1), bool)], axis=1)
    return greedy_argmax(np.where(ok, scores, -np.inf))


# --------------------------------------------------------------------------- checkpoint
@dataclass(frozen=True)
class Checkpoint:
    """A loaded policy: its weights, image spec and the JSON metadata."""

    path: Path
    weights: dict[str, np.ndarray]
    spec: ImageSpec
    meta: dict[str, Any]

    @property
    def hidden(self) -> int:
        return int(self.weights["w1"].shape[0])

    def check_view(self, view: QueueView) -> None:
        """ConfigError naming the file if ``view``'s environment is not the trained one."""
        why = self.spec.mismatch(view)
        if why is not None:
            raise ConfigError(f"{self.path}: checkpoint was trained for another environment "
                              f"({why}; see {self.path.with_suffix('.json').name})")

    def check_queue(self, config, n_resources: int) -> None:
        """ConfigError naming the file if a QueueConfig does not match the trained one."""
        try:
            spec = ImageSpec.for_queue(config, n_resources, max_job_size=self.spec.max_job_size,
                                       max_track=self.spec.max_track)
        except ValueError as e:
            raise ConfigError(f"{self.path}: {e}") from None
        if spec != self.spec:
            diff = [f"{k} {getattr(spec, k)} != {getattr(self.spec, k)}"
                    for k in ("horizon", "capacity", "slots", "backlog_width")
                    if getattr(spec, k) != getattr(self.spec, k)]
            raise ConfigError(f"{self.path}: checkpoint was trained for another environment "
                              f"({'; '.join(diff)})")


def save_checkpoint(path: str | Path, weights: dict[str, np.ndarray], spec: ImageSpec,
                    meta: dict[str, Any] | None = None) -> Path:
    """Write ``path`` (.npz, the four weight arrays as float32) and the .json beside it,
    each atomically. ``meta`` adds fields (queue config, training record, …) to the JSON;
    ``format``, ``architecture`` and ``image`` are filled in here. Returns the .npz path."""
    path = Path(path)
    if path.suffix != ".npz":
        raise ValueError(f"checkpoint path must end in .npz, not {path}")
    arrays = {k: np.ascontiguousarray(weights[k], dtype=np.float32) for k in WEIGHT_NAMES}
    hidden, n_in = arrays["w1"].shape
    doc = {
        "format": CHECKPOINT_FORMAT,
        "format_version": CHECKPOINT_VERSION,
        "architecture": {"input": int(n_in), "hidden": int(hidden),
                         "actions": int(arrays["w2"].shape[0]), "activation": "relu",
                         "layout": "w1 (hidden, input), b1 (hidden), w2 (actions, hidden), "
                                   "b2 (actions); softmax over the actions"},
        "image": {**asdict(spec), "capacity": list(spec.capacity), "size": spec.size,
                  "shape": [spec.horizon, spec.width]},
        **(meta or {}),
    }
    return write_checkpoint(path, arrays, doc)


def load_checkpoint(path: str | Path) -> Checkpoint:
    """Load and validate a checkpoint (``.npz`` + ``.json`` beside it); any problem is a
    :class:`ConfigError` naming the file. Arrays are read with ``allow_pickle=False``."""
    path = Path(path)
    jpath = path.with_suffix(".json")
    meta = read_metadata(path, CHECKPOINT_FORMAT, "DeepRM")
    try:
        arch = meta["architecture"]
        im = meta["image"]
        spec = ImageSpec(horizon=im["horizon"], capacity=tuple(im["capacity"]),
                         slots=im["slots"], max_job_size=im["max_job_size"],
                         backlog_width=im["backlog_width"], max_track=im["max_track"])
        n_in, hidden, actions = int(arch["input"]), int(arch["hidden"]), int(arch["actions"])
    except (KeyError, TypeError, ValueError) as e:
        raise ConfigError(f"{jpath}: bad or missing architecture/image field: {e}") from None
    if n_in != spec.size:
        raise ConfigError(f"{jpath}: architecture.input {n_in} != image size {spec.size} "
                          f"({spec.horizon} x {spec.width})")
    if actions != spec.actions:
        raise ConfigError(f"{jpath}: architecture.actions {actions} != slots + 1 = "
                          f"{spec.actions}")
    weights = read_arrays(path, {"w1": (hidden, n_in), "b1": (hidden,),
                                 "w2": (actions, hidden), "b2": (actions,)})
    return Checkpoint(path=path, weights=weights, spec=spec, meta=meta)


# --------------------------------------------------------------------------- scheduler
class DeepRMScheduler(Scheduler):
    """DeepRM's learned policy (numpy inference; torch is not needed).

    ``checkpoint``: the ``.npz`` to load (its ``.json`` beside it); default the checkpoint
    shipped in the package (``dcsim/learn/checkpoints/deeprm.npz``); a relative path is
    resolved against the working directory. By default the action is *sampled* from all
    M + 1 actions with ``self.rng``, as in training and in the DeepRM authors' evaluation
    (their agent samples at test time); a run is still reproducible, since ``self.rng``
    comes from the run's seed. ``greedy: true`` takes the most probable *valid* action, a
    slot holding a job or void (:func:`greedy_action`; ties to the lowest index). With the
    shipped checkpoint sampling is much better than greedy (rate 0.7: mean slowdown 3.05
    sampled, 6.05 greedy, SJF 4.87; ``docs/reproductions.md``).
    """

    name = "deeprm"
    description = "DeepRM's learned policy network (REINFORCE-trained checkpoint)"

    class Options(Scheduler.Options):
        checkpoint: str | None = None
        greedy: bool = False

        @field_validator("checkpoint")
        @classmethod
        def _readable(cls, v: str | None) -> str | None:  # `dcsim validate` reads it
            if v is not None:
                try:
                    load_checkpoint(Path(v).expanduser().resolve())
                except ConfigError as e:
                    raise ValueError(str(e)) from None
            return v

    def __init__(self, options=None, *, rng: np.random.Generator | None = None):
        super().__init__(options, rng=rng)
        ck = self.options.checkpoint
        path = SHIPPED_CHECKPOINT if ck is None else Path(ck).expanduser().resolve()
        self.checkpoint = load_checkpoint(path)
        self._spec = self.checkpoint.spec
        self._weights = self.checkpoint.weights
        self._clock = ArrivalClock(self._spec.max_track)
        self._checked = False

    def setup(self, view: QueueView) -> None:
        self._clock.reset()

    def probabilities(self, view: QueueView) -> np.ndarray:
        """(M+1,) action probabilities at ``view`` (advances the arrival clock)."""
        if not self._checked:
            self.checkpoint.check_view(view)
            self._checked = True
        since = self._clock.update(view)
        x = _image(self._spec, view, since)
        return policy_probs(self._weights, x[None])[0]

    def choose(self, view: QueueView) -> int:
        p = self.probabilities(view)
        if self.options.greedy:
            return greedy_action(p, view.slot_valid)
        c = np.cumsum(p, dtype=np.float64)
        return int(min(np.searchsorted(c, self.rng.random() * c[-1], side="right"),
                       p.shape[0] - 1))


@hookimpl
def register_schedulers(register):
    register(DeepRMScheduler)
