"""Training of learned policies (optional; needs ``pip install -e ".[learn]"``).

Nothing here is imported by the simulator core: the learned policies' inference (the
``nara`` allocator, the ``vmr2l`` rescheduler, the ``deeprm`` scheduler) is numpy-only and
reads checkpoints from ``dcsim/learn/checkpoints/``.

The shared core: :mod:`~dcsim.learn.trainer` (the :class:`~dcsim.learn.trainer.Trainer`
base: the run, the iteration loop, checkpoints, progress lines), :mod:`~dcsim.learn.ppo`
(PPO: loss, GAE, update, :class:`~dcsim.learn.ppo.PPOTrainer`), :mod:`~dcsim.learn.resume`
(stopping and resuming), :mod:`~dcsim.learn.config` (a training YAML read into its config)
and :mod:`~dcsim.learn.workers` (the environment worker processes). One package per policy
family, each with its ``config``, environment or rollout, ``network`` and ``train``
(``dcsim train <family>``): :mod:`~dcsim.learn.nara` and :mod:`~dcsim.learn.vmr2l` (PPO),
:mod:`~dcsim.learn.deeprm` (REINFORCE).
"""

# Nara (issue #7): the Gymnasium environment (``dcsim/Nara-v0``, registered by ``import
# dcsim``: :mod:`dcsim.environments`), the GNN policy and PPO. Exported lazily, so that
# importing this package needs neither Gymnasium nor PyTorch.
_LAZY = {
    "NaraEnv": "dcsim.learn.nara.env",
    "NaraEnvConfig": "dcsim.learn.nara.env",
    "NaraPolicy": "dcsim.learn.nara.network",
    "NaraValue": "dcsim.learn.nara.network",
    "NaraTrainConfig": "dcsim.learn.nara.train",
    "train_nara": "dcsim.learn.nara.train",
}
_NAMES = {"NaraTrainConfig": "TrainConfig", "train_nara": "train"}
__all__ = list(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), _NAMES.get(name, name))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
