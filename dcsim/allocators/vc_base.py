"""Kept for compatibility: the code now lives in dcsim.allocators.vc.embedder."""

from dcsim.allocators.vc.embedder import *  # noqa: F401, F403
