"""Column-oriented record buffers: appending to lists is the cheapest per-event bookkeeping."""

from __future__ import annotations

from collections import defaultdict
from typing import Any


class ColumnBuffer:
    """Rows held as one list per column, handed to a sink in batches and then cleared."""

    def __init__(self, names: list[str] | None):
        self._names = list(names or [])
        self.columns: defaultdict[str, list] = defaultdict(list)
        self.rows = 0
        self.clear()

    def append_row(self, row: dict[str, Any]) -> None:
        for k, v in row.items():
            self.columns[k].append(v)
        self.rows += 1

    def clear(self) -> None:
        self.columns = defaultdict(list)
        for n in self._names:
            self.columns[n]  # fix the column order up front
        self.rows = 0
