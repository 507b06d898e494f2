"""The built-in trace formats: each importer of :mod:`dcsim.workload.importers` as a
:class:`~dcsim.workload.trace_format.TraceFormat`, its keywords its ``Options`` (the same
defaults and the same accepted values: a number is not a string, true is not 1)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pandas as pd
from pydantic import Field, StrictBool, StrictFloat, StrictInt, StrictStr

from dcsim.workload import importers
from dcsim.workload.trace_format import TraceFormat

# a float option takes an integer too (``horizon_days: 14``), never a string or a boolean
Number = StrictFloat | StrictInt


class Azure2017(TraceFormat):
    name = "azure2017"
    description = ("Azure 2017 VM stream, SOSP'21 rnn encoding (a folder: v1.<split>.txt, "
                   "v1.<split>.c<horizon>.txt, flav_map.txt); cpu = vCPUs, mem = GB")
    source = "directory"

    class Options(TraceFormat.Options):
        split: Literal["dev", "test"] = Field(
            "dev", description="which window of the encoding (workload.trace.split, "
                               "import-trace --split)")
        lifetime: Literal["mid", "lower", "uniform"] = Field(
            "mid", description="where an uncensored lifetime lies in its bin")
        spread: Literal["start", "even"] = Field(
            "start", description="start: every VM of a 300-s line at its timestamp; "
                                 "even: spread over the 300 s")
        seed: StrictInt = Field(0, description="seed of lifetime: uniform")

    def read(self, src: Path) -> pd.DataFrame:
        o = self.options
        return importers.import_azure2017(src, split=o.split, lifetime=o.lifetime,
                                          spread=o.spread, seed=o.seed)


class Alibaba2018(TraceFormat):
    name = "alibaba2018"
    description = ("Alibaba cluster-trace-v2018 batch_task: one row per task; cpu = cores, "
                   "mem = fraction of a machine")

    class Options(TraceFormat.Options):
        statuses: tuple[StrictStr, ...] | None = Field(
            ("Terminated",), description="statuses kept (null: all)")
        expand_instances: StrictBool = Field(
            False, description="one row per instance (ids job/task#i)")

    def read(self, src: Path) -> pd.DataFrame:
        o = self.options
        return importers.import_alibaba2018(src, statuses=o.statuses,
                                            expand_instances=o.expand_instances)


class Azure2020(TraceFormat):
    name = "azure2020"
    description = ("Azure Trace for Packing 2020 (CSV of the upstream query, or the sqlite "
                   "file); cpu / mem = fractions of one machine")

    class Options(TraceFormat.Options):
        horizon_days: Number = Field(
            90.0, description="end of the data: a VM alive then is censored there")
        machine_id: StrictInt = Field(
            16, description="machine type the sqlite file is queried for")

    def read(self, src: Path) -> pd.DataFrame:
        o = self.options
        return importers.import_azure2020(src, horizon_days=o.horizon_days,
                                          machine_id=o.machine_id)


class Alibaba2018Containers(TraceFormat):
    name = "alibaba2018_containers"
    description = ("Alibaba cluster-trace-v2018 container_meta: a table of request kinds "
                   "(one row per status event), no duration")

    def read(self, src: Path) -> pd.DataFrame:
        return importers.import_alibaba2018_containers(src)


class Azure2020VmTypes(TraceFormat):
    name = "azure2020_vmtypes"
    description = ("Azure Trace for Packing 2020 vmType: one row per (VM type, machine "
                   "type), no arrival or duration")

    class Options(TraceFormat.Options):
        machine_id: StrictInt | None = Field(
            None, description="keep only this machine type (null: all; required when the "
                              "file has no machineId column)")

    def read(self, src: Path) -> pd.DataFrame:
        return importers.import_azure2020_vmtypes(src, machine_id=self.options.machine_id)


BUILTIN_FORMATS: tuple[type[TraceFormat], ...] = (
    Azure2017, Alibaba2018, Azure2020, Alibaba2018Containers, Azure2020VmTypes)
