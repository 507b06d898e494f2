"""DeepRM's policy network in PyTorch (for training; the ``deeprm`` scheduler,
:mod:`dcsim.schedulers.deeprm`, runs the same weights in numpy): the state image through
one hidden layer to the logits of the M + 1 actions (a slot, or void)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import nn


class Policy(nn.Module):
    """image → Linear(hidden) → ReLU → Linear(M+1) logits (softmax outside)."""

    def __init__(self, n_in: int, hidden: int, actions: int, init_std: float = 0.01):
        super().__init__()
        self.fc1 = nn.Linear(n_in, hidden)
        self.fc2 = nn.Linear(hidden, actions)
        for layer in (self.fc1, self.fc2):
            nn.init.normal_(layer.weight, std=init_std)
            nn.init.zeros_(layer.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))

    def numpy_weights(self) -> dict[str, np.ndarray]:
        """Copies in the checkpoint layout (w1, b1, w2, b2)."""
        return {"w1": self.fc1.weight.detach().numpy().copy(),
                "b1": self.fc1.bias.detach().numpy().copy(),
                "w2": self.fc2.weight.detach().numpy().copy(),
                "b2": self.fc2.bias.detach().numpy().copy()}

    def load_numpy(self, w: dict[str, np.ndarray]) -> None:
        with torch.no_grad():
            self.fc1.weight.copy_(torch.from_numpy(np.asarray(w["w1"], np.float32)))
            self.fc1.bias.copy_(torch.from_numpy(np.asarray(w["b1"], np.float32)))
            self.fc2.weight.copy_(torch.from_numpy(np.asarray(w["w2"], np.float32)))
            self.fc2.bias.copy_(torch.from_numpy(np.asarray(w["b2"], np.float32)))


def torch_logits(policy: Policy) -> Callable[[np.ndarray], np.ndarray]:
    """``x (B, input) float32 -> logits (B, actions)`` with ``policy`` (no gradient).

    The trainer's rollouts use torch rather than
    :func:`dcsim.schedulers.deeprm.policy_logits`: on a busy machine a multi-threaded BLAS
    is slow for these small batched products, and torch runs on the ``threads`` it is
    given. Both compute the same network (tested)."""
    def f(x: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return policy(torch.from_numpy(x)).numpy()
    return f
