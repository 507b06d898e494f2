"""Kept for compatibility: the code now lives in dcsim.allocators.single."""

from dcsim.allocators.single import *  # noqa: F401, F403
