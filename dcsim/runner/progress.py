"""Progress inside a run, for the terminal's progress line of ``dcsim run``.

A run cannot tell the terminal how far it is: it may run in this process, in a pool worker
or on a Dask worker on the same machine. When ``dcsim run`` draws its progress line on a
terminal it names a scratch folder in the environment variable :data:`ENV` (inherited by
the workers it starts); each run then keeps one small file there,
``<run_id>.json`` (``{"done": requests offered, "total": requests or null, "time":
simulated time, "elapsed": wall seconds}``), rewritten about once a second by a watcher
thread and removed when the run ends. The watcher only *reads* the engine's counters, so
what a run computes, and its rows, do not depend on whether anyone watches. Off a terminal
(a log file, a batch job) the variable is unset and nothing is written.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

#: the environment variable naming the folder of the in-flight runs' progress files
ENV = "DCSIM_PROGRESS_DIR"

#: seconds between two writes of a run's progress file
INTERVAL = 1.0

#: ``probe()`` -> (requests offered so far, requests in all or None, simulated time)
Probe = Callable[[], tuple[int, "int | None", float]]


@contextmanager
def watch_run(run_id: str, probe: Probe, interval: float | None = None,
              folder: str | os.PathLike | None = None) -> Iterator[None]:
    """While the body runs, write ``probe()`` to ``<folder>/<run_id>.json`` every
    ``interval`` seconds (default :data:`INTERVAL`; ``folder`` defaults to
    ``$DCSIM_PROGRESS_DIR``; without one, do nothing). The file is removed when the body
    ends, however it ends."""
    interval = INTERVAL if interval is None else interval
    where = folder if folder is not None else os.environ.get(ENV)
    if not where or not Path(where).is_dir():
        yield
        return
    path = Path(where) / f"{run_id}.json"
    stop = threading.Event()
    t0 = time.monotonic()

    def write() -> None:
        try:
            done, total, now = probe()
        except Exception:  # the engine is not built yet, or is being torn down
            return
        record = {"done": int(done), "total": None if total is None else int(total),
                  "time": float(now), "elapsed": time.monotonic() - t0}
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            tmp.write_text(json.dumps(record))
            os.replace(tmp, path)
        except OSError:  # the folder went away (the command ended): stop quietly
            stop.set()

    def loop() -> None:
        while not stop.wait(interval):
            write()

    thread = threading.Thread(target=loop, name=f"dcsim-progress-{run_id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        path.unlink(missing_ok=True)


def in_flight(folder: str | os.PathLike) -> list[dict[str, Any]]:
    """The progress records of the runs in flight, by run id (unreadable or half-written
    files are skipped: they are rewritten within the second)."""
    out = []
    for p in sorted(Path(folder).glob("*.json")):
        try:
            record = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and isinstance(record.get("done"), int):
            out.append({"run_id": p.stem, **record})
    return out


def describe(records: list[dict[str, Any]]) -> str:
    """The in-flight part of the progress line: one run in detail, several as fractions."""
    if not records:
        return ""
    if len(records) == 1:
        r = records[0]
        if r.get("total"):
            return (f"this run: {r['done']:,} of {r['total']:,} requests "
                    f"({100 * r['done'] / r['total']:.0f} %), t = {r['time']:,.1f}")
        return f"this run: {r['done']:,} requests, t = {r['time']:,.1f}"
    parts = [f"{100 * r['done'] / r['total']:.0f} %" if r.get("total") else f"{r['done']:,}"
             for r in records]
    return f"{len(records)} running: " + ", ".join(parts)


def remaining(records: list[dict[str, Any]]) -> float | None:
    """Wall seconds until the slowest in-flight run ends, projected from its own pace; None
    when a run's total is unknown or it has offered nothing yet."""
    worst = 0.0
    for r in records:
        total, done = r.get("total"), r.get("done", 0)
        if not total or done <= 0:
            return None
        worst = max(worst, r["elapsed"] * (total - done) / done)
    return worst if records else None
