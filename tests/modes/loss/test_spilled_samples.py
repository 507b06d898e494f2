"""The per-request utilisation samples (Nara's ``util_<r>_last50``) moved to a temporary
file a block at a time, so a long replay's memory stays flat (issue #47, item 9): the mean
read back equals numpy's over the samples held in memory, bit for bit, wherever the blocks
fall; and a run whose samples spill gives the rows of one whose samples never do."""

from __future__ import annotations

import numpy as np
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

import dcsim.modes.loss.metrics as metrics
from dcsim.modes.loss import streamed_sum
from dcsim.modes.loss.metrics import SpilledSamples, last50_mean
from tests.helpers.cli import assert_same_dataset, ok
from tests.helpers.configs import small_experiment


@settings(max_examples=60, deadline=None)
@given(values=st.lists(st.floats(0, 1, width=32), max_size=900),
       spill_at=st.lists(st.integers(0, 900), max_size=6), block=st.integers(1, 40),
       skip=st.integers(0, 2))
def test_the_tail_mean_is_numpys_over_the_samples_in_memory(values, spill_at, block, skip):
    old, old_leaf = metrics.SPILL, streamed_sum.LEAF
    metrics.SPILL = block          # small blocks in the file
    streamed_sum.LEAF = 128        # and read back in small blocks: the sum is split
    try:
        s = SpilledSamples()
        marks = set(spill_at)
        for i, v in enumerate(values):
            if i in marks:
                s.spill()
            s.buffer.append(v)
        expect = np.asarray(array_of(values), dtype=np.float64)[skip:]
        want = last50_mean(expect)
        got = s.tail_mean(skip)
        assert (np.isnan(want) and np.isnan(got)) or got == want
        assert s.values().tolist() == np.asarray(array_of(values), dtype=np.float64).tolist()
        s.buffer.append(0.5)       # the buffer is not left exported (appends still work)
    finally:
        metrics.SPILL, streamed_sum.LEAF = old, old_leaf


def array_of(values):
    from array import array

    return array("f", values)


def test_a_run_whose_samples_spill_gives_the_rows_of_one_that_does_not(tmp_path,
                                                                        monkeypatch):
    cfg = small_experiment("spill", seed=9, seeds=2, requests=3000,
                           workload={"batch_size": 100}, allocators=["random", "first_fit"])
    exp = tmp_path / "exp.yaml"
    exp.write_text(yaml.safe_dump(cfg, sort_keys=False))
    ok("run", exp, "--out", tmp_path / "held")
    monkeypatch.setattr(metrics, "SPILL", 257)   # spills every few batches of the run
    spills = []
    real = SpilledSamples.spill
    monkeypatch.setattr(SpilledSamples, "spill", lambda self: (spills.append(1), real(self)))
    ok("run", exp, "--out", tmp_path / "spilled")
    assert len(spills) >= 4 * 2 * 5       # runs × resources × several blocks each
    assert_same_dataset(tmp_path / "held", tmp_path / "spilled")


@settings(max_examples=80, deadline=None)
@given(chunks=st.lists(st.lists(st.booleans(), max_size=400), max_size=12))
def test_acceptance_last20_from_the_packed_log_is_the_same_float(chunks):
    from dcsim.modes.loss.metrics import AcceptanceLog, acceptance_last20

    log = AcceptanceLog()
    for c in chunks:
        log.extend(np.array(c, dtype=bool))
    want = acceptance_last20(log.flags())
    old = streamed_sum.LEAF
    streamed_sum.LEAF = 128        # the last fifth made and summed in small blocks
    try:
        got = log.last20()
    finally:
        streamed_sum.LEAF = old
    assert (np.isnan(want) and np.isnan(got)) or got == want


def test_acceptance_last20_of_a_long_log_at_the_default_block():
    from dcsim.modes.loss.metrics import AcceptanceLog, acceptance_last20

    rng = np.random.default_rng(3)
    log, parts = AcceptanceLog(), []
    for size in (65536, 1, 200_000, 65536, 70_001):
        f = rng.random(size) < 0.7
        log.extend(f)
        parts.append(f)
    assert log.last20() == acceptance_last20(np.concatenate(parts))
