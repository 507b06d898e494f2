"""Kept for compatibility: the code now lives in dcsim.allocators.multi.rack_search."""

from dcsim.allocators.multi.rack_search import *  # noqa: F401, F403
