"""The progress of a ``dcsim run``: its progress line (:class:`ProgressLine`), and how far
the runs in flight are.

A run cannot tell the command how far it is: it may run in this process, in a pool worker
or on a Dask worker on the same machine. While ``dcsim run`` reports progress (on a
terminal, and off one unless ``--progress-every 0``) it names a scratch folder in the
environment variable :data:`ENV` (inherited by the workers it starts); each run then keeps
one small file there, ``<run_id>.json`` (``{"done": requests offered, "total": requests or
null, "time": simulated time or null, "elapsed": wall seconds}``), rewritten about once a second
(:data:`INTERVAL`, or :data:`ENV_INTERVAL` seconds) by a watcher thread and removed when
the run ends. The watcher only *reads* the engine's counters, so what a run computes, and
its rows, do not depend on whether anyone watches. Without the variable (a Dask worker
that ``dcsim run`` did not start, a run outside ``dcsim run``) nothing is written.
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

from dcsim.durations import duration

#: the environment variable naming the folder of the in-flight runs' progress files
ENV = "DCSIM_PROGRESS_DIR"

#: the environment variable that shortens :data:`INTERVAL` (set by :class:`ProgressLine`
#: when its lines come more often than once a second)
ENV_INTERVAL = "DCSIM_PROGRESS_INTERVAL"

#: seconds between two writes of a run's progress file
INTERVAL = 1.0

#: seconds between two progress lines off a terminal (``dcsim run --progress-every``)
EVERY = 10.0

#: ``probe()`` -> (requests offered so far, requests in all or None, simulated time or
#: None where the run has no clock: gpu mode's one pass)
Probe = Callable[[], tuple[int, "int | None", "float | None"]]


@contextmanager
def watch_run(run_id: str, probe: Probe, interval: float | None = None,
              folder: str | os.PathLike | None = None) -> Iterator[None]:
    """While the body runs, write ``probe()`` to ``<folder>/<run_id>.json`` every
    ``interval`` seconds (default ``$DCSIM_PROGRESS_INTERVAL``, else :data:`INTERVAL`;
    ``folder`` defaults to ``$DCSIM_PROGRESS_DIR``; without one, do nothing). The file is
    removed when the body ends, however it ends."""
    interval = _interval() if interval is None else interval
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
                  "time": None if now is None else float(now),
                  "elapsed": time.monotonic() - t0}
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


def _interval() -> float:
    """:data:`INTERVAL`, or the shorter interval ``$DCSIM_PROGRESS_INTERVAL`` names."""
    try:
        asked = float(os.environ.get(ENV_INTERVAL, ""))
    except ValueError:
        return INTERVAL
    return min(INTERVAL, max(asked, 0.05)) if asked > 0 else INTERVAL


def in_flight(folder: str | os.PathLike) -> list[dict[str, Any]]:
    """The progress records of the runs in flight, by run id (unreadable or half-written
    files are skipped: they are rewritten within the second)."""
    out = []
    for p in sorted(Path(folder).glob("*.json")):
        try:
            record = json.loads(p.read_text())
        except (OSError, ValueError, RecursionError):
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
        at = f", t = {r['time']:,.1f}" if r.get("time") is not None else ""  # one pass: none
        if r.get("total"):
            return (f"this run: {r['done']:,} of {r['total']:,} requests "
                    f"({100 * r['done'] / r['total']:.0f} %){at}")
        return f"this run: {r['done']:,} requests{at}"
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


class ProgressLine:
    """Progress of a ``dcsim run``: ``[k/N] runs done, <elapsed> elapsed, ETA <t>``.

    The ETA projects this invocation's own runs (runs kept by ``--resume`` are not counted):
    at each finished run, the end is re-estimated as its time plus the mean time per run so
    far × the runs left, and between runs the ETA counts down to that end, so it never
    stands still while runs of different costs are under way. On a terminal the line is
    redrawn in place every second. Off one (a log file, a batch job) one plain line is
    written per finished run, and one every ``every`` seconds (default :data:`EVERY`) when
    no line came in that time, so a log shows a long run moving; ``every=0``: per finished
    run only.

    The line also shows the runs in flight (:mod:`dcsim.runner.progress`): requests offered
    and simulated time of a single run, the fraction done of several; and while the runs
    left are all in flight, the ETA is projected from their own pace, so a single long run
    has one before it ends. The scratch folder the runs report into is made on entering
    and removed on leaving (``watch=False``: none; default: on a terminal, and off one
    while ``every`` lines are written)."""

    def __init__(self, total: int, before: int, stream, tty: bool, clock=time.perf_counter,
                 watch: bool | None = None, every: float | None = None):
        self.total, self.before, self.stream, self.tty, self.clock = (
            total, before, stream, tty, clock)
        self.every = EVERY if every is None else max(float(every), 0.0)
        self.watch = (tty or self.every > 0) if watch is None else watch
        self.folder: Path | None = None  # the in-flight runs' progress files
        self._env_before: dict[str, str | None] = {}
        self.done = 0
        self.t0 = clock()
        self.said = self.t0  # when the last plain line was written (off a terminal)
        self.end: float | None = None  # projected end, from the runs finished so far
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def status(self) -> str:
        now = self.clock() - self.t0
        left = self.total - self.done
        flight = self._in_flight()
        eta = ""
        if left:
            end = None if self.end is None else max(self.end - now, 0.0)
            if flight and len(flight) >= left:  # the last runs: their own pace tells
                own = remaining(flight)
                end = own if own is not None else end
            eta = ", ETA --" if end is None else f", ETA {duration(end)}"
        line = f"[{self.done}/{self.total}] runs done, {duration(now)} elapsed{eta}"
        if flight:
            line += f"; {describe(flight)}"
        return line

    def _in_flight(self) -> list:
        if self.folder is None:
            return []
        return in_flight(self.folder)

    def _say(self) -> None:
        """One plain line (off a terminal); the caller holds the lock."""
        self.stream.write(self.status() + "\n")
        self.stream.flush()
        self.said = self.clock()

    def update(self, n: int) -> None:
        with self._lock:
            self.done += n
            if self.done <= self.before:  # kept by --resume: no time of this invocation
                return
            now = self.clock() - self.t0
            self.end = now + now / (self.done - self.before) * (self.total - self.done)
            if not self.tty:
                self._say()

    def heartbeat(self) -> None:
        """Off a terminal: a line, unless one was written less than ``every`` seconds ago
        (a run that finished just now said it)."""
        with self._lock:
            if self.clock() - self.said >= self.every * 0.999:  # the wait's own rounding
                self._say()

    def _draw(self) -> None:
        import shutil

        width = shutil.get_terminal_size((120, 24)).columns - 1  # one line, redrawn in place
        with self._lock:
            self.stream.write("\r" + self.status()[:width] + "\033[K")
            self.stream.flush()

    def _set_env(self, name: str, value: str) -> None:
        self._env_before.setdefault(name, os.environ.get(name))
        os.environ[name] = value  # inherited by the workers started after

    def __enter__(self):
        if self.watch:
            import tempfile

            self.folder = Path(tempfile.mkdtemp(prefix="dcsim-progress-"))
            self._set_env(ENV, str(self.folder))
            if not self.tty and 0 < self.every < 2 * INTERVAL:  # fresh numbers each line
                self._set_env(ENV_INTERVAL, repr(self.every / 2))
        if self.tty:
            def tick() -> None:
                while not self._stop.wait(1.0):
                    self._draw()

            self._draw()
        elif self.every > 0:
            def tick() -> None:
                while not self._stop.wait(self.every):
                    self.heartbeat()
        else:
            return self
        self._thread = threading.Thread(target=tick, name="dcsim-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
            self._thread = None
        if self.tty:
            self._draw()
            self.stream.write("\n")
            self.stream.flush()
        if self.folder is not None:
            import shutil

            for name, before in self._env_before.items():
                if before is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = before
            self._env_before = {}
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None
        return False
