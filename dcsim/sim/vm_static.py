"""Static VM rescheduling as an experiment run (``mode: reschedule``): the ``vm:`` section,
the mapping it names, and one rescheduler's run on it.

The ``vm:`` section of a static experiment (:class:`StaticSpec`)::

    vm:
      mapping: {synthetic: production}   # or small, medium, production_small; or {path: ...}
      mnl: 50

``mapping`` (:class:`MappingSpec`, shared with the online mode) is one of

* ``{synthetic: PRESET, seed_offset: 0}``: a mapping drawn by
  :func:`dcsim.vm.synthetic.synthetic_mapping` with the preset's settings
  (:data:`dcsim.vm.synthetic.PRESETS`: ``small`` 8 hosts and ``medium`` 280 hosts of Table
  1's mix; ``production`` 279 hosts and ``production_small`` 32 hosts of the production
  sample's mix, initial FR ≈ 0.60). Optional overrides: ``hosts``, ``target_cpu``, ``random_share``,
  ``numa_cpu``, ``numa_mem``. The generator is seeded from the run's workload generator
  (its first draw) and ``seed_offset``: every seed of an experiment gets its own mapping,
  every rescheduler of one seed the same one (the runner's workload generator depends only
  on the experiment seed and the seed index), and another ``seed_offset`` gives an
  independent family of mappings;
* ``{path: FILE.json}``: a mapping in the authors' format, relative to the experiment
  file's directory (``base_dir``);
* ``{hosts: N}``: N empty hosts of ``numa_cpu`` cores (44) and ``numa_mem`` MB (184388) per
  NUMA node — the online mode only (a static rescheduling needs VMs).

:func:`run_static` runs the rescheduler (validated step by step, see
:meth:`dcsim.reschedulers.Rescheduler.run`), hands its migration rows to
``sink("migrations", columns)`` (``step``, ``vm_id``, ``from_host``, ``from_numa``,
``to_host``, ``to_numa``, as ``dcsim reschedule`` writes them) and returns the summary
row's metrics.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, Field, ValidationError, model_validator

from dcsim.config_files import resolve_path
from dcsim.errors import ConfigError
from dcsim.validation import StrictModel, first_error
from dcsim.vm.model import Host, MappingState
from dcsim.vm.synthetic import NUMA_CPU, NUMA_MEM, PRESETS, synthetic_mapping

Sink = Callable[[str, dict[str, Any]], None]




class MappingSpec(StrictModel):
    """Where a run's mapping comes from: exactly one of ``synthetic``, ``path`` or (alone)
    ``hosts`` (see the module docstring)."""

    synthetic: Literal["small", "medium", "production", "production_small"] | None = None
    seed_offset: Annotated[int, Field(ge=0)] = 0
    path: str | None = None
    hosts: Annotated[int, Field(ge=1)] | None = None
    target_cpu: Annotated[float, Field(gt=0, le=1)] | None = None
    random_share: Annotated[float, Field(ge=0, le=1)] | None = None
    numa_cpu: Annotated[int, Field(ge=1)] = NUMA_CPU
    numa_mem: Annotated[int, Field(ge=0)] = NUMA_MEM

    @model_validator(mode="after")
    def _one_source(self) -> MappingSpec:
        given = self.model_fields_set
        if self.path is not None:
            extra = sorted(given - {"path"})
            if self.synthetic is not None or extra:
                raise ValueError(f"path: a mapping file takes no other keys (got "
                                 f"{', '.join(extra)})")
        elif self.synthetic is None:
            if self.hosts is None:
                raise ValueError("give one of synthetic (a preset: small, medium, production, "
                                 "production_small), path (a mapping "
                                 "file) or hosts (that many empty hosts)")
            extra = sorted(given - {"hosts", "numa_cpu", "numa_mem"})
            if extra:
                raise ValueError(f"{extra[0]}: only with synthetic (empty hosts take "
                                 "hosts, numa_cpu and numa_mem)")
        return self

    @property
    def empty(self) -> bool:
        return self.synthetic is None and self.path is None


class StaticSpec(StrictModel):
    """The ``vm:`` section of a ``mode: reschedule`` experiment."""

    mapping: MappingSpec
    mnl: Annotated[int, Field(ge=0)]

    @model_validator(mode="after")
    def _has_vms(self) -> StaticSpec:
        if self.mapping.empty:
            raise ValueError("mapping: a static rescheduling needs VMs: give synthetic or path")
        return self


def validate_section(model: type[BaseModel], raw: Any, where: str) -> Any:
    """``model`` validated from ``raw``; the first error as a :class:`ConfigError` naming
    the field path under ``where`` (e.g. ``vm.reschedule.mnl: Input should be ...``); an
    instance of ``model`` (a section parsed already) is returned as it is."""
    if isinstance(raw, model):
        return raw
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping of settings, got {raw!r}")
    try:
        return model.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(first_error(e, where, model=model, unknown=None)) from None


def mapping_rng(rng: np.random.Generator, seed_offset: int = 0) -> np.random.Generator:
    """The synthetic mapping's generator: seeded by ``rng``'s next draw and ``seed_offset``."""
    entropy = int(rng.integers(2**63))
    return np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=(seed_offset,)))


def build_mapping(spec: MappingSpec, rng: np.random.Generator,
                  base_dir: str | os.PathLike | None = None, where: str = "vm.mapping",
                  ) -> MappingState:
    """The initial :class:`MappingState` of ``spec``. Always takes one draw from ``rng``
    (so the draws after it do not depend on the kind of mapping)."""
    from dcsim.vm.mapping_io import load_mapping, parse_mapping

    gen = mapping_rng(rng, spec.seed_offset)
    if spec.path is not None:
        p = resolve_path(spec.path, base_dir)
        if not p.is_file():
            raise ConfigError(f"{where}.path: no such file: {p}")
        return load_mapping(p).state
    if spec.synthetic is not None:
        kw: dict[str, Any] = dict(PRESETS[spec.synthetic])
        for key in ("hosts", "target_cpu", "random_share"):
            if getattr(spec, key) is not None:
                kw[key] = getattr(spec, key)
        doc = synthetic_mapping(gen, numa_cpu=spec.numa_cpu, numa_mem=spec.numa_mem, **kw)
        return parse_mapping(doc, f"synthetic {spec.synthetic}").state
    width = max(4, len(str(spec.hosts - 1)))
    hosts = [Host(f"host-{h:0{width}d}", (spec.numa_cpu,) * 2, (spec.numa_mem,) * 2)
             for h in range(spec.hosts)]
    return MappingState(hosts, [], [])


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


def run_static(spec: dict[str, Any], rescheduler, rng: np.random.Generator,
               sink: Sink | None, base_dir: str | os.PathLike | None = None, *,
               where: str = "vm") -> dict[str, Any]:
    """Run ``rescheduler`` (an instance) on the mapping of ``spec`` (the ``vm:`` section)
    under its MNL; send the migration rows to ``sink("migrations", ...)`` and return::

        {"mnl", "fr_before", "fr_after", "migrations", "seconds", "bound", "status",
         "fragment_before", "fragment_after", "hosts", "vms", "migratable_vms", "info"}

    ``seconds`` is the rescheduler's own time; ``bound`` a lower bound on the reachable FR
    (the MIP's) or None; ``info`` the rescheduler's extra report as compact JSON text.
    Raises ConfigError for a bad section, PluginError for an invalid migration list.
    """
    s = validate_section(StaticSpec, spec if spec is not None else {}, where)
    state = build_mapping(s.mapping, rng, base_dir, f"{where}.mapping")
    result = rescheduler.run(state, s.mnl)
    after = result.state
    if sink is not None:
        from dcsim.vm.mapping_io import migration_columns
        sink("migrations", migration_columns(state, result.records))
    return {
        "mnl": s.mnl,
        **result.metrics(),
        "fragment_before": state.fragment(),
        "fragment_after": after.fragment() if after is not None else state.fragment(),
        "hosts": state.n_hosts,
        "vms": state.n_vms,
        "migratable_vms": int(state.vm_migratable.sum()),
        "info": json.dumps(result.info, sort_keys=True, separators=(",", ":"), default=str),
    }
