"""Queue mode (DeepRM's setting): job sets and the time-slotted queue environment.

See :mod:`dcsim.queue.env` for the semantics and :mod:`dcsim.schedulers` for the policies.
"""

from dcsim.queue.env import QueueConfig, QueueEnv, StepResult
from dcsim.queue.jobs import JobSet, deeprm_jobset, jobs_from_table, offered_load

__all__ = ["JobSet", "QueueConfig", "QueueEnv", "StepResult", "deeprm_jobset",
           "jobs_from_table", "offered_load"]
