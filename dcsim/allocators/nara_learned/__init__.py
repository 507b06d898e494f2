"""Kept for compatibility: the code now lives in :mod:`dcsim.allocators.multi.learned`."""

from dcsim.allocators.multi.learned import *  # noqa: F401, F403
