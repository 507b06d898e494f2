"""Batches for VMR²L's PPO and its warm start (:mod:`dcsim.learn.vmr2l_ppo`,
:mod:`dcsim.learn.vmr2l_warmstart`): observations stacked and trimmed to their real host and
VM counts, masked log-softmax and entropy, sampling, and log π / entropy / value of taken
actions."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from dcsim.learn.vmr2l_model import VMR2LPolicy

__all__ = ["batch_tensors", "evaluate_actions", "sample_logp", "stack_observations"]


def stack_observations(obs: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """:class:`~dcsim.learn.vmr2l_env.VMR2LEnv` observations stacked into one numpy batch
    (padded to the environments' fixed host and VM slots; ``step`` concatenated)."""
    return {"hosts": np.stack([o["hosts"] for o in obs]),
            "vms": np.stack([o["vms"] for o in obs]),
            "vm_host": np.stack([o["vm_host"] for o in obs]),
            "vm_count": np.array([o["vm_count"] for o in obs], dtype=np.int64),
            "host_count": np.array([o["host_count"] for o in obs], dtype=np.int64),
            "step": np.concatenate([o["step"] for o in obs]).astype(np.float32)}


def batch_tensors(b: dict[str, np.ndarray], device) -> dict[str, torch.Tensor]:
    """Torch tensors of a batch trimmed to its largest real host and VM counts."""
    H = int(b["host_count"].max())
    M = int(b["vm_count"].max())
    hp = np.arange(H)[None, :] >= b["host_count"][:, None]
    vp = np.arange(M)[None, :] >= b["vm_count"][:, None]
    vh = np.where(vp, 0, b["vm_host"][:, :M])
    return {"hosts": torch.as_tensor(b["hosts"][:, :H], device=device),
            "vms": torch.as_tensor(b["vms"][:, :M], device=device),
            "vm_host": torch.as_tensor(vh, device=device),
            "host_pad": torch.as_tensor(hp, device=device),
            "vm_pad": torch.as_tensor(vp, device=device),
            "step": torch.as_tensor(b["step"], device=device), "H": H, "M": M}


def _masked_log_softmax(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return torch.log_softmax(logits.masked_fill(~mask, float("-inf")), dim=-1)


def _entropy(logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    safe = logp.masked_fill(~mask, 0.0)   # 0 · (−inf) would make NaN gradients
    return -(safe.exp() * safe).masked_fill(~mask, 0.0).sum(-1)


def sample_logp(logp: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One index per row of ``logp`` (rows of log-probabilities, −inf where masked), drawn
    by inverse CDF with one uniform of ``rng`` per row."""
    p = np.exp(logp.astype(np.float64))
    c = np.cumsum(p, axis=1)
    u = rng.random(len(p)) * c[:, -1]
    return np.minimum((c < u[:, None]).sum(axis=1), p.shape[1] - 1)


def evaluate_actions(policy: VMR2LPolicy, t: dict[str, Any], vm_act: torch.Tensor,
                      slot_act: torch.Tensor, slot_mask: torch.Tensor):
    """log π(vm, slot), entropy and value of a batch (trimmed tensors)."""
    logits, value = policy.vm(t["hosts"], t["vms"], t["step"], t["host_pad"], t["vm_pad"],
                              t["vm_host"])
    vm_ok = ~t["vm_pad"]
    lp_vm = _masked_log_softmax(logits, vm_ok)
    idx = torch.arange(len(vm_act), device=vm_act.device)
    chosen = t["vms"][idx, vm_act]
    slot_logits = policy.host(t["hosts"], chosen, t["step"], t["host_pad"])
    mask = slot_mask[:, :slot_logits.shape[1]]
    lp_slot = _masked_log_softmax(slot_logits, mask)
    logp = lp_vm[idx, vm_act] + lp_slot[idx, slot_act]
    ent = _entropy(lp_vm, vm_ok) + _entropy(lp_slot, mask)
    return logp, ent, value, lp_vm, lp_slot
