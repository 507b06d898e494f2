"""The greedy choice of the learned policies: float32 rounding is not a preference, and numpy
(inference) and torch (training) break ties by the same rule."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dcsim.tie_break import TIE_ATOL, TIE_RTOL, greedy_argmax, greedy_argmax_torch


def _tol(top: float) -> float:
    return max(TIE_ATOL, TIE_RTOL * abs(top))


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


def test_exact_ties_take_the_lowest_index():
    assert greedy_argmax(np.full(40, 1.1233592, dtype=np.float32)) == 0
    assert greedy_argmax(np.array([0.0, 2.0, 1.0, 2.0, 2.0])) == 1
    assert greedy_argmax(np.array([[5.0, 5.0], [-3.0, -3.0]])).tolist() == [0, 0]


def test_the_tolerance_is_absolute_near_zero_and_relative_for_large_logits():
    # |max| < 1: within TIE_ATOL ties, just outside does not
    assert greedy_argmax(np.array([0.5 - 0.9 * TIE_ATOL, 0.5])) == 0
    assert greedy_argmax(np.array([0.5 - 1.1 * TIE_ATOL, 0.5])) == 1
    assert greedy_argmax(np.array([-0.9 * TIE_ATOL, 0.0])) == 0
    # |max| = 1000: the relative part, 1e-2, decides
    assert greedy_argmax(np.array([1000 - 0.9 * 1000 * TIE_RTOL, 1000.0])) == 0
    assert greedy_argmax(np.array([1000 - 1.1 * 1000 * TIE_RTOL, 1000.0])) == 1
    assert greedy_argmax(np.array([-1000.0, -1000 + 0.9 * 1000 * TIE_RTOL])) == 0


def test_clear_maxima_win_wherever_they_are():
    z = np.array([0.1, 0.2, 7.0, 0.3, 6.9])
    assert greedy_argmax(z) == 2
    assert greedy_argmax(z[::-1].copy()) == 2
    rows = np.array([[3.0, 1.0, 2.0], [1.0, 2.0, 3.0]], dtype=np.float32)
    assert greedy_argmax(rows).tolist() == [0, 2]


def test_masked_entries_are_never_chosen_and_all_masked_rows_give_zero():
    ninf = -np.inf
    assert greedy_argmax(np.array([ninf, ninf, -5.0, ninf])) == 2
    assert greedy_argmax(np.array([ninf, -1e30, ninf])) == 1   # a huge gap is no tie
    rows = np.array([[ninf, ninf, ninf], [ninf, 1.0, 1.0]], dtype=np.float32)
    with np.errstate(all="raise"):                             # no inf - inf on the way
        assert greedy_argmax(rows).tolist() == [0, 1]
    assert greedy_argmax(np.array([0.0, np.inf, 5.0, np.inf])) == 1


@given(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=30), st.integers(0, 29))
def test_the_choice_is_within_tolerance_of_the_best_and_first_such(values, masked):
    z = np.array(values)
    if masked < z.size - 1:
        z[masked] = -np.inf
    i = greedy_argmax(z)
    top = z.max()
    assert z[i] >= top - _tol(top)
    assert not (z[:i] >= top - _tol(top)).any()


# --------------------------------------------------------------------------- torch twin
try:
    import torch
except ImportError:  # the core install: the numpy rule above is still tested
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="the torch twin needs the learn extra")


def _both(z: np.ndarray) -> tuple[list[int] | int, list[int] | int]:
    got = greedy_argmax_torch(torch.from_numpy(z))
    want = greedy_argmax(z)
    return (got.tolist() if z.ndim > 1 else int(got)), (
        want.tolist() if z.ndim > 1 else want)


@needs_torch
@pytest.mark.parametrize("z", [
    np.full(40, 1.1233592, dtype=np.float32),                            # the GPU failure
    np.array([-np.inf, 3.9061084, 3.9061088, 3.9061086], dtype=np.float32),
    np.array([0.5 - 0.9 * TIE_ATOL, 0.5], dtype=np.float32),
    np.array([1000 - 1.1 * 1000 * TIE_RTOL, 1000.0], dtype=np.float32),
    np.array([[-np.inf, -np.inf], [-np.inf, 2.0]], dtype=np.float32),     # all masked row
    np.array([[0.1, 7.0, 0.3], [1.0, 1.0, 0.0]], dtype=np.float64),
    np.array([0.0, np.inf, np.inf], dtype=np.float32),
], ids=["tied", "near-tie", "atol", "rtol", "masked", "float64", "inf"])
def test_torch_twin_chooses_as_numpy_on_the_unit_cases(z):
    got, want = _both(z)
    assert got == want


@needs_torch
def test_torch_twin_keeps_the_leading_shape_and_device():
    z = torch.zeros(2, 3, 5)
    z[1, 2, 4] = 1.0
    i = greedy_argmax_torch(z)
    assert i.shape == (2, 3) and i.dtype == torch.int64 and i.device == z.device
    assert i[1, 2] == 4 and int(i.sum()) == 4
    assert greedy_argmax_torch(torch.tensor([1.0, 2.0])).shape == ()


@st.composite
def _tied_rows(draw):
    """Random float32 rows with ties injected: some entries copied from the row's maximum,
    then moved by 0 or 1 ulp either way; some masked."""
    rows = draw(st.integers(1, 4))
    cols = draw(st.integers(1, 24))
    z = draw(hnp.arrays(np.float32, (rows, cols),
                        elements=st.floats(-1e4, 1e4, width=32)))
    picks = draw(hnp.arrays(np.int8, (rows, cols), elements=st.integers(-1, 4)))
    top = z.max(axis=1, keepdims=True)
    ulp = np.spacing(np.abs(top))
    tied = np.broadcast_to(top, z.shape) + np.clip(picks, -1, 1) * ulp
    z = np.where(picks <= 1, tied, z).astype(np.float32) if draw(st.booleans()) else z
    z = np.where(picks == 4, np.float32(-np.inf), z).astype(np.float32)
    if draw(st.booleans()):                        # logits of magnitude ~1 (atol's region)
        z = (z / np.float32(1e4)).astype(np.float32)
    return z


@needs_torch
@settings(max_examples=300, deadline=None)
@given(_tied_rows())
def test_numpy_and_torch_agree_on_tied_float32_rows(z):
    got, want = _both(z)
    assert got == want


def test_the_tolerance_can_be_given_for_float64_logits():
    from dcsim.tie_break import TIE_TOL_FLOAT64

    z = np.array([10.0 - 1e-6, 10.0])  # a gap float32 cannot resolve, float64 can
    assert greedy_argmax(z) == 0
    assert greedy_argmax(z, rtol=TIE_TOL_FLOAT64, atol=TIE_TOL_FLOAT64) == 1
    assert greedy_argmax(np.array([10.0 - 1e-12, 10.0]), rtol=TIE_TOL_FLOAT64,
                         atol=TIE_TOL_FLOAT64) == 0
