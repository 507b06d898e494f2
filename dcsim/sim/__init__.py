"""The SimPy layer: processes that move time, call allocators and record what happened."""

from dcsim.sim.config import EngineConfig
from dcsim.sim.engine import Engine

__all__ = ["Engine", "EngineConfig"]
