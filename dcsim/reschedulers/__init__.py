"""VM reschedulers (VMR²L's setting): see :mod:`dcsim.reschedulers.base`."""

from dcsim.reschedulers.base import Plan, Rescheduler, RescheduleResult, sequence_moves

__all__ = ["Plan", "RescheduleResult", "Rescheduler", "sequence_moves"]
