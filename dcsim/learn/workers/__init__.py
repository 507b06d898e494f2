"""The trainers' worker processes: the environments stepped in lock-step
(:mod:`~dcsim.learn.workers.lockstep`, the trainer's side; :mod:`~dcsim.learn.workers.process`,
a worker's), and what the workers compute besides (the update's parts,
:mod:`~dcsim.learn.workers.shards`; the rollout's groups, :mod:`~dcsim.learn.workers.groups`).
Nothing is imported here: a worker process imports :mod:`~dcsim.learn.workers.process` and its
environment's module alone, not PyTorch.
"""
