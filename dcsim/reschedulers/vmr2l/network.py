"""VMR²L's two-stage transformer in numpy: the VM actor-critic and the host actor
(``nn.Transformer`` semantics, post-LN, GELU), dense or sparse attention, and the weight
layout a checkpoint holds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from dcsim.reschedulers.vmr2l.features import HOST_FEATURES, VM_FEATURES


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
    :class:`dcsim.learn.vmr2l.network.VMR2LPolicy`) and its shape."""
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
