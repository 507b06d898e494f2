"""The environments' side of :mod:`dcsim.learn.workers.lockstep`: a block of environments in
one process (:class:`Local`, the trainer's own with ``num_workers: 1``) and the loop of a
worker process serving one (:func:`serve`). Kept apart from the trainer's modules so that a
worker imports only this and its environment's module, not PyTorch (unless the trainer
attaches something that uses it: the update's parts, ``update_shards`` > 1,
:mod:`dcsim.learn.workers.shards`; the rollout's groups, ``rollout_groups`` > 1,
:mod:`dcsim.learn.workers.groups`)."""

from __future__ import annotations

import signal
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

from dcsim.errors import ConfigError


def replay_episode(env: Any, seed: int, actions: list[Any]) -> Any:
    """``env`` reset with ``seed`` and stepped with ``actions``; the observation it ends on
    (a ConfigError if the episode ends before)."""
    o, _ = env.reset(seed=seed)
    for a in actions:
        o, _, done, truncated, _ = env.step(a)
        if done or truncated:
            raise ConfigError("replaying an episode of the resume state ended it early: "
                              "the environment is not the one it ran on")
    return o


class Local:
    """The environments in this process."""

    def __init__(self, envs: list[Any]):
        self.envs = envs

    def reset(self, which: list[tuple[int, int]]) -> list[Any]:
        return [self.envs[i].reset(seed=seed)[0] for i, seed in which]

    def step(self, actions: list[Any]) -> list[tuple[Any, float, bool, dict[str, Any]]]:
        out = []
        for env, a in zip(self.envs, actions, strict=True):
            o, r, done, _, info = env.step(a)
            out.append((o, r, done, info))
        return out

    def call(self, method: str, args: list[Any]) -> list[Any]:
        return [getattr(env, method)(a) for env, a in zip(self.envs, args, strict=True)]

    def replay(self, episodes: list[tuple[int, list[Any]]]) -> list[Any]:
        return [replay_episode(env, seed, acts)
                for env, (seed, acts) in zip(self.envs, episodes, strict=True)]

    def handle(self, what: str, args: tuple) -> Any:
        """Request ``what`` (reset, step, call or replay) with ``args``."""
        if what not in ("reset", "step", "call", "replay"):
            raise ValueError(f"unknown request {what!r}")
        return getattr(self, what)(*args)

    def close(self) -> None:
        """Nothing to release: the environments end with the process."""


def pack(obs: list[Any]) -> tuple[str, Any]:
    """Observations for the pipe: dicts of same-shaped arrays stacked per key (one array a
    key rather than one an environment: pickling many small arrays is what costs), anything
    else as it is."""
    first = obs[0] if obs else None
    if isinstance(first, dict) and all(
            isinstance(o, dict) and o.keys() == first.keys() for o in obs) and all(
            isinstance(first[k], np.ndarray) and all(
                isinstance(o[k], np.ndarray) and o[k].shape == first[k].shape
                and o[k].dtype == first[k].dtype for o in obs) for k in first):
        return "stacked", {k: np.stack([o[k] for o in obs]) for k in first}
    return "list", obs


def unpack(packed: tuple[str, Any]) -> list[Any]:
    """The observations :func:`pack` packed (stacked ones as views, one per environment)."""
    how, data = packed
    if how == "list":
        return data
    n = len(next(iter(data.values())))
    return [{k: v[j] for k, v in data.items()} for j in range(n)]


def _packed(what: str, result: Any) -> Any:
    """A request's result as the pipe carries it (observations packed)."""
    if what == "step":
        return pack([r[0] for r in result]), [r[1:] for r in result]
    if what in ("reset", "replay"):
        return pack(result)
    return result


def unpacked(what: str, result: Any) -> Any:
    """A worker's answer to ``what`` as :class:`Local` gives it."""
    if what == "step":
        obs, rest = result
        return [(o, *r) for o, r in zip(unpack(obs), rest, strict=True)]
    if what in ("reset", "replay"):
        return unpack(result)
    return result


def serve(conn: Any, make: Callable[[], Any], count: int) -> None:
    """A worker's loop: build ``count`` environments, then answer the trainer's requests
    (each a tuple ``(what, args)``, :meth:`Local.handle`) with ``("ok", result)`` or
    ``("error", text)`` until ``close`` or the pipe's end. ``("attach", (name, factory))``
    builds ``factory(local)`` here, given this worker's environments (the update's parts,
    the rollout's groups: PyTorch is imported only then), and ``("attached", (name, what,
    args))`` is that object's ``handle(what, args)``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the trainer's to handle
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        local = Local([make() for _ in range(count)])
        conn.send(("ok", None))
    except BaseException as e:  # noqa: BLE001 - reported to the trainer, which raises
        conn.send(("error", _describe(e)))
        return
    attached: dict[str, Any] = {}  # what the trainer attached, by name
    while True:
        try:
            what, payload = conn.recv()
        except (EOFError, OSError):  # the trainer is gone
            return
        if what == "close":
            return
        try:
            if what == "attach":
                name, factory = payload
                attached[name], result = factory(local), None
            elif what == "attached":
                name, request, args = payload
                result = attached[name].handle(request, args)
            else:
                result = _packed(what, local.handle(what, payload))
            conn.send(("ok", result))
        except BaseException as e:  # noqa: BLE001 - reported to the trainer, which raises
            try:
                conn.send(("error", _describe(e)))
            except (OSError, ValueError):
                return


def _describe(e: BaseException) -> str:
    """``Type: message (at file:line)`` of an exception, where it was raised."""
    frames = traceback.extract_tb(e.__traceback__)
    where = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return f"{type(e).__name__}: {e}{where}"
