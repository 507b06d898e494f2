"""Kept for compatibility: the code now lives in dcsim.allocators.multi.baselines."""

from dcsim.allocators.multi.baselines import *  # noqa: F401, F403
