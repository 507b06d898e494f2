"""Queue-mode schedulers: hand-computed episodes, choices on constructed views, registration."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dcsim import plugins
from dcsim.errors import ConfigError
from dcsim.queue import JobSet, QueueEnv, deeprm_jobset
from dcsim.schedulers import QueueView
from dcsim.schedulers.builtin import FIFO, SCHEDULERS, SJF, Packer, RandomScheduler, TetrisStar

# Capacity (10, 10), horizon 20, 10 slots. Jobs (arrival, length, demand):
#   j0 (0, 3, (6, 1))   j1 (0, 1, (6, 1))   j2 (0, 2, (3, 3))   j3 (1, 1, (5, 5))
HAND = JobSet(arrival=[0, 0, 0, 1], length=[3, 1, 2, 1],
              demand=[[6, 1], [6, 1], [3, 3], [5, 5]], steps=2)

# SJF. t=0: all fit; j1 (len 1) starts, free[0] = (4, 9); j0 needs 6 cpu: no; j2 (3, 3)
#   fits rows 0-1: starts, free[0] = (1, 6), free[1] = (7, 7); void.
#   t=1: j1 done; j3 arrives. j0 fits (7, 10, 10 cpu) and j3 fits; SJF takes j3
#   (free[0] = (2, 2)); j0 no longer fits; void. t=2: j2 done; j0 starts (finish 5).
#   finish: j0 5, j1 1, j2 2, j3 2 -> slowdowns 5/3, 1, 1, 1 -> mean 7/6.
# Packer. t=0: scores j0 70, j1 70, j2 60: j0 (lowest slot) starts, rows 0-2 = (4, 9);
#   j1 no; j2 (score 39) starts, rows 0-1 = (1, 6); void. t=1: j3 (slot 0) and j1 do not
#   fit; void. t=2: j2 done, free[0] = (4, 9): still none; void. t=3: j0 done: j3 scores
#   100 > j1 70: j3 starts; j1 (6 cpu > 5) no; void. t=4: j1 starts, finishes 5.
#   finish: j0 3, j1 5, j2 2, j3 4 -> slowdowns 1, 5, 1, 3 -> mean 2.5.
# FIFO. t=0: j0 (slot 0) starts, rows 0-2 = (4, 9); next oldest j1 does not fit: void
#   (no skipping to j2). t=1, t=2: j1 still does not fit. t=3: j0 done: j1 starts,
#   free[0] = (4, 9); j2 fits rows 0-1: starts; j3 (5, 5) vs (1, 6): void. t=4: j1 done:
#   j3 starts. finish: j0 3, j1 4, j2 5, j3 5 -> slowdowns 1, 4, 2.5, 4 -> mean 2.875.
# Tetris* (knob 0.5, max-normalised). t=0: j0 .5 + 1/6, j1 .5 + .5 = 1, j2 3/7 + 1/4:
#   j1, then as SJF -> 7/6.
EXPECTED = {
    "sjf": (7 / 6, [5, 1, 2, 2]),
    "packer": (2.5, [3, 5, 2, 4]),
    "fifo": (2.875, [3, 4, 5, 5]),
    "tetris_star": (7 / 6, [5, 1, 2, 2]),
}


@pytest.mark.parametrize("cls", [SJF, Packer, FIFO, TetrisStar], ids=lambda c: c.name)
def test_hand_computed_episode(cls):
    env = QueueEnv()
    s = env.run(cls(), HAND)
    mean, finish = EXPECTED[cls.name]
    assert env.records()["finish"].tolist() == finish
    assert s["mean_slowdown"] == pytest.approx(mean)
    assert s["finished"] == 4 and s["unfinished"] == 0 and s["steps"] == 5


def test_tetris_star_knob_extremes_reproduce_packer_and_sjf_episodes():
    env = QueueEnv()
    one = TetrisStar(TetrisStar.Options(knob=1.0))
    zero = TetrisStar(TetrisStar.Options(knob=0.0))
    assert env.run(one, HAND)["mean_slowdown"] == pytest.approx(2.5)
    assert env.run(zero, HAND)["mean_slowdown"] == pytest.approx(7 / 6)


def view(free0, lengths, demands, valid=None, arrivals=None, horizon=20, cap=10.0):
    """A view whose free capacity is ``free0`` at every step of the horizon."""
    lengths = np.asarray(lengths, dtype=np.int64)
    m = len(lengths)
    free = np.tile(np.asarray(free0, float), (horizon, 1))
    valid = np.ones(m, bool) if valid is None else np.asarray(valid, bool)
    arrivals = np.zeros(m, np.int64) if arrivals is None else np.asarray(arrivals, np.int64)
    return QueueView(time=0, capacity=np.full(free.shape[1], cap), free=free,
                     slot_valid=valid, slot_length=lengths,
                     slot_demand=np.asarray(demands, float).reshape(m, -1),
                     slot_arrival=arrivals, backlog=0)


DETERMINISTIC = [SJF, Packer, TetrisStar, FIFO]


@pytest.mark.parametrize("cls", DETERMINISTIC, ids=lambda c: c.name)
def test_void_when_nothing_fits(cls):
    v = view([3, 3], [1, 2, 25], [[4, 1], [1, 4], [1, 1]])  # last: longer than horizon
    assert cls().choose(v) == v.void == 3
    empty = view([10, 10], [0, 0], [[0, 0], [0, 0]], valid=[False, False])
    assert cls().choose(empty) == 2


def test_choices_on_a_constructed_view():
    # free (6, 2). slot 0: len 5 (1, 1) fits; 1: len 2 (5, 1) fits; 2: len 1 (7, 1) does
    # not fit; 3: len 2 (1, 2) fits; 4: empty.
    v = view([6, 2], [5, 2, 1, 2, 0], [[1, 1], [5, 1], [7, 1], [1, 2], [0, 0]],
             valid=[True, True, True, True, False], arrivals=[3, 1, 0, 1, 0])
    assert v.fits_now().tolist() == [True, True, False, True, False]
    assert SJF().choose(v) == 1  # length 2 in slots 1 and 3: lowest slot
    assert Packer().choose(v) == 1  # 32 vs 8 and 10
    # Tetris* 0.5: slot 0 .5*8/32 + .5/5 = .225, slot 1 .5 + .25, slot 3 .5*10/32 + .25
    assert TetrisStar().choose(v) == 1
    # the oldest job (slot 2, arrival 0) does not fit: strict FIFO waits
    assert FIFO().choose(v) == v.void
    v2 = view([6, 2], [5, 2, 1], [[1, 1], [5, 1], [1, 1]], arrivals=[3, 1, 1])
    assert FIFO().choose(v2) == 1  # oldest (arrival 1), ties: lowest slot
    # a packer-favoured long job against a short small one
    v3 = view([10, 10], [10, 1], [[9, 9], [1, 1]])
    assert Packer().choose(v3) == 0 and SJF().choose(v3) == 1
    assert TetrisStar(TetrisStar.Options(knob=0.9)).choose(v3) == 0
    assert TetrisStar(TetrisStar.Options(knob=0.1)).choose(v3) == 1
    # the authors' unnormalised mix: the dot product (180 vs 20) swamps 1/length
    raw = TetrisStar(TetrisStar.Options(knob=0.1, normalise="none"))
    assert raw.choose(v3) == 0


def test_fits_now_respects_every_step_of_the_length():
    v = view([10, 10], [3, 1], [[6, 6], [6, 6]])
    free = v.free.copy()
    free[2] = 5  # a reservation two steps ahead
    v = QueueView(0, v.capacity, free, v.slot_valid, v.slot_length, v.slot_demand,
                  v.slot_arrival, 0)
    # equal packer scores (120); slot 0 (length 3) collides at step 2, so slot 1
    assert Packer().choose(v) == 1
    assert TetrisStar(TetrisStar.Options(knob=1.0)).choose(v) == 1
    assert FIFO().choose(v) == v.void  # the oldest (slot 0) does not fit


@st.composite
def views(draw):
    m = draw(st.integers(1, 6))
    r = draw(st.integers(1, 3))
    free0 = draw(st.lists(st.integers(0, 10), min_size=r, max_size=r))
    lengths = draw(st.lists(st.integers(1, 25), min_size=m, max_size=m))
    demands = draw(st.lists(st.lists(st.integers(0, 10), min_size=r, max_size=r),
                            min_size=m, max_size=m))
    valid = draw(st.lists(st.booleans(), min_size=m, max_size=m))
    return view(free0, lengths, demands, valid=valid)


@settings(max_examples=150, deadline=None)
@given(v=views())
def test_tetris_star_extremes_choose_as_packer_and_sjf(v):
    assert TetrisStar(TetrisStar.Options(knob=1.0)).choose(v) == Packer().choose(v)
    assert TetrisStar(TetrisStar.Options(knob=0.0)).choose(v) == SJF().choose(v)
    for cls in DETERMINISTIC:
        a = cls().choose(v)
        assert a == v.void or v.fits_now()[a]


def test_tetris_star_options_are_validated():
    with pytest.raises(ConfigError, match="knob"):
        TetrisStar.parse_options({"knob": 1.5})
    assert TetrisStar.label_for(TetrisStar.parse_options({"knob": 0.2})) == \
        "tetris_star(knob=0.2)"


def test_random_uses_only_its_rng():
    v = view([10, 10], [1, 2, 3], [[1, 1]] * 3)
    state = np.random.get_state()[1].copy()
    a = RandomScheduler(rng=np.random.default_rng(5))
    b = RandomScheduler(rng=np.random.default_rng(5))
    c = RandomScheduler(rng=np.random.default_rng(6))
    ca = [a.choose(v) for _ in range(200)]
    assert ca == [b.choose(v) for _ in range(200)]
    assert ca != [c.choose(v) for _ in range(200)]
    assert set(ca) == {0, 1, 2, 3}  # uniform over the M + 1 actions, void included
    np.testing.assert_array_equal(np.random.get_state()[1], state)
    js = deeprm_jobset(np.random.default_rng(0), steps=20)
    s1 = QueueEnv().run(RandomScheduler(rng=np.random.default_rng(1)), js)
    s2 = QueueEnv().run(RandomScheduler(rng=np.random.default_rng(1)), js)
    assert s1 == s2 and s1["finished"] == len(js)


def test_sjf_beats_fifo_and_packer_on_deeprm_load():
    # a sanity check of the whole loop at the paper's headline rate (≈130 % load)
    env = QueueEnv()
    mean = {cls.name: np.mean([env.run(cls(), deeprm_jobset(np.random.default_rng(s)))
                               ["mean_slowdown"] for s in range(10)])
            for cls in (SJF, Packer, FIFO)}
    assert mean["sjf"] < mean["packer"] and mean["sjf"] < mean["fifo"]


def test_all_five_registered_as_builtin_plugins():
    plugins.reset()
    found = plugins.registered("scheduler")
    names = {"sjf", "packer", "tetris_star", "fifo", "random"}
    assert names <= set(found)
    for n in names:
        assert found[n].package == "dcsim" and found[n].kind == "scheduler"
        assert found[n].cls.description
    assert plugins.get_scheduler_class("tetris_star") is TetrisStar
    assert {c.name for c in SCHEDULERS} == names


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_fits_now_equals_the_step_by_step_definition(data):
    """The prefix-minimum test is exactly 'demand <= free at each of the first length steps'."""
    T, M, R = (data.draw(st.integers(1, 6)), data.draw(st.integers(1, 5)),
               data.draw(st.integers(1, 3)))
    free = np.array(data.draw(st.lists(st.integers(0, 5), min_size=T * R, max_size=T * R)),
                    dtype=float).reshape(T, R)
    length = np.array(data.draw(st.lists(st.integers(0, T + 2), min_size=M, max_size=M)))
    valid = length > 0
    demand = np.array(data.draw(st.lists(st.integers(0, 5), min_size=M * R, max_size=M * R)),
                      dtype=float).reshape(M, R) * valid[:, None]
    v = QueueView(time=0, capacity=np.full(R, 5.0), free=free, slot_valid=valid,
                  slot_length=length, slot_demand=demand, slot_arrival=np.zeros(M, int),
                  backlog=0)
    want = [bool(valid[i] and length[i] <= T and (free[:length[i]] >= demand[i]).all())
            for i in range(M)]
    assert v.fits_now().tolist() == want
