"""The built-in power models: ``constant``, ``linear`` (idle to peak) and ``table``
(interpolated from measured points, SPECpower-style)."""

from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
from pydantic import ConfigDict, Field, NonNegativeFloat, model_validator

from dcsim.hookspecs import hookimpl
from dcsim.power.base import PowerModel
from dcsim.validation import ConfigModel


class _Options(ConfigModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class ConstantPower(PowerModel):
    """The same draw whatever the load (a server that is on)."""

    name = "constant"
    description = "the same watts whatever the utilisation"

    class Options(_Options):
        watts: NonNegativeFloat

    def power(self, util: np.ndarray) -> np.ndarray:
        return np.full(np.shape(util), float(self.options.watts))


class LinearPower(PowerModel):
    """``idle_w + (peak_w - idle_w) * u`` (CloudSim's and OpenDC's linear model)."""

    name = "linear"
    description = "idle_w at utilisation 0 to peak_w at 1, linearly"

    class Options(_Options):
        idle_w: NonNegativeFloat
        peak_w: NonNegativeFloat

        @model_validator(mode="after")
        def _order(self):
            if self.peak_w < self.idle_w:
                raise ValueError(f"peak_w ({self.peak_w:g}) is below idle_w "
                                 f"({self.idle_w:g})")
            return self

    def power(self, util: np.ndarray) -> np.ndarray:
        idle, peak = float(self.options.idle_w), float(self.options.peak_w)
        return idle + (peak - idle) * np.asarray(util, dtype=np.float64)


class TablePower(PowerModel):
    """Interpolated linearly between measured ``[utilisation, watts]`` points, as
    SPECpower_ssj2008 reports them (11 points at 0, 0.1, ..., 1): CloudSim's
    ``PowerModelSpecPower`` and OpenDC's interpolation model. The points must start at
    utilisation 0 and end at 1, in increasing order, and their watts must not fall as the
    load grows (a table that does is almost always a transcription error: a server then
    saves power by working; ``decreasing: allow`` accepts it, for a measured curve that
    really dips)."""

    name = "table"
    description = "interpolated between [utilisation, watts] points from 0 to 1"

    class Options(_Options):
        points: Annotated[list[tuple[NonNegativeFloat, NonNegativeFloat]], Field(min_length=2)]
        decreasing: Literal["refuse", "allow"] = "refuse"

        @model_validator(mode="after")
        def _points(self):
            u = [p[0] for p in self.points]
            if u[0] != 0.0 or u[-1] != 1.0:
                raise ValueError(f"points: the utilisations must run from 0 to 1 (got "
                                 f"{u[0]:g} to {u[-1]:g})")
            bad = [b for a, b in zip(u, u[1:], strict=False) if not b > a]
            if bad:
                raise ValueError(f"points: utilisations must increase (at {bad[0]:g})")
            w = [p[1] for p in self.points]
            fall = [(u[i + 1], w[i], w[i + 1]) for i in range(len(w) - 1) if w[i + 1] < w[i]]
            if fall and self.decreasing == "refuse":
                at, a, b = fall[0]
                raise ValueError(f"points: the watts fall as the load grows ({a:g} W, then "
                                 f"{b:g} W at utilisation {at:g}); fix the table, or set "
                                 "decreasing: allow for a curve that really dips")
            return self

    def __init__(self, options=None):
        super().__init__(options)
        pts = np.asarray(self.options.points, dtype=np.float64)
        self._u, self._w = pts[:, 0].copy(), pts[:, 1].copy()

    def power(self, util: np.ndarray) -> np.ndarray:
        return np.interp(np.asarray(util, dtype=np.float64), self._u, self._w)


@hookimpl
def register_power_models(register):
    for cls in (ConstantPower, LinearPower, TablePower):
        register(cls)
