"""Kept for compatibility: now dcsim.allocators.multi.learned.network."""

from dcsim.allocators.multi.learned.network import *  # noqa: F401, F403
