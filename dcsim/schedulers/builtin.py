"""Built-in queue-mode schedulers (DeepRM's baselines), registered like any plugin.

The heuristics consider only jobs that fit *now* (:meth:`QueueView.fits_now`: the demand
fits in ``free`` for each of the job's first ``length`` steps) and return ``view.void``
when none does, as the authors' ``other_agents.py`` does. Ties go to the lowest slot index
(the authors' strict ``>`` scan).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from dcsim.hookspecs import hookimpl
from dcsim.schedulers.base import QueueView, Scheduler


def _packer_scores(view: QueueView) -> np.ndarray:
    """(M,) dot product of the free capacity at the current step and each slot's demand."""
    return view.slot_demand @ view.free[0]


class SJF(Scheduler):
    """Shortest job first among the jobs that fit now (ties: lowest slot)."""

    name = "sjf"
    description = "shortest job among those that fit now"

    def choose(self, view: QueueView) -> int:
        ok = view.fits_now()
        if not ok.any():
            return view.void
        return int(np.where(ok, view.slot_length, np.iinfo(np.int64).max).argmin())


class Packer(Scheduler):
    """Max alignment (dot product of ``free[0]`` and the demand) among the jobs that fit
    now (ties: lowest slot). The authors start the scan at score 0 with a strict ``>``, so
    a zero-demand job is never picked there; here it can be."""

    name = "packer"
    description = "max dot product of free capacity and demand among jobs that fit now"

    def choose(self, view: QueueView) -> int:
        ok = view.fits_now()
        if not ok.any():
            return view.void
        return int(np.where(ok, _packer_scores(view), -np.inf).argmax())


class TetrisStar(Scheduler):
    """Tetris*: ``knob · packer + (1 − knob) · 1/length`` among jobs that fit now.

    ``normalise="max"`` (default) divides the packer score by its maximum over the fitting
    jobs, so both terms lie in (0, 1] and ``knob`` weighs comparable quantities (the paper
    does not say). ``normalise="none"`` is the authors' ``get_packer_sjf_action``: the raw
    dot product (tens of slots²) beside 1/length (≤ 1), which makes any knob well above 0
    behave like Packer. knob = 1 is Packer, knob = 0 is SJF (ties: lowest slot).
    """

    name = "tetris_star"
    description = "knob-weighted mix of packer alignment and 1/length (Tetris*)"

    class Options(Scheduler.Options):
        knob: float = Field(0.5, ge=0.0, le=1.0)
        normalise: Literal["max", "none"] = "max"

    def choose(self, view: QueueView) -> int:
        ok = view.fits_now()
        if not ok.any():
            return view.void
        pack = np.where(ok, _packer_scores(view), 0.0)
        if self.options.normalise == "max":
            top = pack.max()
            pack = pack / top if top > 0 else pack
        inv_len = np.where(ok, 1.0 / np.maximum(view.slot_length, 1), 0.0)
        knob = self.options.knob
        score = knob * pack + (1.0 - knob) * inv_len
        return int(np.where(ok, score, -np.inf).argmax())


class FIFO(Scheduler):
    """Strict FIFO: the earliest-arrived visible job (ties: lowest slot) if it fits now,
    else void; it never skips ahead. The backlog is FIFO too, so the visible
    earliest-arrived job is the oldest job waiting in the system."""

    name = "fifo"
    description = "earliest-arrived waiting job if it fits now, else wait (no skipping)"

    def choose(self, view: QueueView) -> int:
        valid = view.slot_valid
        if not valid.any():
            return view.void
        i = int(np.where(valid, view.slot_arrival, np.iinfo(np.int64).max).argmin())
        return i if view.fits_now()[i] else view.void


class RandomScheduler(Scheduler):
    """Uniform over the M + 1 actions, feasible or not (the authors' random agent); an
    empty or unplaceable slot then simply advances time."""

    name = "random"
    description = "uniform over the M+1 actions (slots and void)"

    def choose(self, view: QueueView) -> int:
        return int(self.rng.integers(view.slots + 1))


SCHEDULERS: list[type] = [SJF, Packer, TetrisStar, FIFO, RandomScheduler]


@hookimpl
def register_schedulers(register):
    for cls in SCHEDULERS:
        register(cls)
