"""The greedy choice of a learned policy, the same on every machine.

The shipped policies (Nara's GNN, VMR²L's transformer) run in float32, and BLAS builds round
their sums differently: actions that are equal in exact arithmetic (idle, identical servers)
come out up to ~1e-7 apart, in an order that depends on the machine and the numpy version.
A plain ``argmax`` then picks a different server on another machine and the run's rows
change. :func:`greedy_argmax` treats logits within :data:`TIE_RTOL` of the best as ties
and takes the lowest index among them, which is the documented tie rule of both policies.
"""

from __future__ import annotations

import numpy as np

#: Logits within this much of the best, relative to ``max(1, |best|)``, are ties: 100x the
#: float32 rounding of the shipped networks' sums, far below any gap a policy learns.
TIE_RTOL = 1e-5


def greedy_argmax(logits: np.ndarray) -> np.ndarray | int:
    """Per row of ``logits`` (or for a 1-d array), the index of the highest value, ties
    (within :data:`TIE_RTOL`) to the lowest index. ``-inf`` marks a masked action."""
    z = np.asarray(logits)
    top = z.max(axis=-1, keepdims=True)
    near = z >= top - TIE_RTOL * np.maximum(1.0, np.abs(top))
    best = near.argmax(axis=-1)
    return int(best) if z.ndim == 1 else best
