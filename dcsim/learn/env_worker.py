"""The environments' side of :mod:`dcsim.learn.lockstep`: a block of environments in one
process (:class:`Local`, the trainer's own with ``num_workers: 1``) and the loop of a worker
process serving one (:func:`serve`). Kept apart from the trainer's modules so that a worker
imports only this and its environment's module, not PyTorch."""

from __future__ import annotations

import signal
import traceback
from collections.abc import Callable
from typing import Any

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


def serve(conn: Any, make: Callable[[], Any], count: int) -> None:
    """A worker's loop: build ``count`` environments, then answer the trainer's requests
    (each a tuple ``(what, args)``, :meth:`Local.handle`) with ``("ok", result)`` or
    ``("error", text)`` until ``close`` or the pipe's end."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the trainer's to handle
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        local = Local([make() for _ in range(count)])
        conn.send(("ok", None))
    except BaseException as e:  # noqa: BLE001 - reported to the trainer, which raises
        conn.send(("error", _describe(e)))
        return
    while True:
        try:
            what, payload = conn.recv()
        except (EOFError, OSError):  # the trainer is gone
            return
        if what == "close":
            return
        try:
            conn.send(("ok", local.handle(what, payload)))
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
