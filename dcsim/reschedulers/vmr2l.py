"""VMR²L's learned rescheduler (Guo et al., NSDI '24): features, the two-stage transformer
policy in numpy, its checkpoint format and the ``vmr2l`` rescheduler plugin.

This module needs numpy and scipy only. The Gymnasium environment
(:mod:`dcsim.learn.vmr2l_env`), the PyTorch network (:mod:`dcsim.learn.vmr2l_model`) and
its training (:mod:`dcsim.learn.vmr2l_ppo`, ``dcsim train vmr2l``) build on it; the shipped
checkpoint runs without torch.

**Features** (:func:`host_features`, :func:`vm_features`; the authors' ``generalizer-v2``
environment, recomputed from the state at every step). Per host, 8 columns: free cpu of
NUMA 0 and 1 ÷ the host's cpu, free memory of NUMA 0 and 1 ÷ the host's memory, then per
NUMA ``j``: ``(f_j mod 16) / f_j`` (0 when ``f_j = 0``) and ``(f_j mod 16) / 16``, with
``f_j`` the free cores. Per migratable VM, 14 columns: the cpu it takes on NUMA 0 and 1 ÷
its host's cpu, the memory on NUMA 0 and 1 ÷ its host's memory, ``(cpu_j mod 16) / 16`` per
NUMA it uses (0 on the other), then its host's 8 columns. The step feature is ``t / MNL``.
Only migratable VMs are tokens (the authors' ``migratable_vms``); the authors' optional
mean/std normalisation (off by default in their code) is not applied.

**Actions**: a VM token, then one of ``2H`` host slots: slot ``2h + j`` moves a
single-NUMA VM to NUMA ``j`` of host ``h``; a double-NUMA VM uses slot ``2h`` (both NUMAs)
and slot ``2h + 1`` is masked. The VM's own host is a legal no-op (slot ``2h_src``; the
authors' environment also makes it one). The host mask (:func:`host_mask`) is the model's
own :meth:`~dcsim.vm.model.MappingState.options` plus that no-op, so an unmasked action is
always a valid migration. (The authors' second slot means "prefer the other NUMA", and a
VM may switch NUMA within its host; dcsim's model has no in-host moves, so the slot names
the NUMA.)

**Policy** (:func:`vm_forward`, :func:`host_forward`): the VM actor-critic is a post-LN
encoder-decoder transformer (``nn.Transformer`` semantics: 2 encoder and 2 decoder layers,
``d`` 32, 2 heads, feed-forward 64, GELU, final LayerNorms). Encoder tokens: the step
(``t/MNL`` repeated over ``d``) and the hosts (a linear embedding of their 8 features);
decoder tokens: the VMs (a linear embedding of their 14 features) and a critic token
(all −1). A linear layer gives each VM's logit and the critic token's value. The host actor
is a second transformer of the same shape, conditioned on the chosen VM: encoder tokens
the step and the chosen VM's embedding, decoder tokens the hosts, a linear layer gives 2
logits per host. ``log π = log π_vm + log π_host``.

``attention: sparse`` (the paper's sparse variant, our reading of "a VM attends only to its
host and that host's VMs"): in the decoder a VM token attends (self-attention) only to the
VMs on its own host, and (cross-attention) only to the step token and its own host's token;
the critic token still attends to everything, and hosts still attend to all hosts in the
encoder. Its cost grows with VMs × VMs-per-host instead of VMs², which is what makes a
279-host plan fast on a CPU.

**Inference** (:class:`VMR2L`): risk-seeking, as in the paper: ``samples`` trajectories of
MNL steps are run (batched), and the one with the lowest final fragment wins (ties: the
first). Options:

- ``argmax_first`` (default true, dcsim's addition): the first trajectory takes the most
  likely VM and slot at every step, the others are sampled, so the plan is never worse than
  the argmax plan. ``false``: every trajectory is sampled, as the paper describes.
- ``min_prob_vm`` / ``min_prob_host`` (default 0): sampling ignores actions whose
  probability is below these; the authors' evaluation (``eval_thres_final.py`` in
  ``RLVMR/VMR2L-NSDI24``; "actions with low probabilities are likely to be suboptimal" in
  its README) uses 1e-5 and 1e-4. The most likely action is always kept.
- ``greedy: true``: one trajectory, argmax throughout.

Steps that pick the VM's own host are no-ops and do not appear in the migration list.

**Checkpoint**: ``NAME.npz`` (float32 arrays named as the PyTorch ``state_dict``) and
``NAME.json`` beside it (format ``dcsim-vmr2l-policy``, the architecture, the feature layout,
how it was trained); every problem is a :class:`~dcsim.errors.ConfigError` naming the file.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field, field_validator
from threadpoolctl import threadpool_limits

from dcsim.checkpoints import (
    float_arrays,
    read_arrays,
    read_metadata,
    resolve,
    write_checkpoint,
)
from dcsim.errors import ConfigError
from dcsim.hookspecs import hookimpl
from dcsim.reschedulers.base import Plan, Rescheduler
from dcsim.vm.model import BOTH, FRAGMENT_CORES, MappingState, Migration

X = FRAGMENT_CORES
HOST_FEATURES = 8
VM_FEATURES = 14
CHECKPOINT_FORMAT = "dcsim-vmr2l-policy"
CHECKPOINT_VERSION = 1
SHIPPED_DIR = Path(__file__).resolve().parent.parent / "learn" / "checkpoints"
#: the ``vmr2l`` plugin's default policy
SHIPPED_NAME = "vmr2l_production"

HOST_FEATURE_NAMES = [
    "free cpu NUMA 0 / host cpu", "free cpu NUMA 1 / host cpu",
    "free mem NUMA 0 / host mem", "free mem NUMA 1 / host mem",
    "(f0 mod 16)/f0 (0 if f0 = 0)", "(f0 mod 16)/16",
    "(f1 mod 16)/f1 (0 if f1 = 0)", "(f1 mod 16)/16",
]
VM_FEATURE_NAMES = [
    "cpu on NUMA 0 / host cpu", "cpu on NUMA 1 / host cpu",
    "mem on NUMA 0 / host mem", "mem on NUMA 1 / host mem",
    "(cpu on NUMA 0 mod 16)/16", "(cpu on NUMA 1 mod 16)/16",
    *[f"host: {n}" for n in HOST_FEATURE_NAMES],
]


# ------------------------------------------------------------------------------ features
def host_features(free_cpu: np.ndarray, free_mem: np.ndarray, cap_cpu: np.ndarray,
                  cap_mem: np.ndarray) -> np.ndarray:
    """``(..., H, 8)`` float32 host features from ``(..., H, 2)`` free arrays and ``(H, 2)``
    capacities (see the module docstring)."""
    hc = cap_cpu.sum(axis=-1, keepdims=True).astype(np.float64)
    hm = cap_mem.sum(axis=-1, keepdims=True).astype(np.float64)
    hc[hc == 0] = 1.0
    hm[hm == 0] = 1.0
    f = free_cpu.astype(np.float64)
    mod = free_cpu % X
    rate = np.divide(mod, f, out=np.zeros_like(f), where=free_cpu > 0)
    out = np.empty(free_cpu.shape[:-1] + (HOST_FEATURES,), dtype=np.float32)
    out[..., 0:2] = f / hc
    out[..., 2:4] = free_mem / hm
    out[..., 4] = rate[..., 0]
    out[..., 5] = mod[..., 0] / X
    out[..., 6] = rate[..., 1]
    out[..., 7] = mod[..., 1] / X
    return out


def vm_static(state: MappingState, tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(cpu, mem)`` per token VM and NUMA, ``(M, 2)`` each, for the VM on NUMA 0 if it
    is single-NUMA (the features swap the columns when it sits on NUMA 1)."""
    c = state.vm_cpu[tokens]
    m = state.vm_mem[tokens]
    d = state.vm_double[tokens]
    cpu = np.stack([c, np.where(d, c, 0)], axis=1)
    mem = np.stack([m, np.where(d, m, 0)], axis=1)
    return cpu, mem


