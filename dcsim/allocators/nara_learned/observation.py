"""Kept for compatibility: now dcsim.allocators.multi.learned.observation."""

from dcsim.allocators.multi.learned.observation import *  # noqa: F401, F403
