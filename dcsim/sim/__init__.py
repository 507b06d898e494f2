"""The SimPy layer: processes that move time, call allocators and record what happened."""

from dcsim.sim.engine import Engine, EngineConfig

__all__ = ["Engine", "EngineConfig"]
