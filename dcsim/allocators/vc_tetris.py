"""Kept for compatibility: now dcsim.allocators.vc.tetris (plugin, reference, batch)."""

from dcsim.allocators.vc.tetris import *  # noqa: F401, F403
from dcsim.allocators.vc.tetris.batch import *  # noqa: F401, F403
from dcsim.allocators.vc.tetris.reference import *  # noqa: F401, F403
