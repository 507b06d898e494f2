"""Kept for compatibility: now dcsim.allocators.multi.learned.checkpoint."""

from dcsim.allocators.multi.learned.checkpoint import *  # noqa: F401, F403
