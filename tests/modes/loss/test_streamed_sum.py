"""numpy's pairwise sum, computed from values read a block at a time
(``dcsim.modes.loss.streamed_sum``, issue #47 item 9): the same float as ``np.add.reduce`` and
``mean()`` over the whole array, bit for bit, for any length and block size; each read asks
for the next values, in order, never more than a block; a numpy that sums another way fails
here rather than shifting the Nara means unseen."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dcsim.modes.loss import streamed_sum as ss


def reader(a: np.ndarray, leaf: int, calls: list):
    pos = 0

    def read(k: int) -> np.ndarray:
        nonlocal pos
        assert 1 <= k <= leaf
        calls.append((pos, k))
        out = a[pos:pos + k].copy()   # a fresh block, as the file reads give
        pos += k
        return out

    return read


@settings(max_examples=150, deadline=None)
@given(n=st.integers(0, 5000), leaf=st.integers(128, 1200), seed=st.integers(0, 2**32 - 1),
       scale=st.sampled_from([1.0, 1e-8, 1e8, 1e300]), signed=st.booleans())
def test_the_streamed_sum_is_numpys_bit_for_bit(n, leaf, seed, scale, signed):
    rng = np.random.default_rng(seed)
    a = rng.random(n) * scale
    if signed:
        a -= scale / 2
    calls = []
    got = ss.streamed_sum(n, reader(a, leaf, calls), leaf)
    assert got == float(np.add.reduce(a)) or (math.isinf(got) and math.isinf(a.sum()))
    # the reads cover the values once, in order
    assert [p for p, _ in calls] == list(np.cumsum([0] + [k for _, k in calls])[:-1])
    assert sum(k for _, k in calls) == n
    mean = ss.streamed_mean(n, reader(a, leaf, []), leaf)
    if n:
        assert mean == float(a.mean())
    else:
        assert math.isnan(mean)


@pytest.mark.parametrize("n", [ss.LEAF, ss.LEAF + 1, 3 * ss.LEAF + 5, 2_500_001])
def test_at_the_default_block_and_beyond_it(n):
    a = np.random.default_rng(n).random(n)
    calls = []
    assert ss.streamed_mean(n, reader(a, ss.LEAF, calls)) == float(a.mean())
    assert max(k for _, k in calls) <= ss.LEAF
    assert len(calls) >= n // ss.LEAF


def test_a_block_numpy_would_not_split_is_refused_and_a_bad_read_named():
    with pytest.raises(ValueError, match="at least 128"):
        ss.streamed_sum(10, lambda k: np.zeros(k), leaf=64)
    with pytest.raises(ValueError, match="float32"):
        ss.streamed_sum(10, lambda k: np.zeros(k, dtype=np.float32))
