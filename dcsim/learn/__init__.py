"""Training of learned policies (optional; needs ``pip install -e ".[learn]"``).

Nothing here is imported by the simulator core: the learned schedulers' inference (e.g.
:mod:`dcsim.schedulers.deeprm`) is numpy-only and reads checkpoints from
``dcsim/learn/checkpoints/``. Import :mod:`dcsim.learn.deeprm` (PyTorch) to train.
"""

# Nara (issue #7): the Gymnasium environment (``dcsim/Nara-v0``, registered by ``import
# dcsim``: :mod:`dcsim.environments`), the GNN policy and PPO. Exported lazily, so that
# importing this package needs neither Gymnasium nor PyTorch.
_LAZY = {
    "NaraEnv": "dcsim.learn.nara_env",
    "NaraEnvConfig": "dcsim.learn.nara_env",
    "NaraPolicy": "dcsim.learn.gnn",
    "NaraValue": "dcsim.learn.gnn",
    "NaraTrainConfig": "dcsim.learn.ppo",
    "train_nara": "dcsim.learn.ppo",
}
_NAMES = {"NaraTrainConfig": "TrainConfig", "train_nara": "train"}
__all__ = list(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), _NAMES.get(name, name))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
