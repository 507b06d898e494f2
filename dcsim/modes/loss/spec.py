"""The loss mode's own sections and settings: ``warmup:`` (:class:`WarmupSpec`), ``power:``
(:class:`PowerSpec`, what it means in :mod:`dcsim.modes.loss.power`) and the engine's
settings of one run (:class:`EngineConfig`: warm-up, sampling, what a request that does not
fit in total does, and the departure order). Imports no SimPy: validating an experiment
reads this module, not the engine."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field, NonNegativeFloat, PositiveFloat, field_validator, model_validator

from dcsim.validation import StrictModel

CAPACITY_MODES = ("reject", "wait")
DEPARTURE_MODES = ("before_arrivals", "after_first_step")


@dataclass
class EngineConfig:
    """Measurement settings of one run."""

    warmup_requests: int = 0  # the first N arrivals are not measured
    warmup_time: float = 0.0  # arrivals before this time are not measured
    sample_interval: float | None = None  # time-series period (simulated time)
    sample_every: int = 100  # ... or one sample per this many arrivals when no interval
    flush_rows: int = 65536  # time-series rows per batch handed to the sink
    # "reject": the allocator decides at arrival (a request that fits nowhere is dropped);
    # "wait": a request held until the cluster's total free resources cover its demand
    capacity: str = "reject"
    # "before_arrivals": requests ending at t are released before a request arriving at t is
    # offered; "after_first_step": after its first partial step (the Nara authors' clock)
    departures: str = "before_arrivals"

    def __post_init__(self) -> None:
        if self.capacity not in CAPACITY_MODES:
            raise ValueError(f"capacity must be one of {CAPACITY_MODES}, got {self.capacity!r}")
        if self.departures not in DEPARTURE_MODES:
            raise ValueError(f"departures must be one of {DEPARTURE_MODES}, "
                             f"got {self.departures!r}")


class WarmupSpec(StrictModel):
    requests: Annotated[int, Field(ge=0)] = 0
    time: Annotated[float, Field(ge=0)] = 0.0


class SwitchPower(StrictModel):
    """Every switch: ``static_w`` plus ``port_w`` per port (a link end) whose link is up."""

    static_w: NonNegativeFloat = 0.0
    port_w: NonNegativeFloat = 0.0


class CarbonSpec(StrictModel):
    """A constant carbon intensity, or a trace of it over simulated time."""

    intensity: NonNegativeFloat | None = Field(None, description="gCO2/kWh")
    trace: str | None = Field(None, description="CSV or Parquet: time, intensity (gCO2/kWh)")

    @model_validator(mode="after")
    def _one(self) -> CarbonSpec:
        if (self.intensity is None) == (self.trace is None):
            raise ValueError("give either intensity (gCO2/kWh) or trace (a file of time, "
                             "intensity)")
        return self


class PowerSpec(StrictModel):
    """The ``power:`` section (module docstring)."""

    server: dict[str, Any] | None = None
    types: dict[str, dict[str, Any]] = Field(default_factory=dict)
    resource: str | None = None
    # YAML 1.1 reads a bare on/off as true/false
    idle_policy: Literal["on", "off", True, False] = "on"
    power_on_j: NonNegativeFloat = 0.0
    power_on_delay: NonNegativeFloat = 0.0
    switch: SwitchPower = Field(default_factory=SwitchPower)
    time_unit_s: PositiveFloat = 1.0
    carbon: CarbonSpec | None = None

    @field_validator("idle_policy")
    @classmethod
    def _on_off(cls, v: Any) -> str:
        return {True: "on", False: "off"}.get(v, v) if isinstance(v, bool) else v

    @field_validator("server")
    @classmethod
    def _model(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        if v is not None:
            _named(v)
        return v

    @field_validator("types")
    @classmethod
    def _models(cls, v: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        for name, model in v.items():
            try:
                _named(model)
            except ValueError as e:
                raise ValueError(f"{name}: {e}") from None
        return v

    @model_validator(mode="after")
    def _some_model(self) -> PowerSpec:
        if self.server is None and not self.types:
            raise ValueError("power: needs server (every server's model) or types (a model "
                             "per server type)")
        if self.power_on_delay > 0 and self.idle_policy != "off":
            raise ValueError("power.power_on_delay: a switch-on delay needs idle_policy: off "
                             "(with idle servers on, nothing is ever switched on)")
        return self


def _named(v: dict[str, Any]) -> None:
    name = v.get("model")
    if not isinstance(name, str) or not name:
        raise ValueError("needs model: the name of a power model (constant, linear, "
                         "table, or an installed one: `dcsim plugins`)")
