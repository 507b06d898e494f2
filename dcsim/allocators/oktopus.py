"""Kept for compatibility: now dcsim.allocators.vc.oktopus (plugin, reference, batch)."""

from dcsim.allocators.vc.oktopus import *  # noqa: F401, F403
from dcsim.allocators.vc.oktopus.batch import *  # noqa: F401, F403
from dcsim.allocators.vc.oktopus.reference import *  # noqa: F401, F403
