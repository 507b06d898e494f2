"""Kept for compatibility: now dcsim.allocators.vc.kraken and vc.kraken.batch."""

from dcsim.allocators.vc.kraken import *  # noqa: F401, F403
from dcsim.allocators.vc.kraken.batch import *  # noqa: F401, F403
