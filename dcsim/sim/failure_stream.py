"""The failure process of a run that writes records: its ``component_failures`` rows go to
the sink in batches, like the other tables' rows, instead of being held until the run
ends, and its schedule is held to the rate of :meth:`FailureSchedule.limit
<dcsim.sim.failures.FailureSchedule.limit>`. A run with frequent failures thus keeps its
memory flat; one whose failures would swamp it stops with an error."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import simpy

from dcsim.sim.core import FailureProcess, FailureTarget
from dcsim.sim.failures import FailureSchedule

#: rows per batch where the engine has no ``metrics.flush_rows`` (vm_online)
FLUSH_ROWS = 65536

TABLE = "component_failures"


class StreamedFailureProcess(FailureProcess):
    """A :class:`FailureProcess` that hands its rows to ``sink`` every ``flush_rows`` rows
    (the engine's last flush, through :meth:`columns`, sends the rest) and caps its
    schedule's events per arrival (``arrivals()``: the workload's arrivals so far)."""

    def __init__(self, env: simpy.Environment, schedule: FailureSchedule,
                 target: FailureTarget, avail_columns: Sequence[str],
                 sink: Callable[[str, dict[str, Any]], None] | None, flush_rows: int,
                 arrivals: Callable[[], int], unit: str):
        super().__init__(env, schedule, target, avail_columns)
        self.sink = sink
        self.flush_rows = max(int(flush_rows), 1)
        #: batches handed to the sink so far (the last flush not counted)
        self.batches = 0
        schedule.limit(arrivals, unit)

    def _apply(self, kind: str, comp: int, event: str) -> None:
        super()._apply(kind, comp, event)
        if self.sink is not None and len(self.rows["time"]) >= self.flush_rows:
            self.sink(TABLE, self.rows)
            self.batches += 1
            self.rows = {c: [] for c in self.rows}