def vm_features(hostf: np.ndarray, state_cap_cpu: np.ndarray, state_cap_mem: np.ndarray,
                tokens_cpu: np.ndarray, tokens_mem: np.ndarray, vm_host: np.ndarray,
                vm_numa: np.ndarray) -> np.ndarray:
    """``(..., M, 14)`` VM features: per-NUMA demand (``tokens_cpu``/``tokens_mem``, ``(M,
    2)`` as from :func:`vm_static`, swapped for VMs on NUMA 1) and the host's features
    (``hostf``, ``(..., H, 8)``) gathered by ``vm_host`` (``(..., M)``)."""
    hc = state_cap_cpu.sum(axis=-1).astype(np.float64)
    hm = state_cap_mem.sum(axis=-1).astype(np.float64)
    hc[hc == 0] = 1.0
    hm[hm == 0] = 1.0
    on1 = vm_numa == 1
    cpu = np.broadcast_to(tokens_cpu, vm_numa.shape + (2,)).copy()
    mem = np.broadcast_to(tokens_mem, vm_numa.shape + (2,)).copy()
    cpu[on1] = cpu[on1][:, ::-1]
    mem[on1] = mem[on1][:, ::-1]
    out = np.empty(vm_numa.shape + (VM_FEATURES,), dtype=np.float32)
    out[..., 0:2] = cpu / hc[vm_host][..., None]
    out[..., 2:4] = mem / hm[vm_host][..., None]
    out[..., 4:6] = (cpu % X) / X
    out[..., 6:] = np.take_along_axis(hostf, vm_host[..., None], axis=-2)
    return out


