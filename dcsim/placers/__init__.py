"""VM placement plugins for the online VM mode (:mod:`dcsim.modes.vm_online.engine`): given the live
mapping and an arriving VM, choose its host and NUMA option, or reject it."""

from dcsim.placers.base import Placer

__all__ = ["Placer"]
