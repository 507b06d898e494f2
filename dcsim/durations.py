"""Wall-clock durations as the progress lines of ``dcsim run`` and ``dcsim train`` write
them (one function both layers use, below either)."""

from __future__ import annotations


def duration(seconds: float) -> str:
    """``12.3 s``, ``4 min 05 s`` or ``1 h 02 min``."""
    m, s = divmod(int(round(seconds)), 60)
    h, m = divmod(m, 60)
    return f"{h} h {m:02d} min" if h else f"{m} min {s:02d} s" if m else f"{seconds:.1f} s"
