"""Time-weighted accounting of what the cluster holds, over the measured window.

Rather than integrating usage at every event, each accepted request adds its own
``amount × holding time`` once, when it is accepted; the few requests that straddle the
window's edges are corrected when the window opens (after warm-up) and closes (at the last
arrival). That is exact and costs one small numpy operation per request instead of several
per event.
"""

from __future__ import annotations

import math
from array import array

import numpy as np

from dcsim.model import ClusterState, Placement, Topology
from dcsim.modes.loss.streamed_sum import streamed_mean


def acceptance_last20(accepted: np.ndarray) -> float:
    """The Nara papers' acceptance: the running ratio averaged over the last 20 % of requests.

    ``accepted`` holds one flag per request, in arrival order. With ``n`` requests, ``A_k``
    the number accepted among the first ``k`` and ``m = ceil(n / 5)``, the value is the mean
    of ``A_k / k`` for ``k = n - m + 1 .. n``; NaN when ``n == 0``.
    """
    n = int(accepted.size)
    if n == 0:
        return math.nan
    m = -(-n // 5)  # ceil(n / 5) in integers (0.2 * n is inexact in floats)
    running = np.cumsum(accepted, dtype=np.int64)[n - m:] / np.arange(n - m + 1, n + 1)
    return float(running.mean())


class AcceptanceLog:
    """Accepted-or-not of every measured request in arrival order, one bit each."""

    def __init__(self) -> None:
        self._chunks: list[tuple[np.ndarray, int]] = []

    def extend(self, accepted: np.ndarray) -> None:
        if accepted.size:
            self._chunks.append((np.packbits(accepted), accepted.size))

    def flags(self) -> np.ndarray:
        if not self._chunks:
            return np.zeros(0, dtype=bool)
        return np.concatenate([np.unpackbits(b, count=n).astype(bool) for b, n in self._chunks])

    def last20(self) -> float:
        """:func:`acceptance_last20` of :meth:`flags`, the same float, without unpacking the
        whole log: the accepted count before the last ``m`` requests is counted chunk by
        chunk, and the running ratios of the last ``m`` are made a block at a time, as
        :func:`~dcsim.modes.loss.streamed_sum.streamed_mean` reads them (memory flat in ``n``)."""
        n = sum(k for _, k in self._chunks)
        if n == 0:
            return math.nan
        m = -(-n // 5)
        head, before, seen, first = n - m, 0, 0, len(self._chunks)
        for i, (bits, k) in enumerate(self._chunks):
            if seen + k > head:     # the chunk holding request ``head`` (0-based)
                first = i
                break
            before += int(np.unpackbits(bits, count=k).sum(dtype=np.int64))
            seen += k
        chunks = iter(self._chunks[first:])
        pending = np.zeros(0, dtype=bool)
        skip = head - seen          # flags of the first tail chunk before ``head``
        count, k_done = before, head

        def read(k: int) -> np.ndarray:
            nonlocal pending, skip, count, k_done
            parts, have = [], 0
            while have < k:
                if not pending.size:
                    bits, size = next(chunks)
                    pending = np.unpackbits(bits, count=size).astype(bool)
                    if skip:
                        count += int(np.count_nonzero(pending[:skip]))
                        pending, skip = pending[skip:], 0
                        continue
                take = pending[:k - have]
                pending = pending[take.size:]
                parts.append(take)
                have += take.size
            flags = np.concatenate(parts) if len(parts) > 1 else parts[0]
            acc = count + np.cumsum(flags, dtype=np.int64)
            count = int(acc[-1])
            out = acc / np.arange(k_done + 1, k_done + k + 1)
            k_done += k
            return out

        return streamed_mean(m, read)


def last50_mean(samples: np.ndarray) -> float:
    """Mean of the last 50 % of per-request samples: ``samples[n // 2:]`` (the Nara authors'
    ``range(int(5 * n / 10), n)``); NaN when there are none."""
    n = int(samples.size)
    return float(samples[n // 2:].mean()) if n else math.nan


class SpilledSamples:
    """The per-request samples of one resource (float32, appended to :attr:`buffer` on the
    hot path), moved to a temporary file a block at a time (:meth:`spill`) so that a long
    run holds at most :data:`SPILL` of them in memory; :meth:`tail_mean` reads back only
    what it needs, a block at a time, and gives the mean numpy computes over the same
    samples held in memory as one float64 array."""

    def __init__(self) -> None:
        self.buffer = array("f")
        self._file = None
        self.spilled = 0

    def __len__(self) -> int:
        return self.spilled + len(self.buffer)

    def spill(self) -> None:
        """Move the buffered samples to the file (keeping the same ``buffer`` object, whose
        bound ``append`` the engine holds)."""
        if not self.buffer:
            return
        if self._file is None:
            import tempfile

            self._file = tempfile.TemporaryFile()
        self._file.write(self.buffer.tobytes())
        self.spilled += len(self.buffer)
        del self.buffer[:]

    def tail_mean(self, skip: int) -> float:
        """``mean(samples[skip:][n // 2:])`` of the ``n = len - skip`` samples after the
        first ``skip``, in float64 (the float numpy gives, summed a block at a time by
        :func:`~dcsim.modes.loss.streamed_sum.streamed_mean`); NaN when there are none."""
        n = len(self) - skip
        if n <= 0:
            return math.nan
        start = skip + n // 2
        pos = start
        if start < self.spilled:
            self._file.seek(start * 4)

        def read(k: int) -> np.ndarray:
            nonlocal pos
            out = np.empty(k, dtype=np.float64)
            got = 0
            if pos < self.spilled:   # from the file
                got = min(k, self.spilled - pos)
                out[:got] = np.frombuffer(self._file.read(got * 4), dtype=np.float32)
            if got < k:              # then from the buffer
                lo = pos + got - self.spilled
                view = np.frombuffer(self.buffer, dtype=np.float32)
                out[got:] = view[lo:lo + k - got]
                del view             # release the buffer's export
            pos += k
            return out

        return streamed_mean(len(self) - start, read)

    def values(self) -> np.ndarray:
        """Every sample, as float64 (for tests and small runs)."""
        parts = []
        if self.spilled:
            self._file.seek(0)
            parts.append(np.frombuffer(self._file.read(self.spilled * 4), dtype=np.float32))
        parts.append(np.frombuffer(self.buffer, dtype=np.float32))
        out = np.concatenate(parts).astype(np.float64)
        parts.clear()
        return out


#: samples of a resource held in memory before they are moved to a temporary file (4 MB)
SPILL = 1 << 20


class Meter:
    """Time integrals of used resources, per-tier bandwidth and active requests."""

    def __init__(self, topology: Topology):
        self.topology = topology
        self.capacity = topology.total_capacity().astype(np.float64)
        self.tiers = topology.tiers()
        tier_pos = {t: i for i, t in enumerate(self.tiers)}
        self.link_tier_pos = np.array(
            [tier_pos[int(t)] for t in topology.link_tier], dtype=np.int64
        )
        self.tier_capacity = np.bincount(
            self.link_tier_pos, weights=topology.link_capacity, minlength=len(self.tiers)
        ).astype(np.float64)
        # request id -> (start, end, resources taken, per-tier bandwidth or None)
        self.active: dict[int, tuple[float, float, list[float], np.ndarray | None]] = {}
        # integrals kept as Python floats: a few resources, updated once per request
        self._area = [0.0] * len(self.capacity)
        self._tier_area = np.zeros(len(self.tiers))
        self._active_area = 0.0
        self.open = False
        self.closed = False
        self.start = math.nan
        self.end = math.nan
        # what accepted requests hold now, per resource (for the per-request samples)
        self.used = [0.0] * len(self.capacity)
        # used fraction per resource at each measured request's decision (float32: 4 bytes
        # per request and resource), plus one after the last decision
        # (moved to a temporary file every SPILL samples: SpilledSamples)
        self._samples = [SpilledSamples() for _ in self.capacity]
        self._decision_util = [s.buffer for s in self._samples]
        # (log, resource index, capacity as a Python float) per resource with capacity;
        # the others log NaN (plain floats: numpy scalars cost ~1 us per operation)
        self._util_logs = [(log, j, float(c)) for j, (log, c) in
                           enumerate(zip(self._decision_util, self.capacity.tolist(), strict=True))
                           if c > 0]
        self._nan_logs = [log for log, c in zip(self._decision_util, self.capacity.tolist(),
                                                 strict=True)
                          if not c > 0]
        if len(self.capacity) == 2:
            self._unroll_two()

    def _unroll_two(self) -> None:
        """With two resources (cpu and mem, the common case), the per-request methods as
        closures unrolled over them: the same floating-point operations on the same
        accumulators, without the loops (they run once per request)."""
        used, area, active = self.used, self._area, self.active

        def held(rid: int, start: float, end: float, amount: list[float],
                 tier_bw: np.ndarray | None = None) -> None:
            active[rid] = (start, end, amount, tier_bw)
            a0, a1 = amount
            used[0] += a0
            used[1] += a1
            if self.open:
                span = end - start
                area[0] += a0 * span
                area[1] += a1 * span
                if tier_bw is not None:
                    self._tier_area += tier_bw * span
                self._active_area += span

        def departed(rid: int) -> None:
            a0, a1 = active.pop(rid)[2]
            used[0] -= a0
            used[1] -= a1

        self.held = held  # type: ignore[method-assign]
        self.departed = departed  # type: ignore[method-assign]
        if len(self._util_logs) == 2:
            (log0, _, c0), (log1, _, c1) = self._util_logs

            def decision_sample() -> None:
                log0.append(used[0] / c0)
                log1.append(used[1] / c1)

            self.decision_sample = decision_sample  # type: ignore[method-assign]

    def _tier_bw(self, p: Placement) -> np.ndarray | None:
        if not p.links.size:
            return None
        return np.bincount(
            self.link_tier_pos[p.links], weights=p.bandwidth, minlength=len(self.tiers)
        )

    def _add(self, amount: list[float], tier_bw: np.ndarray | None, span: float) -> None:
        area = self._area
        for j, a in enumerate(amount):
            area[j] += a * span
        if tier_bw is not None:
            self._tier_area += tier_bw * span
        self._active_area += span

    def accepted(self, rid: int, start: float, end: float, p: Placement,
                 amount: list[float] | None = None) -> None:
        """Count ``p`` from ``start`` to ``end`` (clipped to the window when it closes).

        ``amount`` is ``p``'s total per resource as floats, when the caller already has it.
        """
        if amount is None:
            amount = p.amounts.sum(axis=0).tolist()
        self.held(rid, start, end, amount, self._tier_bw(p) if p.links.shape[0] else None)

    def held(self, rid: int, start: float, end: float, amount: list[float],
             tier_bw: np.ndarray | None = None) -> None:
        """Count ``amount`` (and ``tier_bw``, the bandwidth per link tier) from ``start`` to
        ``end``: :meth:`accepted` once the placement is read, and the engine's fused path
        for one server without links."""
        self.active[rid] = (start, end, amount, tier_bw)
        used = self.used
        if self.open:  # _add, inlined: once per accepted request
            span = end - start
            area = self._area
            for j, a in enumerate(amount):
                used[j] += a
                area[j] += a * span
            if tier_bw is not None:
                self._tier_area += tier_bw * span
            self._active_area += span
        else:
            for j, a in enumerate(amount):
                used[j] += a

    def departed(self, rid: int) -> None:
        amount = self.active.pop(rid)[2]
        used = self.used
        for j, a in enumerate(amount):
            used[j] -= a

    def interrupted(self, rid: int, now: float) -> None:
        """A failure released ``rid`` at ``now``, before its end: it counts up to ``now``."""
        start, end, amount, tier_bw = self.active.pop(rid)
        used = self.used
        for j, a in enumerate(amount):
            used[j] -= a
        if self.open:  # counted from max(start, window start) to end so far
            self._add(amount, tier_bw, -(end - max(now, start)))

    def accumulators(self) -> list[float]:
        """``used`` per resource, the area per resource and the active area, as floats: what
        a compiled loop (:mod:`dcsim.modes.loss.compiled_loop`) carries on from here and
        hands back with :meth:`set_accumulators`."""
        return [*self.used, *self._area, self._active_area]

    def set_accumulators(self, acc: list[float]) -> None:
        """Take back :meth:`accumulators` (in place: the per-request closures hold the lists)."""
        k = len(self.used)
        self.used[:] = acc[:k]
        self._area[:] = acc[k:2 * k]
        self._active_area = acc[2 * k]

    def decision_samples(self, util: list[np.ndarray]) -> None:
        """:meth:`decision_sample` for many requests at once: ``util[j]`` holds resource j's
        used fractions (float64), stored as the float32 each single sample would be; every
        resource must have capacity."""
        for log, u in zip(self._decision_util, util, strict=True):
            log.frombytes(u.astype(np.float32).tobytes())

    def decision_sample(self) -> None:
        """Record the used fraction of each resource now (the engine calls it as a measured
        request is offered to the allocator, after any wait, and once after the last one)."""
        used = self.used
        for log, j, c in self._util_logs:
            log.append(used[j] / c)
        for log in self._nan_logs:
            log.append(math.nan)

    def per_request_util(self) -> dict[str, np.ndarray]:
        """The Nara authors' utilisation samples, one per measured request: request i's is
        the used fraction when request i + 1 is offered (after the departures and any wait
        before it), the last request's right after its decision — what their environment
        reports at the end of each request's step (``packing_env.py``: ``info['util']``
        after the next request is loaded, ``scripts/rollout.py`` logs it per request)."""
        return {name: s.values()[1:]
                for name, s in zip(self.topology.resources, self._samples, strict=True)}

    def spill_samples(self) -> None:
        """Move the per-request samples to their files once a block has gathered (the
        engine calls it after each batch), so memory stays flat however long the run."""
        for s in self._samples:
            if len(s.buffer) >= SPILL:
                s.spill()

    def open_window(self, now: float) -> None:
        """Start measuring; requests held since warm-up count from ``now``."""
        for _start, end, amount, tier_bw in self.active.values():
            self._add(amount, tier_bw, end - now)
        self.open = True
        self.start = now

    def close_window(self, now: float) -> None:
        """Stop measuring; requests still held count only up to ``now``."""
        if self.open:
            for start, end, amount, tier_bw in self.active.values():
                # each was counted up to ``end`` from max(start, window start)
                self._add(amount, tier_bw, -(end - max(now, start)))
            self.end = now
        self.open = False
        self.closed = True

    # ------------------------------------------------------------------ results
    def tier_label(self, tier: int) -> str:
        return self.topology.tier_label(tier)

    def instant(self, state: ClusterState, down: np.ndarray | None = None,
                link_down: np.ndarray | None = None) -> dict[str, float]:
        """Used fractions right now (for time series), read from the state; ``down`` (the
        failed servers' capacity per resource) and ``link_down`` (a mask of failed links)
        hold no free capacity but are not used."""
        out: dict[str, float] = {"active": float(len(self.active))}
        used = self.capacity - state.free.sum(axis=0)
        if down is not None:
            used = used - down
        for name, u, c in zip(self.topology.resources, used, self.capacity, strict=True):
            out[f"util_{name}"] = float(u / c) if c > 0 else math.nan
        if self.tiers:
            link_used = state.link_used
            if link_down is not None:
                link_used = np.where(link_down, 0.0, link_used)
            tier_used = np.bincount(
                self.link_tier_pos, weights=link_used, minlength=len(self.tiers)
            )
            for t, u, c in zip(self.tiers, tier_used, self.tier_capacity, strict=True):
                out[f"util_bw_{self.tier_label(t)}"] = float(u / c) if c > 0 else math.nan
        return out

    def averages(self) -> dict[str, float]:
        """Time averages over the measured window (NaN if the window is empty)."""
        span = self.end - self.start if self.closed else math.nan
        ok = span > 1e-100  # below this float times carry no usable area (NaN, not noise)
        out: dict[str, float] = {}
        for name, a, c in zip(self.topology.resources, self._area, self.capacity, strict=True):
            out[f"util_{name}"] = float(a / (c * span)) if ok and c > 0 else math.nan
        for t, a, c in zip(self.tiers, self._tier_area, self.tier_capacity, strict=True):
            label = f"util_bw_{self.tier_label(t)}"
            out[label] = float(a / (c * span)) if ok and c > 0 else math.nan
        for name, samples in zip(self.topology.resources, self._samples, strict=True):
            # Nara 2021 Table 2 (scripts/plots.py util()): per-request samples, last 50 %
            # (last50_mean of per_request_util, read back from the file a block at a time)
            out[f"util_{name}_last50"] = samples.tail_mean(1)
        out["mean_concurrent"] = float(self._active_area / span) if ok else math.nan
        out["window_start"] = float(self.start)
        out["window_end"] = float(self.end)
        return out
