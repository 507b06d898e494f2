"""Kept for compatibility: the code now lives in dcsim.allocators.multi.rack_index."""

from dcsim.allocators.multi.rack_index import *  # noqa: F401, F403
