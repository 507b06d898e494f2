"""Queue-mode schedulers (DeepRM's setting): see :mod:`dcsim.schedulers.base`."""

from dcsim.schedulers.base import QueueView, Scheduler

__all__ = ["QueueView", "Scheduler"]
