"""The greedy choice of the learned policies: float32 rounding is not a preference."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from dcsim.greedy import TIE_RTOL, greedy_argmax


def test_near_ties_go_to_the_lowest_index_real_gaps_do_not():
    """Logits 1e-7 apart (the float32 rounding of the shipped networks' sums) are ties: the
    first wins. A gap of 1e-3 is a preference. Masked actions (-inf) are never taken."""
    z = np.array([-np.inf, 3.9061084, 3.9061088, 3.9061086])
    assert greedy_argmax(z) == 1
    assert int(np.argmax(z)) == 2            # what a plain argmax would take
    assert greedy_argmax(np.array([3.906, 3.907, -np.inf])) == 1
    assert greedy_argmax(np.array([-np.inf, -np.inf, 0.0])) == 2
    rows = np.array([[1.0, 1.0 + 1e-7, 0.0], [0.0, 0.5, 0.49]])
    assert greedy_argmax(rows).tolist() == [0, 1]


@given(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=30), st.integers(0, 29))
def test_the_choice_is_within_tolerance_of_the_best_and_first_such(values, masked):
    z = np.array(values)
    if masked < z.size - 1:
        z[masked] = -np.inf
    i = greedy_argmax(z)
    top = z.max()
    tol = TIE_RTOL * max(1.0, abs(top))
    assert z[i] >= top - tol
    assert not (z[:i] >= top - tol).any()
