"""The greedy choice of a learned policy, the same on every machine and in both libraries.

The shipped policies (Nara's GNN, VMR²L's transformer, DeepRM's network) run in float32, and
BLAS builds round their sums differently: actions that are equal in exact arithmetic (idle,
identical servers) come out a few ulps apart, in an order that depends on the machine, the
numpy version and the library (numpy at inference, PyTorch, on a CPU or a GPU, in training).
A plain ``argmax`` then picks a different server on another machine, or in training than at
inference, and the run's rows change.

**The tie rule.** In a row whose largest value is ``m``, an entry ``x`` ties the maximum when

    x >= m - max(TIE_ATOL, TIE_RTOL * |m|)

(an absolute tolerance for logits near zero, a relative one for large logits), and the
greedy choice is the *lowest index* among the entries that tie. The tolerances suit logits
computed in float32 (DeepRM's and VMR²L's numpy inference, PyTorch in training). Nara's
numpy inference computes in float64 and passes ``rtol=atol=``:data:`TIE_TOL_FLOAT64`
(:func:`dcsim.allocators.multi.learned.greedy_server` says why). ``-inf`` marks a masked
action: it never ties a finite maximum. A row whose entries are all masked (``m = -inf``)
gives index 0, as does a row holding NaN (no entry compares true); a row whose maximum is
``+inf`` takes its first ``+inf``.

:func:`greedy_argmax` applies the rule to numpy arrays (inference, the rollouts of the
numpy-side trainers), :func:`greedy_argmax_torch` to torch tensors (the PyTorch greedy
evaluation during training). Both compute the threshold in the logits' own dtype with the
same correctly rounded operations (``abs``, ``*``, ``max``, ``-``), and comparisons are
exact, so on the same values they choose the same index, bit for bit, on any device.
This module imports neither torch nor anything of dcsim, so any layer may use it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: Relative part of the tolerance: 100x the float32 rounding of the shipped networks' sums,
#: far below any gap a policy learns.
TIE_RTOL = 1e-5
#: Absolute part of the tolerance, which takes over for logits of magnitude below 1.
TIE_ATOL = 1e-5
#: Both parts of the tolerance for logits computed in float64. Measured on Nara's shipped
#: policies over the 6,147 decisions of four shipped experiments (reduced): logits equal in
#: exact arithmetic came out at most 6e-11 apart (relative to the largest), distinct ones
#: at least 7e-7 apart; 1e-8 lies more than 100x from each.
TIE_TOL_FLOAT64 = 1e-8


def greedy_argmax(logits: np.ndarray, rtol: float = TIE_RTOL,
                  atol: float = TIE_ATOL) -> np.ndarray | int:
    """Per row (last axis) of ``logits``, the lowest index among the entries that tie the
    row's maximum, ``x >= m - max(atol, rtol * |m|)`` (the module's tie rule): an
    ``int`` for a 1-d array, an integer array of the leading shape otherwise. ``-inf``
    marks a masked action; an all-masked row gives 0."""
    z = np.asarray(logits)
    top = z.max(axis=-1, keepdims=True)
    tol = np.maximum(atol, rtol * np.abs(top))
    tol = np.where(np.isinf(top), 0.0, tol).astype(tol.dtype, copy=False)  # ±inf: exact
    near = z >= top - tol
    best = near.argmax(axis=-1)  # the first True (0 when none: NaN rows)
    return int(best) if z.ndim == 1 else best


def greedy_argmax_torch(logits: Any) -> Any:
    """:func:`greedy_argmax` for a torch tensor, on its own device: the same tie rule,
    computed with the same float operations, so on equal values the two choose the same
    index. Returns an int64 tensor of the leading shape (0-d for a 1-d tensor); torch is
    used only through the tensor's methods, so this module does not import it."""
    top = logits.amax(dim=-1, keepdim=True)
    tol = (top.abs() * TIE_RTOL).clamp(min=TIE_ATOL)
    tol = tol.masked_fill(top.isinf(), 0.0)
    near = logits >= top - tol
    # argmax over 0/1 returns the first maximal index (documented for CPU and CUDA alike)
    return near.byte().argmax(dim=-1)
