"""Training of learned policies (optional; needs ``pip install -e ".[learn]"``).

Nothing here is imported by the simulator core: the learned schedulers' inference (e.g.
:mod:`dcsim.schedulers.deeprm`) is numpy-only and reads checkpoints from
``dcsim/learn/checkpoints/``. Import :mod:`dcsim.learn.deeprm` (PyTorch) to train.
"""
