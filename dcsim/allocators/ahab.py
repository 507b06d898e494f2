"""Kept for compatibility: now dcsim.allocators.vc.ahab, and vc.lookahead's advance."""

from dcsim.allocators.vc.ahab import *  # noqa: F401, F403
from dcsim.allocators.vc.lookahead import *  # noqa: F401, F403
