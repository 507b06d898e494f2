"""DeepRM: queue scheduling learned with REINFORCE on a small network over the state image.

:mod:`~dcsim.learn.deeprm.config` (``dcsim train deeprm``'s settings),
:mod:`~dcsim.learn.deeprm.network` (the policy), :mod:`~dcsim.learn.deeprm.rollout` (job
sets rolled out in lock-step, returns, baseline, evaluation) and
:mod:`~dcsim.learn.deeprm.train` (:class:`~dcsim.learn.deeprm.train.DeepRMTrainer`). The
``deeprm`` scheduler (:mod:`dcsim.schedulers.deeprm`) runs the trained weights in numpy.
"""
