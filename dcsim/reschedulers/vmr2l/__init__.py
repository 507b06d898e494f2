"""VMR²L's learned rescheduler (Guo et al., NSDI '24): features (:mod:`.features`), the
two-stage transformer policy in numpy (:mod:`.network`), its checkpoint format
(:mod:`.checkpoint`) and, here, the risk-seeking rollouts and the ``vmr2l`` plugin.

This module needs numpy and scipy only. The Gymnasium environment
(:mod:`dcsim.learn.vmr2l.env`), the PyTorch network (:mod:`dcsim.learn.vmr2l.network`) and
its training (:mod:`dcsim.learn.vmr2l.train`, ``dcsim train vmr2l``) build on it; the shipped
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

import numpy as np
from pydantic import Field, field_validator
from threadpoolctl import threadpool_limits

from dcsim.errors import ConfigError
from dcsim.hookspecs import hookimpl
from dcsim.reschedulers.base import Plan, Rescheduler
from dcsim.reschedulers.vmr2l.checkpoint import (
    CHECKPOINT_FORMAT,
    CHECKPOINT_VERSION,
    SHIPPED_DIR,
    SHIPPED_NAME,
    Checkpoint,
    checkpoint_path,
    load_checkpoint,
    save_checkpoint,
    shipped_checkpoints,
)
from dcsim.reschedulers.vmr2l.features import (
    HOST_FEATURE_NAMES,
    HOST_FEATURES,
    VM_FEATURE_NAMES,
    VM_FEATURES,
    X,
    host_features,
    host_mask,
    observe,
    slot_migration,
    tokens_of,
    update_features,
    vm_features,
    vm_static,
)
from dcsim.reschedulers.vmr2l.network import (
    Architecture,
    SparseIndex,
    host_forward,
    sparse_index,
    sparse_masks,
    vm_forward,
    weight_shapes,
)
from dcsim.tie_break import greedy_argmax
from dcsim.vm.model import MappingState, Migration
from dcsim.vm.view import MappingView

__all__ = [
    "CHECKPOINT_FORMAT", "CHECKPOINT_VERSION", "SHIPPED_DIR", "SHIPPED_NAME", "Checkpoint",
    "checkpoint_path", "load_checkpoint", "save_checkpoint", "shipped_checkpoints",
    "HOST_FEATURE_NAMES", "HOST_FEATURES", "VM_FEATURE_NAMES", "VM_FEATURES", "X",
    "host_features", "host_mask", "observe", "slot_migration", "tokens_of",
    "update_features", "vm_features",
    "vm_static", "Architecture", "SparseIndex", "host_forward", "sparse_index",
    "sparse_masks", "vm_forward", "weight_shapes", "rollout", "VMR2L",
    "register_reschedulers",
]


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
    drop = p < min_prob
    drop[np.arange(len(z)), z.argmax(axis=1)] = False   # ties may all be below min_prob
    return np.where(drop, -np.inf, logits)


def _choose(logits: np.ndarray, argmax_rows: np.ndarray, min_prob: float,
            rng: np.random.Generator | None) -> np.ndarray:
    """Row ``b``'s action: the argmax where ``argmax_rows[b]`` (ties within float32
    rounding to the lowest index: :func:`dcsim.tie_break.greedy_argmax`), otherwise drawn from
    the softmax of the thresholded logits. Draws for every row, so the sampled rows' random
    stream does not depend on which rows take the argmax."""
    best = greedy_argmax(logits)
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

    def reschedule(self, view: MappingView, mnl: int) -> list[Migration]:
        state = view.copy()  # the rollout's own state
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