def observe(state: MappingState, tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(hosts (H, 8), vms (M, 14))`` features of ``state`` for the token VMs ``tokens``
    (indices of migratable VMs)."""
    hf = host_features(state.free_cpu, state.free_mem, state.cap_cpu, state.cap_mem)
    cpu, mem = vm_static(state, tokens)
    vf = vm_features(hf, state.cap_cpu, state.cap_mem, cpu, mem, state.vm_host[tokens],
                     state.vm_numa[tokens])
    return hf, vf


def host_mask(state: MappingState, k: int) -> np.ndarray:
    """``(2H,)`` bool, True where slot ``2h + j`` is a legal choice for VM ``k``: the model's
    own :meth:`~dcsim.vm.model.MappingState.options` (a double-NUMA VM uses column 0 only),
    plus the VM's own host (slot ``2 h_src``, a no-op)."""
    ok = state.options(k)
    if state.vm_double[k]:
        ok[:, 1] = False
    ok[state.vm_host[k], 0] = True
    return ok.ravel()


def slot_migration(state: MappingState, k: int, slot: int) -> Migration | None:
    """The migration slot ``slot`` means for VM ``k`` (None for its own host: a no-op)."""
    h, j = divmod(int(slot), 2)
    if h == int(state.vm_host[k]):
        return None
    return Migration(int(k), h, BOTH if state.vm_double[k] else j)


def tokens_of(state: MappingState) -> np.ndarray:
    """The token VMs: indices of the migratable VMs, in order."""
    return np.flatnonzero(state.vm_migratable)


# ------------------------------------------------------------------------------ network
@dataclass(frozen=True)
class Architecture:
    """The two transformers' shape (the paper's: d 32, 2 heads, 2 + 2 layers, d_ff 64)."""

    d_model: int = 32
    heads: int = 2
    encoder_layers: int = 2
    decoder_layers: int = 2
    d_ff: int = 64
    attention: Literal["dense", "sparse"] = "dense"
    host_features: int = HOST_FEATURES
    vm_features: int = VM_FEATURES

    def __post_init__(self):
        if self.d_model % self.heads:
            raise ValueError(f"d_model {self.d_model} is not a multiple of heads {self.heads}")
        if self.attention not in ("dense", "sparse"):
            raise ValueError(f"attention must be dense or sparse, not {self.attention!r}")


def _attn_shapes(prefix: str, d: int) -> dict[str, tuple[int, ...]]:
    return {f"{prefix}.in_proj_weight": (3 * d, d), f"{prefix}.in_proj_bias": (3 * d,),
            f"{prefix}.out_proj.weight": (d, d), f"{prefix}.out_proj.bias": (d,)}


def _transformer_shapes(prefix: str, a: Architecture) -> dict[str, tuple[int, ...]]:
    d, f = a.d_model, a.d_ff
    s: dict[str, tuple[int, ...]] = {}
    for kind, n, attns, norms in (("encoder", a.encoder_layers, ["self_attn"], 2),
                                  ("decoder", a.decoder_layers,
                                   ["self_attn", "multihead_attn"], 3)):
        for i in range(n):
            p = f"{prefix}.{kind}.layers.{i}"
            for at in attns:
                s.update(_attn_shapes(f"{p}.{at}", d))
            s.update({f"{p}.linear1.weight": (f, d), f"{p}.linear1.bias": (f,),
                      f"{p}.linear2.weight": (d, f), f"{p}.linear2.bias": (d,)})
            for j in range(1, norms + 1):
                s.update({f"{p}.norm{j}.weight": (d,), f"{p}.norm{j}.bias": (d,)})
        s.update({f"{prefix}.{kind}.norm.weight": (d,), f"{prefix}.{kind}.norm.bias": (d,)})
    return s


def weight_shapes(a: Architecture) -> dict[str, tuple[int, ...]]:
    """Every array of a policy (names as in the PyTorch ``state_dict`` of
    :class:`dcsim.learn.vmr2l_model.VMR2LPolicy`) and its shape."""
    d = a.d_model
    s: dict[str, tuple[int, ...]] = {}
    for net, outs in (("vm", None), ("host", 2)):
        s.update({f"{net}.pm_encode.weight": (d, a.host_features), f"{net}.pm_encode.bias": (d,),
                  f"{net}.vm_encode.weight": (d, a.vm_features), f"{net}.vm_encode.bias": (d,)})
        s.update(_transformer_shapes(f"{net}.transformer", a))
        if outs is None:
            s.update({"vm.output_layer.weight": (1, d), "vm.output_layer.bias": (1,),
                      "vm.critic_layer.weight": (1, d), "vm.critic_layer.bias": (1,)})
        else:
            s.update({"host.output_layer.weight": (outs, d), "host.output_layer.bias": (outs,)})
    return s


def _linear(w: dict[str, np.ndarray], p: str, x: np.ndarray) -> np.ndarray:
    W = w[f"{p}.weight"]
    y = np.ascontiguousarray(x).reshape(-1, x.shape[-1]) @ W.T + w[f"{p}.bias"]
    return y.reshape(x.shape[:-1] + (W.shape[0],))


def _layer_norm(w: dict[str, np.ndarray], p: str, x: np.ndarray) -> np.ndarray:
    """``nn.LayerNorm`` over the last axis (eps 1e-5). The means are matrix products with a
    constant column: on rows of 32 they are twice as fast as ``mean(axis=-1)``."""
    d = x.shape[-1]
    avg = np.full((d, 1), 1.0 / d, dtype=np.float32)
    y = np.ascontiguousarray(x, dtype=np.float32).reshape(-1, d)
    y = y - y @ avg
    inv = (y * y) @ avg
    inv += np.float32(1e-5)
    np.sqrt(inv, out=inv)
    np.divide(np.float32(1.0), inv, out=inv)
    y *= inv
    y *= w[f"{p}.weight"]
    y += w[f"{p}.bias"]
    return y.reshape(x.shape)


_INV_SQRT2 = np.float32(1.0 / np.sqrt(2.0))
# erf(x) = x P(x^2) / Q(x^2) on [-4, 4] (erf is +-1 in float32 beyond): the minimax
# rational approximation used for float32 by Eigen and XLA; max error 4e-7 against
# scipy's double-precision erf (tests/test_vmr2l.py), at half the cost of scipy's float32
# erf, which evaluates in double precision.
_ERF_P = tuple(np.float32(c) for c in (
    -2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06,
    -5.69250639462346e-05, -7.34990630326855e-04, -2.95459980854025e-03,
    -1.60960333262415e-02))
_ERF_Q = tuple(np.float32(c) for c in (
    -1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03,
    -7.37332916720468e-03, -1.42647390514189e-02))


def _erf32(x: np.ndarray) -> np.ndarray:
    """erf in float32 (see ``_ERF_P``); returns a new array."""
    x = np.clip(x, np.float32(-4.0), np.float32(4.0))
    x2 = x * x
    num = x2 * _ERF_P[0]
    num += _ERF_P[1]
    for c in _ERF_P[2:]:
        num *= x2
        num += c
    num *= x
    den = x2 * _ERF_Q[0]
    den += _ERF_Q[1]
    for c in _ERF_Q[2:]:
        den *= x2
        den += c
    num /= den
    return num


def _gelu(x: np.ndarray) -> np.ndarray:
    """Exact (erf) GELU, as ``F.gelu``, in float32 (a float64 constant would upcast)."""
    y = _erf32(x * _INV_SQRT2)
    y += np.float32(1.0)
    y *= x
    y *= np.float32(0.5)
    return y


def _softmax(s: np.ndarray) -> np.ndarray:
    s = s - s.max(axis=-1, keepdims=True)
    np.exp(s, out=s)
    s /= s.sum(axis=-1, keepdims=True)
    return s


def _proj(w: dict[str, np.ndarray], p: str, x: np.ndarray, part: int) -> np.ndarray:
    d = x.shape[-1]
    W = w[f"{p}.in_proj_weight"][part * d:(part + 1) * d]
    b = w[f"{p}.in_proj_bias"][part * d:(part + 1) * d]
    y = np.ascontiguousarray(x).reshape(-1, d) @ W.T + b
    return y.reshape(x.shape)


def _heads(x: np.ndarray, h: int) -> np.ndarray:
    """(B, L, d) -> (B, h, L, d/h)."""
    B, L, d = x.shape
    return np.ascontiguousarray(x.reshape(B, L, h, d // h).transpose(0, 2, 1, 3))


def _mha(w: dict[str, np.ndarray], p: str, q_in: np.ndarray, kv_in: np.ndarray, h: int,
         blocked: np.ndarray | None = None) -> np.ndarray:
    """``nn.MultiheadAttention(q_in, kv_in, kv_in)``; ``blocked`` (broadcastable to (B, Lq,
    Lk), True = may not attend) as its boolean ``attn_mask``/``key_padding_mask``."""
    B, Lq, d = q_in.shape
    q = _heads(_proj(w, p, q_in, 0), h)
    k = _heads(_proj(w, p, kv_in, 1), h)
    v = _heads(_proj(w, p, kv_in, 2), h)
    s = (q / np.float32(np.sqrt(d // h))) @ np.ascontiguousarray(k.transpose(0, 1, 3, 2))
    if blocked is not None:
        s = np.where(blocked[:, None], np.float32(-np.inf), s)
    o = _softmax(s) @ v                                   # (B, h, Lq, dh)
    o = o.transpose(0, 2, 1, 3).reshape(B, Lq, d)
    return _linear(w, f"{p}.out_proj", o)


def _ff(w: dict[str, np.ndarray], p: str, x: np.ndarray) -> np.ndarray:
    return _linear(w, f"{p}.linear2", _gelu(_linear(w, f"{p}.linear1", x)))


def _encoder(w, prefix: str, a: Architecture, x: np.ndarray,
             pad: np.ndarray | None = None) -> np.ndarray:
    blocked = None if pad is None else pad[:, None, :]
    for i in range(a.encoder_layers):
        p = f"{prefix}.encoder.layers.{i}"
        x = _layer_norm(w, f"{p}.norm1", x + _mha(w, f"{p}.self_attn", x, x, a.heads, blocked))
        x = _layer_norm(w, f"{p}.norm2", x + _ff(w, p, x))
    return _layer_norm(w, f"{prefix}.encoder.norm", x)


def _decoder(w, prefix: str, a: Architecture, x: np.ndarray, mem: np.ndarray,
             self_blocked=None, cross_blocked=None, self_attn=None, cross_attn=None
             ) -> np.ndarray:
    """Post-LN decoder layers; ``self_attn(w, p, x)`` / ``cross_attn(w, p, x, mem)``
    replace the dense attentions when given (the sparse variant)."""
    for i in range(a.decoder_layers):
        p = f"{prefix}.decoder.layers.{i}"
        sa = (self_attn(w, f"{p}.self_attn", x) if self_attn is not None else
              _mha(w, f"{p}.self_attn", x, x, a.heads, self_blocked))
        x = _layer_norm(w, f"{p}.norm1", x + sa)
        ca = (cross_attn(w, f"{p}.multihead_attn", x, mem) if cross_attn is not None else
              _mha(w, f"{p}.multihead_attn", x, mem, a.heads, cross_blocked))
        x = _layer_norm(w, f"{p}.norm2", x + ca)
        x = _layer_norm(w, f"{p}.norm3", x + _ff(w, p, x))
    return _layer_norm(w, f"{prefix}.decoder.norm", x)


def _src(w, net: str, step: np.ndarray, hosts: np.ndarray, d: int) -> np.ndarray:
    """Encoder tokens: the step (t/MNL repeated over d) and the encoded hosts."""
    B = hosts.shape[0]
    st = np.broadcast_to(np.asarray(step, dtype=np.float32).reshape(B, 1, 1), (B, 1, d))
    return np.concatenate([st, _linear(w, f"{net}.pm_encode", hosts)], axis=1)


@dataclass
class SparseIndex:
    """The same-host neighbourhoods of a batch, grouped by size: ``buckets[i]`` ``(n_i,
    G_i)`` holds, per block of ``G_i`` tokens (the VMs of one host of one batch row), their
    indices into the batch's flattened ``(B * T)`` tokens (``T = M + 1``, the critic
    last). Every block of a bucket has the same size, so no padding is attended to."""

    buckets: list[np.ndarray]


def sparse_index(vm_host: np.ndarray) -> SparseIndex:
    """The same-host blocks of ``vm_host`` ``(B, M)``, bucketed by block size."""
    B, M = vm_host.shape
    if M == 0:
        return SparseIndex([])
    T = M + 1
    row = np.repeat(np.arange(B), M)
    host = vm_host.reshape(-1).astype(np.int64)
    order = np.lexsort((host, row))                      # by batch row, then host
    flat = row[order] * T + np.tile(np.arange(M), B)[order]
    key = row[order] * (int(host.max()) + 1) + host[order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    sizes = np.diff(np.r_[starts, len(key)])
    buckets = []
    for g in np.unique(sizes):
        st = starts[sizes == g]
        buckets.append(flat[st[:, None] + np.arange(g)[None, :]])
    return SparseIndex(buckets)


def _sparse_self(a: Architecture, sx: SparseIndex):
    """Decoder self-attention of the sparse variant, computed per host block: VM tokens
    attend to the VMs of their host; the critic token (the last) to every token."""
    def attn(w, p, x):
        B, T, d = x.shape
        M = T - 1
        h, dh = a.heads, d // a.heads
        scale = np.float32(1.0 / np.sqrt(dh))
        q, k, v = (_proj(w, p, x, i) for i in range(3))          # (B, T, d)
        qf, kf, vf = ((y * scale if i == 0 else y).reshape(B * T, d)
                      for i, y in enumerate((q, k, v)))
        o = np.zeros((B * T, d), dtype=np.float32)
        for idx in sx.buckets:                                    # (n, G)
            n, G = idx.shape

            def blocks(y, idx=idx, n=n, G=G):                     # -> (n, h, G, dh)
                return np.ascontiguousarray(y[idx].reshape(n, G, h, dh).transpose(0, 2, 1, 3))

            qb, kb, vb = blocks(qf), blocks(kf), blocks(vf)
            s = qb @ kb.transpose(0, 1, 3, 2)                      # (n, h, G, G)
            ob = _softmax(s) @ vb
            o[idx.reshape(-1)] = ob.transpose(0, 2, 1, 3).reshape(n * G, d)
        o = o.reshape(B, T, d)
        qc = _heads(q[:, M:] * scale, h)                          # critic: everything
        o_c = _softmax(qc @ _heads(k, h).transpose(0, 1, 3, 2)) @ _heads(v, h)
        o[:, M:] = o_c.transpose(0, 2, 1, 3).reshape(B, 1, d)
        return _linear(w, f"{p}.out_proj", o)
    return attn


def _sparse_cross(a: Architecture, vm_host: np.ndarray):
    """Decoder cross-attention of the sparse variant: a VM token attends to the step token
    and its host's token (two keys); the critic token to every encoder token."""
    def attn(w, p, x, mem):
        B, T, d = x.shape
        M = T - 1
        h, dh = a.heads, d // a.heads
        scale = np.float32(1.0 / np.sqrt(dh))
        q = _proj(w, p, x, 0) * scale
        k = _proj(w, p, mem, 1)
        v = _proj(w, p, mem, 2)
        b = np.arange(B)[:, None]
        qm = q[:, :M].reshape(B, M, h, dh)
        k0 = k[:, :1].reshape(B, 1, h, dh)
        kh = k[b, vm_host + 1].reshape(B, M, h, dh)
        s0 = (qm * k0).sum(-1)                                    # (B, M, h)
        s1 = (qm * kh).sum(-1)
        mx = np.maximum(s0, s1)
        e0, e1 = np.exp(s0 - mx), np.exp(s1 - mx)
        z = e0 + e1
        v0 = v[:, :1].reshape(B, 1, h, dh)
        vh = v[b, vm_host + 1].reshape(B, M, h, dh)
        o_vm = ((e0 / z)[..., None] * v0 + (e1 / z)[..., None] * vh).reshape(B, M, d)
        qc = _heads(q[:, M:], h)
        o_c = _softmax(qc @ _heads(k, h).transpose(0, 1, 3, 2)) @ _heads(v, h)
        o = np.concatenate([o_vm, o_c.transpose(0, 2, 1, 3).reshape(B, 1, d)], axis=1)
        return _linear(w, f"{p}.out_proj", o)
    return attn


def sparse_masks(vm_host: np.ndarray, n_hosts: int) -> tuple[np.ndarray, np.ndarray]:
    """The sparse variant as dense boolean masks (True = may not attend), for the PyTorch
    network: decoder self-attention ``(B, M+1, M+1)`` and cross-attention ``(B, M+1,
    H+1)``; the last decoder token is the critic."""
    B, M = vm_host.shape
    self_b = np.ones((B, M + 1, M + 1), dtype=bool)
    self_b[:, :M, :M] = vm_host[:, :, None] != vm_host[:, None, :]
    self_b[:, M, :] = False
    cross = np.ones((B, M + 1, n_hosts + 1), dtype=bool)
    cross[:, :M, 0] = False
    b = np.arange(B)[:, None]
    m = np.arange(M)[None, :]
    cross[b, m, vm_host + 1] = False
    cross[:, M, :] = False
    return self_b, cross


def vm_forward(w: dict[str, np.ndarray], a: Architecture, hosts: np.ndarray,
               vms: np.ndarray, step: np.ndarray, vm_host: np.ndarray | None = None,
               ) -> tuple[np.ndarray, np.ndarray]:
    """The VM actor-critic on a batch of states of the same size: ``hosts`` (B, H, 8),
    ``vms`` (B, M, 14), ``step`` (B,) = t/MNL, ``vm_host`` (B, M) (the sparse variant
    only). Returns VM logits (B, M) and values (B,)."""
    d = a.d_model
    B = hosts.shape[0]
    mem = _encoder(w, "vm.transformer", a, _src(w, "vm", step, hosts, d))
    tgt = np.concatenate([_linear(w, "vm.vm_encode", vms),
                          np.full((B, 1, d), -1.0, dtype=np.float32)], axis=1)
    if a.attention == "sparse":
        if vm_host is None:
            raise ValueError("the sparse variant needs vm_host")
        out = _decoder(w, "vm.transformer", a, tgt, mem,
                       self_attn=_sparse_self(a, sparse_index(vm_host)),
                       cross_attn=_sparse_cross(a, vm_host))
    else:
        out = _decoder(w, "vm.transformer", a, tgt, mem)
    logits = _linear(w, "vm.output_layer", out[:, :-1])[..., 0]
    value = _linear(w, "vm.critic_layer", out[:, -1])[..., 0]
    return logits, value


def host_forward(w: dict[str, np.ndarray], a: Architecture, hosts: np.ndarray,
                 chosen: np.ndarray, step: np.ndarray) -> np.ndarray:
    """The host actor: ``hosts`` (B, H, 8), the chosen VM's features ``chosen`` (B, 14),
    ``step`` (B,). Returns slot logits (B, 2H)."""
    d = a.d_model
    B = hosts.shape[0]
    st = np.broadcast_to(np.asarray(step, dtype=np.float32).reshape(B, 1, 1), (B, 1, d))
    src = np.concatenate([st, _linear(w, "host.vm_encode", chosen[:, None, :])], axis=1)
    mem = _encoder(w, "host.transformer", a, src)
    out = _decoder(w, "host.transformer", a, _linear(w, "host.pm_encode", hosts), mem)
    return _linear(w, "host.output_layer", out).reshape(B, -1)


# ------------------------------------------------------------------------------ checkpoints
@dataclass
class Checkpoint:
    """A loaded policy: arrays, architecture, metadata."""

    path: Path
    weights: dict[str, np.ndarray]
    arch: Architecture
    meta: dict[str, Any] = field(default_factory=dict)


def save_checkpoint(path: str | Path, weights: dict[str, np.ndarray], arch: Architecture,
                    meta: dict[str, Any] | None = None) -> Path:
    """Write ``path`` (.npz) and the .json beside it, each atomically."""
    path = Path(path)
    if path.suffix != ".npz":
        raise ValueError(f"checkpoint path must end in .npz, not {path}")
    arrays = float_arrays(weights, weight_shapes(arch))
    doc = {"format": CHECKPOINT_FORMAT, "format_version": CHECKPOINT_VERSION,
           "architecture": {**asdict(arch), "norm": "post-LN (nn.Transformer)",
                            "activation": "gelu (erf)"},
           "features": {"hosts": HOST_FEATURE_NAMES, "vms": VM_FEATURE_NAMES,
                        "step": "t / MNL", "tokens": "migratable VMs, in mapping order",
                        "slots": "2h + j: host h, NUMA j (double-NUMA VMs: j = 0)"},
           **(meta or {})}
    return write_checkpoint(path, arrays, doc)


def shipped_checkpoints() -> dict[str, Path]:
    """The shipped VMR²L policies by name (``vmr2l_<name>.npz`` in the package)."""
    return {p.stem: p for p in sorted(SHIPPED_DIR.glob("vmr2l_*.npz"))}


def checkpoint_path(value: str | None) -> Path:
    """The ``.npz`` a ``checkpoint`` option names: None is the shipped default, a shipped
    name that policy, anything else a file path."""
    return resolve(SHIPPED_NAME if value is None else value, shipped_checkpoints(), "VMR²L")


def load_checkpoint(path: str | Path) -> Checkpoint:
    """Load and validate a checkpoint; every problem is a ConfigError naming the file."""
    path = Path(path)
    meta = read_metadata(path, CHECKPOINT_FORMAT, "VMR2L")
    try:
        a = meta["architecture"]
        arch = Architecture(**{k: a[k] for k in Architecture.__dataclass_fields__})
    except (KeyError, TypeError, ValueError) as e:
        raise ConfigError(f"{path.with_suffix('.json')}: bad or missing architecture field: "
                          f"{e}") from None
    if meta.get("format_version") != CHECKPOINT_VERSION:
        raise ConfigError(f"{path.with_suffix('.json')}: format_version "
                          f"{meta.get('format_version')!r} is not {CHECKPOINT_VERSION}")
    return Checkpoint(path, read_arrays(path, weight_shapes(arch)), arch, meta)


# ------------------------------------------------------------------------------ rollouts
def _sample_rows(logits: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One index per row from softmax(logits) (float64 inverse CDF; -inf never drawn)."""
    z = logits.astype(np.float64)
    z = z - z.max(axis=1, keepdims=True)
    p = np.exp(z)
    c = np.cumsum(p, axis=1)
    u = rng.random(len(z)) * c[:, -1]
    idx = (c < u[:, None]).sum(axis=1)
    return np.minimum(idx, z.shape[1] - 1)


def _drop_unlikely(logits: np.ndarray, min_prob: float) -> np.ndarray:
    """The authors' action threshold: actions whose probability under ``softmax(logits)``
    (``-inf`` = masked) is below ``min_prob`` become ``-inf``; each row's most likely
    action is always kept."""
    if min_prob <= 0.0:
        return logits
    z = logits.astype(np.float64)
    z = z - z.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    return np.where(p < min_prob, -np.inf, logits)


def _choose(logits: np.ndarray, argmax_rows: np.ndarray, min_prob: float,
            rng: np.random.Generator | None) -> np.ndarray:
    """Row ``b``'s action: the argmax where ``argmax_rows[b]``, otherwise drawn from the
    softmax of the thresholded logits. Draws for every row, so the sampled rows' random
    stream does not depend on which rows take the argmax."""
    best = logits.argmax(axis=1)
    if argmax_rows.all():
        return best
    drawn = _sample_rows(_drop_unlikely(logits, min_prob), rng)
    return np.where(argmax_rows, best, drawn)


def rollout(ck: Checkpoint, state: MappingState, mnl: int, samples: int,
            rng: np.random.Generator | None, greedy: bool = False, *,
            argmax_first: bool = False, min_prob_vm: float = 0.0,
            min_prob_host: float = 0.0,
            ) -> tuple[list[list[Migration]], list[MappingState]]:
    """Run ``samples`` trajectories of ``mnl`` steps from ``state`` (batched); returns each
    trajectory's migrations (no-ops left out) and end state. ``greedy``: every trajectory
    takes the argmax (``rng`` unused); ``argmax_first``: only the first does. Sampled
    actions ignore those below ``min_prob_vm`` / ``min_prob_host`` (the authors' action
    threshold). BLAS runs on one thread: the matrices are small (d = 32), and several
    threads per process were slower alone (5.1 s against 4.4 s for a 279-host plan) and
    about 3x slower with ``--jobs 2`` (two processes, four threads, two cores)."""
    argmax_rows = np.zeros(samples, dtype=bool)
    argmax_rows[:1 if argmax_first else 0] = True
    if greedy:
        argmax_rows[:] = True
    with threadpool_limits(limits=1, user_api="blas"):
        return _rollout(ck, state, mnl, samples, rng, argmax_rows, min_prob_vm,
                        min_prob_host)


def _rollout(ck: Checkpoint, state: MappingState, mnl: int, samples: int,
             rng: np.random.Generator | None, argmax_rows: np.ndarray, min_prob_vm: float,
             min_prob_host: float,
             ) -> tuple[list[list[Migration]], list[MappingState]]:
    tokens = tokens_of(state)
    states = [state.copy() for _ in range(samples)]
    plans: list[list[Migration]] = [[] for _ in range(samples)]
    if len(tokens) == 0 or mnl == 0:
        return plans, states
    cpu, mem = vm_static(state, tokens)
    w, a = ck.weights, ck.arch
    B = samples
    for t in range(mnl):
        free_c = np.stack([s.free_cpu for s in states])
        free_m = np.stack([s.free_mem for s in states])
        hf = host_features(free_c, free_m, state.cap_cpu, state.cap_mem)
        vh = np.stack([s.vm_host[tokens] for s in states])
        vn = np.stack([s.vm_numa[tokens] for s in states])
        vf = vm_features(hf, state.cap_cpu, state.cap_mem, cpu, mem, vh, vn)
        step = np.full(B, t / mnl, dtype=np.float32)
        vm_logits, _ = vm_forward(w, a, hf, vf, step, vh)
        vi = _choose(vm_logits, argmax_rows, min_prob_vm, rng)
        chosen = vf[np.arange(B), vi]
        slot_logits = host_forward(w, a, hf, chosen, step).astype(np.float64)
        masks = np.stack([host_mask(s, int(tokens[i])) for s, i in zip(states, vi,
                                                                        strict=True)])
        slot_logits[~masks] = -np.inf
        slots = _choose(slot_logits, argmax_rows, min_prob_host, rng)
        for b in range(B):
            k = int(tokens[vi[b]])
            m = slot_migration(states[b], k, int(slots[b]))
            if m is not None:
                states[b].apply(m, len(plans[b]) + 1)
                plans[b].append(m)
    return plans, states


class VMR2L(Rescheduler):
    """VMR²L's learned two-stage rescheduler (numpy inference of a trained transformer
    policy; see :mod:`dcsim.reschedulers.vmr2l`). ``samples`` trajectories of MNL steps,
    the lowest final FR kept (the paper's risk-seeking evaluation; with ``argmax_first``
    the first trajectory is the argmax one); ``greedy`` takes the argmax only.
    ``checkpoint``: a shipped policy's name or an ``.npz`` path (default: the shipped
    production-trained policy). The sampling uses the rescheduler's ``rng``
    (``--seed``), so the same seed gives the same plan."""

    name = "vmr2l"
    description = "VMR²L's learned two-stage transformer policy (risk-seeking sampling)"

    class Options(Rescheduler.Options):
        checkpoint: str | None = Field(None, description="shipped policy name or .npz path")
        samples: int = Field(5, ge=1, description="trajectories sampled; the best is kept")
        greedy: bool = Field(False, description="argmax actions, one trajectory")
        argmax_first: bool = Field(
            True, description="the first trajectory takes the argmax actions (dcsim's "
            "addition: the plan is never worse than greedy: true); false: all sampled, "
            "as the paper")
        min_prob_vm: float = Field(
            0.0, ge=0.0, lt=1.0, description="sampling ignores VMs below this probability "
            "(the authors' action threshold: 1e-5)")
        min_prob_host: float = Field(
            0.0, ge=0.0, lt=1.0, description="sampling ignores host slots below this "
            "probability (the authors': 1e-4)")

        @field_validator("checkpoint")
        @classmethod
        def _readable(cls, v: str | None) -> str | None:  # `dcsim validate` reads it
            try:
                load_checkpoint(checkpoint_path(v))
            except ConfigError as e:
                raise ValueError(str(e).removeprefix("checkpoint: ")) from None
            return v

    def __init__(self, options=None, *, rng=None):
        super().__init__(options, rng=rng)
        self.checkpoint = load_checkpoint(checkpoint_path(self.options.checkpoint))

    def reschedule(self, state: MappingState, mnl: int) -> list[Migration]:
        samples = 1 if self.options.greedy else self.options.samples
        o = self.options
        plans, ends = rollout(self.checkpoint, state, mnl, samples, self.rng,
                              greedy=o.greedy, argmax_first=o.argmax_first,
                              min_prob_vm=o.min_prob_vm, min_prob_host=o.min_prob_host)
        frag = [s.fragment() for s in ends]
        best = int(np.argmin(frag))
        return Plan(plans[best], status="ok",
                    info={"samples": samples, "sample_fragments": frag,
                          "checkpoint": str(self.checkpoint.path.name)})


@hookimpl
def register_reschedulers(register):
    register(VMR2L)
