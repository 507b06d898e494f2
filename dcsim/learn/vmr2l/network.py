"""VMR²L's two-stage transformer policy in PyTorch (for training; inference is the numpy
code of :mod:`dcsim.reschedulers.vmr2l`, which reads the same arrays).

:class:`VMR2LPolicy` holds the VM actor-critic (``vm``) and the host actor (``host``), each
an ``nn.Transformer`` (post-LN, GELU) with linear embeddings and output layers; the
parameter names of its ``state_dict`` are the checkpoint's array names
(:func:`dcsim.reschedulers.vmr2l.weight_shapes`). Batches may mix mappings of different
sizes: hosts and VMs are padded and masked (``host_pad``, ``vm_pad``: True = padding).

The batches it is run on, for PPO's rollout and update and the warm start
(:mod:`dcsim.learn.vmr2l.train`, :mod:`dcsim.learn.vmr2l.warmstart`), are here too:
observations stacked (:func:`stack_observations`) and trimmed to their real host and VM
counts (:func:`batch_tensors`), masked log-softmax and entropy, sampling
(:func:`sample_logp`), and log π / entropy / value of the actions taken
(:func:`evaluate_actions`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from dcsim.reschedulers.vmr2l import Architecture, sparse_masks, weight_shapes


def _transformer(a: Architecture, dropout: float) -> nn.Transformer:
    return nn.Transformer(d_model=a.d_model, nhead=a.heads,
                          num_encoder_layers=a.encoder_layers,
                          num_decoder_layers=a.decoder_layers, dim_feedforward=a.d_ff,
                          dropout=dropout, activation="gelu", batch_first=True,
                          norm_first=False)


class _Net(nn.Module):
    """Host and VM embeddings, a transformer and an output layer of ``outputs`` per token."""

    def __init__(self, a: Architecture, dropout: float, outputs: int):
        super().__init__()
        self.a = a
        self.pm_encode = nn.Linear(a.host_features, a.d_model)
        self.vm_encode = nn.Linear(a.vm_features, a.d_model)
        self.transformer = _transformer(a, dropout)
        self.output_layer = nn.Linear(a.d_model, outputs)


class _VMNet(_Net):
    def __init__(self, a: Architecture, dropout: float):
        super().__init__(a, dropout, 1)
        self.critic_layer = nn.Linear(a.d_model, 1)

    def forward(self, hosts, vms, step, host_pad, vm_pad, vm_host=None):
        B, H, _ = hosts.shape
        d = self.a.d_model
        src = torch.cat([step.view(B, 1, 1).expand(B, 1, d), self.pm_encode(hosts)], dim=1)
        src_pad = torch.cat([torch.zeros(B, 1, dtype=torch.bool, device=hosts.device),
                             host_pad], dim=1)
        tgt = torch.cat([self.vm_encode(vms), torch.full((B, 1, d), -1.0, device=vms.device)],
                        dim=1)
        tgt_pad = torch.cat([vm_pad, torch.zeros(B, 1, dtype=torch.bool, device=vms.device)],
                            dim=1)
        tgt_mask = memory_mask = None
        if self.a.attention == "sparse":
            vh = vm_host.masked_fill(vm_pad, -1).cpu().numpy()
            sb, cb = sparse_masks(vh, H)
            # padding (host -1): a padded VM sees only itself, nothing sees a padded VM
            pad = vm_pad.cpu().numpy()
            sb[:, :, :-1] |= pad[:, None, :]
            M = pad.shape[1]
            sb[:, np.arange(M), np.arange(M)] &= ~pad
            h = self.a.heads
            tgt_mask = torch.as_tensor(np.repeat(sb, h, axis=0), device=vms.device)
            memory_mask = torch.as_tensor(np.repeat(cb, h, axis=0), device=vms.device)
            tgt_pad = None
        out = self.transformer(src, tgt, tgt_mask=tgt_mask, memory_mask=memory_mask,
                               src_key_padding_mask=src_pad, tgt_key_padding_mask=tgt_pad,
                               memory_key_padding_mask=src_pad)
        logits = self.output_layer(out[:, :-1]).squeeze(-1)
        value = self.critic_layer(out[:, -1]).squeeze(-1)
        return logits.masked_fill(vm_pad, float("-inf")), value


class _HostNet(_Net):
    def __init__(self, a: Architecture, dropout: float):
        super().__init__(a, dropout, 2)

    def forward(self, hosts, chosen, step, host_pad):
        B = hosts.shape[0]
        d = self.a.d_model
        src = torch.cat([step.view(B, 1, 1).expand(B, 1, d),
                         self.vm_encode(chosen).unsqueeze(1)], dim=1)
        out = self.transformer(src, self.pm_encode(hosts), tgt_key_padding_mask=host_pad)
        return self.output_layer(out).reshape(B, -1)


class VMR2LPolicy(nn.Module):
    """The VM actor-critic (``vm``) and the host actor (``host``)."""

    def __init__(self, arch: Architecture, dropout: float = 0.0):
        super().__init__()
        self.arch = arch
        self.vm = _VMNet(arch, dropout)
        self.host = _HostNet(arch, dropout)

    def numpy_weights(self) -> dict[str, np.ndarray]:
        shapes = weight_shapes(self.arch)
        sd = self.state_dict()
        return {k: sd[k].detach().cpu().numpy().astype(np.float32) for k in shapes}

    def load_numpy(self, w: dict[str, np.ndarray]) -> None:
        self.load_state_dict({k: torch.as_tensor(v) for k, v in w.items()})


# --------------------------------------------------------------------------- batches
def stack_observations(obs: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """:class:`~dcsim.learn.vmr2l.env.VMR2LEnv` observations stacked into one numpy batch
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
