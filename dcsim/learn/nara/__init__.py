"""Nara (issue #7): server-by-server allocation learned with PPO on a GNN.

:mod:`~dcsim.learn.nara.config` (``dcsim train nara``'s settings), :mod:`~dcsim.learn.nara.env`
(the Gymnasium environment ``dcsim/Nara-v0``), :mod:`~dcsim.learn.nara.network` (the policy
and value GNNs), :mod:`~dcsim.learn.nara.evaluate` (held-out episodes, Tetris for
reference), :mod:`~dcsim.learn.nara.train` (:class:`~dcsim.learn.nara.train.NaraTrainer`)
and :mod:`~dcsim.learn.nara.env_policy` (a policy from another library run as an
allocator). Nothing is imported here: an environment worker imports the environment alone.
"""
