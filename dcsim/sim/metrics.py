"""Time-weighted accounting of what the cluster holds, over the measured window.

The engine calls :meth:`Meter.advance` before every state change; the meter integrates used
resources, per-tier link bandwidth and the number of active requests over simulated time,
but only while the measured window (after warm-up, until the last arrival) is open.
"""

from __future__ import annotations

import math

import numpy as np

from dcsim.model import Placement, Topology


class Meter:
    """Running totals of used capacity and their time integrals."""

    def __init__(self, topology: Topology):
        self.topology = topology
        self.capacity = topology.total_capacity().astype(np.float64)
        self.tiers = topology.tiers()
        tier_pos = {t: i for i, t in enumerate(self.tiers)}
        self.link_tier_pos = np.array(
            [tier_pos[int(t)] for t in topology.link_tier], dtype=np.int64
        )
        self.tier_capacity = np.zeros(len(self.tiers))
        if topology.n_links:
            np.add.at(self.tier_capacity, self.link_tier_pos, topology.link_capacity)
        self.used = np.zeros_like(self.capacity)
        self.tier_used = np.zeros(len(self.tiers))
        self.active = 0
        self._area = np.zeros_like(self.capacity)
        self._tier_area = np.zeros(len(self.tiers))
        self._active_area = 0.0
        self._last = 0.0
        self.open = False
        self.closed = False
        self.start = math.nan
        self.end = math.nan

    def advance(self, now: float) -> None:
        """Integrate the current usage from the last event up to ``now``."""
        if self.open:
            dt = now - self._last
            if dt > 0.0:
                self._area += self.used * dt
                if self.tiers:
                    self._tier_area += self.tier_used * dt
                self._active_area += self.active * dt
        self._last = now

    def open_window(self, now: float) -> None:
        self.advance(now)
        self.open = True
        self.start = now

    def close_window(self, now: float) -> None:
        self.advance(now)
        if self.open:
            self.end = now
        self.open = False
        self.closed = True

    def add(self, p: Placement, sign: float) -> None:
        """Account for ``p`` being reserved (sign +1) or released (sign -1)."""
        self.used += sign * p.amounts.sum(axis=0)
        if p.links.size:
            np.add.at(self.tier_used, self.link_tier_pos[p.links], sign * p.bandwidth)
        self.active += 1 if sign > 0 else -1

    # ------------------------------------------------------------------ results
    def tier_label(self, tier: int) -> str:
        return self.topology.tier_name(tier).replace("-", "_").replace(" ", "_")

    def instant(self) -> dict[str, float]:
        """Current used fractions (for time series)."""
        out: dict[str, float] = {"active": float(self.active)}
        for name, u, c in zip(self.topology.resources, self.used, self.capacity, strict=True):
            out[f"util_{name}"] = float(u / c) if c > 0 else math.nan
        for t, u, c in zip(self.tiers, self.tier_used, self.tier_capacity, strict=True):
            out[f"util_bw_{self.tier_label(t)}"] = float(u / c) if c > 0 else math.nan
        return out

    def averages(self) -> dict[str, float]:
        """Time averages over the measured window (NaN if the window is empty)."""
        span = self.end - self.start if self.closed else math.nan
        ok = span > 0
        out: dict[str, float] = {}
        for name, a, c in zip(self.topology.resources, self._area, self.capacity, strict=True):
            out[f"util_{name}"] = float(a / (c * span)) if ok and c > 0 else math.nan
        for t, a, c in zip(self.tiers, self._tier_area, self.tier_capacity, strict=True):
            label = f"util_bw_{self.tier_label(t)}"
            out[label] = float(a / (c * span)) if ok and c > 0 else math.nan
        out["mean_concurrent"] = float(self._active_area / span) if ok else math.nan
        out["window_start"] = float(self.start)
        out["window_end"] = float(self.end)
        return out
