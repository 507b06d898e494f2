"""Queue mode's sections: ``queue:`` (:class:`QueueSpec`, DeepRM's environment), the
``topology:`` it defaults to (:data:`QUEUE_TOPOLOGY`) and ``workload:``, where the job sets
come from. Imports no SimPy.

A queue-mode run plays ``jobsets`` independent job sets (episodes) of ``steps`` arrival
steps each, one after another on a fresh machine, and averages over all their jobs (the
DeepRM authors' evaluation: 100 sets of 50 steps). Two sources:

``kind: deeprm`` — DeepRM's synthetic distribution (:func:`dcsim.queue.jobs.deeprm_jobset`)::

    workload: {kind: deeprm, new_job_rate: 0.7, jobsets: 100, steps: 50}

``kind: trace`` — jobs of a real trace (the Alibaba 2018 ``batch_task`` sample, or any
standard request table with ``arrival``, ``duration`` and one column per resource),
mapped to steps and slots by :func:`dcsim.queue.jobs.jobs_from_table`. Each job set is a
window of ``steps`` × ``time_unit`` seconds starting at a uniformly drawn job of the trace
(the run's workload generator draws the starts, so seeds give different windows)::

    workload: {kind: trace, path: ../traces/alibaba2018_slice.csv, time_unit: 10}
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import pandas as pd
from pydantic import ConfigDict, Field, ValidationError, field_validator

from dcsim.csv_tables import read_csv
from dcsim.errors import ConfigError
from dcsim.parquet_tables import read_parquet
from dcsim.queue.jobs import ALIBABA_SCALE, JobSet, deeprm_jobset, jobs_from_table
from dcsim.validation import ConfigModel, StrictModel
from dcsim.workload.distributions import validation_message


class QueueSpec(StrictModel):
    """Queue mode's environment (DeepRM): visible slots, backlog, resource horizon."""

    slots: Annotated[int, Field(ge=1)] = 10
    backlog: Annotated[int, Field(ge=0)] = 60
    horizon: Annotated[int, Field(ge=1)] = 20
    max_steps: Annotated[int, Field(ge=1)] = 10_000


#: queue mode's default machine: DeepRM's two resources of 10 slots each
QUEUE_TOPOLOGY = {"kind": "flat", "servers": 1, "server": {"cpu": 10, "mem": 10}}

IntRange = Annotated[tuple[int, int], Field(description="inclusive [low, high]")]


class _Jobs(ConfigModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    name: str | None = None
    jobsets: int = Field(100, ge=1, description="job sets (episodes) per run")
    steps: int = Field(50, ge=1, description="arrival steps per job set")


class DeepRMJobs(_Jobs):
    """DeepRM's distribution: Bernoulli arrivals, bimodal lengths, one dominant resource."""

    kind: Literal["deeprm"] = "deeprm"
    new_job_rate: float = Field(0.7, ge=0.0, le=1.0)
    short_prob: float = Field(0.8, ge=0.0, le=1.0)
    short_len: IntRange = (1, 3)
    long_len: IntRange = (10, 15)
    dominant: IntRange = (5, 10)
    other: IntRange = (1, 2)


class TraceJobs(_Jobs):
    """Trace-driven jobs: windows of a real trace mapped to steps and slots."""

    kind: Literal["trace"] = "trace"
    path: str
    #: ``table`` (a standard request table) or any registered trace format, read through it
    format: str = "table"
    time_unit: float = Field(10.0, gt=0, description="seconds per arrival step")
    length_unit: float | None = Field(None, gt=0, description="seconds per step of length")
    scale: dict[str, float] = Field(default_factory=lambda: dict(ALIBABA_SCALE))
    max_length: int | None = Field(None, ge=1, description="clip longer jobs (steps)")


    @field_validator("format")
    @classmethod
    def _registered_format(cls, value: str) -> str:
        """``table`` or a registered trace format (asked only for a format)."""
        from dcsim.workload.trace_import import registered_format_name

        return registered_format_name(value)


JOB_SOURCES: dict[str, type[_Jobs]] = {"deeprm": DeepRMJobs, "trace": TraceJobs}


def parse_jobs(raw: Any, where: str = "workload") -> DeepRMJobs | TraceJobs:
    """Validate a queue-mode ``workload:`` mapping; errors name the field."""
    if isinstance(raw, DeepRMJobs | TraceJobs):
        return raw
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping with a `kind`")
    cls = JOB_SOURCES.get(raw.get("kind"))  # type: ignore[arg-type]
    if cls is None:
        raise ConfigError(f"{where}.kind: queue mode needs a job source, one of "
                          f"{', '.join(JOB_SOURCES)}; got {raw.get('kind')!r}")
    try:
        return cls.model_validate(raw)  # type: ignore[return-value]
    except ValidationError as e:
        raise ConfigError(validation_message(e, where, raw)) from None


def _trace_table(spec: TraceJobs, base_dir: Path | None, where: str) -> pd.DataFrame:
    from dcsim.workload.spec import resolve_path
    from dcsim.workload.trace_import import import_trace

    path = resolve_path(spec.path, base_dir, f"{where}.path")
    if spec.format != "table":  # through the registered format (with its default options)
        df = import_trace(spec.format, path)
    else:
        df = read_parquet(path) if path.suffix == ".parquet" else read_csv(path)
    return df.sort_values("arrival", kind="stable").reset_index(drop=True)


def build_jobsets(raw: Any, resources: tuple[str, ...], capacity: float,
                  rng: np.random.Generator, base_dir: Path | None = None,
                  where: str = "workload") -> list[JobSet]:
    """The run's job sets, drawn with ``rng`` (the run's workload generator)."""
    spec = parse_jobs(raw, where)
    if isinstance(spec, DeepRMJobs):
        params = spec.model_dump(exclude={"kind", "name", "jobsets"})
        return [deeprm_jobset(rng, resources=resources, **params) for _ in range(spec.jobsets)]
    df = _trace_table(spec, base_dir, where)
    missing = [c for c in ("arrival", "duration", *resources) if c not in df.columns]
    if missing:
        raise ConfigError(f"{where}.path: {spec.path}: no column(s) {missing} "
                          f"(columns: {', '.join(map(str, df.columns))})")
    unscaled = [r for r in resources if r not in spec.scale]
    if unscaled:
        raise ConfigError(f"{where}.scale: no factor for resource(s) {unscaled}")
    if df.empty:
        raise ConfigError(f"{where}.path: {spec.path}: the trace has no jobs")
    arrival = df["arrival"].to_numpy(np.float64)
    span = spec.steps * spec.time_unit
    # a window may start at any job that leaves a full window of trace after it
    last = int(np.searchsorted(arrival, arrival[-1] - span, side="right"))
    starts = rng.integers(max(last, 1), size=spec.jobsets)
    sets = []
    for s in starts:
        window = df.iloc[s:int(np.searchsorted(arrival, arrival[s] + span, side="left"))]
        sets.append(jobs_from_table(
            window, resources=resources, time_unit=spec.time_unit,
            length_unit=spec.length_unit, scale=spec.scale, cap=capacity,
            steps=spec.steps, max_length=spec.max_length))
    return sets


def describe_jobs(raw: Any) -> dict[str, Any]:
    """The resolved ``workload:`` (every default filled in), for ``experiment.yaml``."""
    return parse_jobs(raw).model_dump(mode="json", exclude_none=True)
