"""The ``vm:`` section of a ``mode: reschedule`` experiment (:class:`StaticSpec`)::

    vm:
      mapping: {synthetic: production}   # or small, medium, production_small; or {path: ...}
      mnl: 50

``mapping`` is a :class:`~dcsim.vm.mapping_spec.MappingSpec` (shared with the online mode;
its docstring lists the kinds); a static rescheduling needs VMs, so not ``{hosts: N}``.
``mnl``: the most VMs the rescheduler may migrate. Imports no SimPy.
"""

from __future__ import annotations

import os
from typing import Annotated, Any

from pydantic import Field, model_validator

from dcsim.config_files import resolve_path
from dcsim.errors import ConfigError
from dcsim.validation import StrictModel, validate_section
from dcsim.vm.mapping_spec import MappingSpec


class StaticSpec(StrictModel):
    """The ``vm:`` section of a ``mode: reschedule`` experiment."""

    mapping: MappingSpec
    mnl: Annotated[int, Field(ge=0)]

    @model_validator(mode="after")
    def _has_vms(self) -> StaticSpec:
        if self.mapping.empty:
            raise ValueError("mapping: a static rescheduling needs VMs: give synthetic or path")
        return self


def parse_static(spec: dict[str, Any] | None, where: str = "vm") -> StaticSpec:
    """The static ``vm:`` section validated (fields only); ConfigError names the field."""
    return validate_section(StaticSpec, spec if spec is not None else {}, where)


def check_static(spec: dict[str, Any] | None, base_dir: str | os.PathLike | None = None,
                 where: str = "vm") -> StaticSpec:
    """Validate a static ``vm:`` section without running it (for the runner's plan-time
    checks): fields, and that a mapping file exists (relative to ``base_dir``)."""
    s = parse_static(spec, where)
    if s.mapping.path is not None:
        p = resolve_path(s.mapping.path, base_dir)
        if not p.is_file():
            raise ConfigError(f"{where}.mapping.path: no such file: {p}")
        from dcsim.vm.mapping_io import load_mapping

        load_mapping(p)  # a malformed mapping fails here, as it would in every run
    return s
