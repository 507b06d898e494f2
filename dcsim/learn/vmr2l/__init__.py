"""VMR²L: VM rescheduling learned with PPO on a two-stage transformer.

:mod:`~dcsim.learn.vmr2l.config` (``dcsim train vmr2l``'s settings),
:mod:`~dcsim.learn.vmr2l.env` (the Gymnasium environments ``dcsim/VMR2L-v0`` and
``dcsim/VMR2L-TwoStep-v0``), :mod:`~dcsim.learn.vmr2l.network` (the policy and its
batches), :mod:`~dcsim.learn.vmr2l.warmstart` (behaviour cloning of a heuristic before
PPO), :mod:`~dcsim.learn.vmr2l.train` (:class:`~dcsim.learn.vmr2l.train.VMR2LTrainer`) and
:mod:`~dcsim.learn.vmr2l.env_policy` (a policy from another library run as a
rescheduler). Nothing is imported here: an environment worker imports the environment
alone.
"""
