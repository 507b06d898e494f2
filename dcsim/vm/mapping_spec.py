"""The ``mapping:`` of a VM experiment's ``vm:`` section (:class:`MappingSpec`, read by modes
reschedule and vm_online) and the initial :class:`~dcsim.vm.model.MappingState` it names
(:func:`build_mapping`).

``mapping`` is one of

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
"""

from __future__ import annotations

import os
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field, model_validator

from dcsim.config_files import resolve_path
from dcsim.errors import ConfigError
from dcsim.validation import StrictModel
from dcsim.vm.model import Host, MappingState
from dcsim.vm.synthetic import NUMA_CPU, NUMA_MEM, PRESETS, synthetic_mapping


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
