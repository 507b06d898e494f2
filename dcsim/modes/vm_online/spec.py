"""The ``vm:`` section of a ``mode: vm_online`` experiment: its typed fields
(:class:`OnlineSpec`: mapping, VM arrivals from a trace or the Table 1 mix, periodic
rescheduling, sampling), their validation with errors naming the field, the plan-time check
that its files exist, and the placer and rescheduler lookups (:func:`placer_class`,
:func:`build_rescheduler`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Annotated, Any

import numpy as np
from pydantic import Field, PositiveFloat, model_validator

from dcsim.config_files import resolve_path
from dcsim.errors import ConfigError, PluginError
from dcsim.validation import StrictModel, validate_section
from dcsim.vm.mapping_spec import MappingSpec


class TraceSpec(StrictModel):
    path: str
    time_scale: PositiveFloat = 1.0
    limit: Annotated[int, Field(ge=0)] | None = None
    spread: Annotated[float, Field(ge=0)] = 0.0
    start_at_zero: bool = True
    mem_unit_mb: PositiveFloat = 1024.0
    double_numa_from: Annotated[int, Field(ge=1)] | None = None


class SyntheticVMSpec(StrictModel):
    count: Annotated[int, Field(ge=1)]
    rate: PositiveFloat
    mean_lifetime: PositiveFloat | None = None
    load: PositiveFloat | None = None

    @model_validator(mode="after")
    def _one_lifetime(self) -> SyntheticVMSpec:
        if (self.mean_lifetime is None) == (self.load is None):
            raise ValueError("give exactly one of mean_lifetime (seconds) or load (offered "
                             "cpu load)")
        return self


class WorkloadSpec(StrictModel):
    trace: TraceSpec | None = None
    synthetic: SyntheticVMSpec | None = None

    @model_validator(mode="after")
    def _one_source(self) -> WorkloadSpec:
        if (self.trace is None) == (self.synthetic is None):
            raise ValueError("give exactly one of trace or synthetic")
        return self


class RescheduleSpec(StrictModel):
    every: PositiveFloat
    mnl: Annotated[int, Field(ge=0)]
    algorithm: str = "greedy"
    options: dict[str, Any] = Field(default_factory=dict)


class OnlineSpec(StrictModel):
    """The ``vm:`` section of a ``mode: vm_online`` experiment (see the module docstring)."""

    mapping: MappingSpec
    workload: WorkloadSpec
    reschedule: RescheduleSpec | None = None
    sample_every: PositiveFloat | None = None
    until: PositiveFloat | None = None
    check_invariants: bool = False  # check the state after every event (tests)


def placer_class(name: str) -> type:
    """The placer class registered as ``name`` (the built-ins are found even before
    ``dcsim.placers.builtin`` is among the plugin manager's built-in modules)."""
    from dcsim import plugins
    from dcsim.placers.builtin import PLACERS

    found = {n: r.cls for n, r in plugins.registered("placer").items()}
    for cls in PLACERS:
        found.setdefault(cls.name, cls)
    if name not in found:
        raise PluginError(f"unknown placer {name!r}; available: {', '.join(sorted(found))} "
                          "(see `dcsim plugins`)")
    return found[name]


def _default_lookup(name: str) -> type:
    from dcsim.plugins import get_plugin_class

    return get_plugin_class(name, "rescheduler")


def parse_online(spec: dict[str, Any] | None, where: str = "vm",
                 rescheduler_cls_lookup: Callable[[str], type] | None = None) -> OnlineSpec:
    """The online ``vm:`` section validated: its fields, and the rescheduler's name and
    options (files are not looked at; see :func:`check_online`). ConfigError names the
    field."""
    s = validate_section(OnlineSpec, spec if spec is not None else {}, where)
    if s.reschedule is not None:
        build_rescheduler(s.reschedule, rescheduler_cls_lookup, None, where)
    return s


def check_online(spec: dict[str, Any] | None, base_dir: str | os.PathLike | None = None,
                 rescheduler_cls_lookup: Callable[[str], type] | None = None,
                 where: str = "vm") -> OnlineSpec:
    """Validate an online ``vm:`` section without running it (the runner's plan-time
    check): :func:`parse_online`, and that its files exist (relative to ``base_dir``)."""
    s = parse_online(spec, where, rescheduler_cls_lookup)
    if s.mapping.path is not None:
        p = resolve_path(s.mapping.path, base_dir)
        if not p.is_file():
            raise ConfigError(f"{where}.mapping.path: no such file: {p}")
        from dcsim.vm.mapping_io import load_mapping

        load_mapping(p)  # a malformed mapping fails here, as it would in every run
    if s.workload.trace is not None:
        p = resolve_path(s.workload.trace.path, base_dir)
        if not p.is_file():
            raise ConfigError(f"{where}.workload.trace.path: no such file: {p}")
    return s


def build_rescheduler(r: RescheduleSpec, lookup: Callable[[str], type] | None,
                      rng: np.random.Generator | None, where: str) -> Any:
    """The rescheduler ``r`` names, built with its options validated and ``rng`` (None when
    only checking the section). ``lookup`` finds a class by name (default: the registered
    reschedulers); ConfigError names the field at ``where``."""
    lookup = lookup or _default_lookup
    try:
        cls = lookup(r.algorithm)
    except PluginError as e:
        raise ConfigError(f"{where}.reschedule.algorithm: {e}") from None
    opts = cls.parse_options(r.options, where=f"{where}.reschedule.options")
    return cls(opts, rng=rng)
