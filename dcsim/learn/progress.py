"""How far a training is: the head of ``dcsim train``'s progress lines (the iteration of
all, the steps per second and an ETA from this invocation's own pace) and when a line is due
between evaluations. Imports no torch, so the lines are tested on the default install."""

from __future__ import annotations

from dcsim.durations import duration

#: seconds without a line after which an iteration between evaluations prints one
EVERY = 10.0


class Pace:
    """The head of a training's progress lines (:meth:`head`) and when one is due
    (:meth:`due`)."""

    def __init__(self, iterations: int, max_wall_s: float | None = None,
                 every: float | None = None):
        self.iterations, self.max_wall_s = iterations, max_wall_s
        self.every = EVERY if every is None else every
        self.start = (0, 0.0, 0)  # (iteration, wall, steps) this invocation began at
        self.said = 0.0  # the wall time of the last line

    def begin(self, iteration: int, wall: float, steps: int) -> None:
        """This invocation starts after ``iteration`` (0, or the resumed one), at training
        wall time ``wall`` with ``steps`` environment steps done."""
        self.start = (iteration, wall, steps)
        self.said = wall

    def rate(self, wall: float, steps: int) -> float | None:
        """Steps per wall second since :meth:`begin` (None before any time passed)."""
        _, w0, s0 = self.start
        return (steps - s0) / (wall - w0) if wall > w0 else None

    def eta(self, iteration: int, wall: float) -> float | None:
        """Wall seconds until the training ends (None before an iteration ended)."""
        i0, w0, _ = self.start
        if iteration <= i0 or wall <= w0:
            return None
        left = (wall - w0) / (iteration - i0) * max(self.iterations - iteration, 0)
        if self.max_wall_s is not None:
            left = min(left, max(self.max_wall_s - wall, 0.0))
        return left

    def head(self, iteration: int, wall: float, steps: int, width: int = 4) -> str:
        """``iter   40/200  123.4s  steps    80000 (650/s)  ETA 6 min 10 s`` (``ETA --``
        before a pace is known); a line said now."""
        self.said = wall
        rate = self.rate(wall, steps)
        eta = self.eta(iteration, wall)
        return (f"iter {iteration:{width}d}/{self.iterations}  {wall:7.1f}s  "
                f"steps {steps:8d} ({'--' if rate is None else f'{rate:.0f}'}/s)  "
                f"ETA {'--' if eta is None else duration(eta)}")

    def due(self, wall: float) -> bool:
        """Whether a line between evaluations is due (``every`` seconds since the last)."""
        return self.every > 0 and wall - self.said >= self.every
