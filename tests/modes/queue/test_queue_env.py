"""Queue mode (DeepRM): job sets, the time-slotted environment's semantics, invariants."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dcsim.errors import PluginError
from dcsim.queue import (
    JobSet,
    QueueConfig,
    QueueEnv,
    deeprm_jobset,
    jobs_from_table,
    offered_load,
)
from dcsim.schedulers import Scheduler
from dcsim.schedulers.builtin import SJF


def jobs(rows, steps=None, resources=("cpu", "mem")):
    """rows: (arrival, length, demand...) tuples."""
    a = [r[0] for r in rows]
    return JobSet(arrival=a, length=[r[1] for r in rows],
                  demand=np.array([r[2:] for r in rows], dtype=float).reshape(len(rows), -1),
                  resources=resources, steps=steps if steps is not None else max(a) + 1)


# ---------------------------------------------------------------------- JobSet
def test_jobset_validates_with_clear_messages():
    with pytest.raises(ValueError, match="sorted"):
        jobs([(1, 1, 1, 1), (0, 1, 1, 1)])
    with pytest.raises(ValueError, match=">= 1"):
        jobs([(0, 0, 1, 1)])
    with pytest.raises(ValueError, match="shape"):
        JobSet(arrival=[0], length=[1], demand=[[1, 1, 1]], steps=1)
    with pytest.raises(ValueError, match="0..1"):
        JobSet(arrival=[2], length=[1], demand=[[1, 1]], steps=2)
    with pytest.raises(ValueError, match="integers"):
        JobSet(arrival=[0.5], length=[1], demand=[[1, 1]], steps=2)
    with pytest.raises(ValueError, match=">= 0"):
        JobSet(arrival=[0], length=[1], demand=[[-1, 1]], steps=1)
    js = jobs([(0, 2, 1, 1)])
    assert js.arrival.dtype == np.int64 and js.length.dtype == np.int64
    assert not js.demand.flags.writeable
    empty = JobSet(arrival=[], length=[], demand=[], steps=3)
    assert len(empty) == 0 and empty.demand.shape == (0, 2)


# ---------------------------------------------------------------------- deeprm_jobset
def test_deeprm_jobset_same_seed_same_set_and_different_seed_differs():
    a = deeprm_jobset(np.random.default_rng(7))
    b = deeprm_jobset(np.random.default_rng(7))
    c = deeprm_jobset(np.random.default_rng(8))
    for x, y in ((a.arrival, b.arrival), (a.length, b.length), (a.demand, b.demand)):
        np.testing.assert_array_equal(x, y)
    assert a.steps == 50 and a.resources == ("cpu", "mem")
    assert not (len(a) == len(c) and np.array_equal(a.arrival, c.arrival)
                and np.array_equal(a.demand, c.demand))


def test_deeprm_jobset_matches_the_distribution_on_a_large_draw():
    steps, rate = 40_000, 0.7
    js = deeprm_jobset(np.random.default_rng(1), steps=steps, new_job_rate=rate)
    assert np.all(np.diff(js.arrival) > 0)  # at most one job per step
    assert len(js) / steps == pytest.approx(rate, abs=0.015)
    short = js.length <= 3
    assert short.mean() == pytest.approx(0.8, abs=0.015)
    assert set(np.unique(js.length)) == {1, 2, 3, 10, 11, 12, 13, 14, 15}
    dom = js.demand >= 5
    assert np.all(dom.sum(axis=1) == 1)  # exactly one dominant resource
    assert dom[:, 0].mean() == pytest.approx(0.5, abs=0.015)
    assert set(np.unique(js.demand[dom])) == set(range(5, 11))
    assert set(np.unique(js.demand[~dom])) == {1, 2}
    # empirical offered load (demand × length per step over capacity) vs the formula
    emp = (js.length[:, None] * js.demand).sum(axis=0) / (steps * 10)
    np.testing.assert_allclose(emp, offered_load(rate), rtol=0.04)


def test_deeprm_jobset_is_nested_across_rates():
    lo = deeprm_jobset(np.random.default_rng(3), new_job_rate=0.3)
    hi = deeprm_jobset(np.random.default_rng(3), new_job_rate=0.9)
    common = np.isin(hi.arrival, lo.arrival)
    np.testing.assert_array_equal(hi.arrival[common], lo.arrival)
    np.testing.assert_array_equal(hi.length[common], lo.length)
    np.testing.assert_array_equal(hi.demand[common], lo.demand)
    assert len(hi) > len(lo)


def test_offered_load_is_1845_times_rate():
    for rate in (0.1, 0.5, 0.7, 1.0):
        assert offered_load(rate) == pytest.approx(1.845 * rate)
    assert offered_load(0.7, capacity=20) == pytest.approx(1.845 * 0.7 / 2)
    # three resources: E[demand] = (7.5 + 2 * 1.5) / 3 = 3.5
    assert offered_load(1.0, n_resources=3) == pytest.approx(4.1 * 3.5 / 10)


# ---------------------------------------------------------------------- trace jobs
def test_jobs_from_table_maps_seconds_to_steps_and_slots():
    df = pd.DataFrame({
        "id": ["c", "a", "b", "d", "e"],
        "arrival": [1012.0, 1000.0, 1005.0, 1030.0, 1029.0],
        "duration": [10.0, 0.0, 25.0, 100.0, 3.0],
        "cpu": [12.0, 0.5, 2.0, 1.0, 0.05],
        "mem": [0.95, 0.003, 0.3, 0.1, 0.0],
    })
    js = jobs_from_table(df, time_unit=10, steps=3)
    # a: step 0, len max(1, 0) = 1, cpu ceil(.5) = 1, mem ceil(.03) = 1
    # b: step 0 (5 s), len ceil(2.5) = 3, cpu 2, mem 0.3*10 = 3 (not 4: float noise)
    # c: step 1, len 1, cpu 12 capped to 10, mem 9.5 -> 10
    # e: step 2, len 1, cpu 1, mem 0; d: step 3 >= steps: left out
    np.testing.assert_array_equal(js.arrival, [0, 0, 1, 2])
    np.testing.assert_array_equal(js.length, [1, 3, 1, 1])
    np.testing.assert_array_equal(js.demand, [[1, 1], [2, 3], [10, 10], [1, 0]])
    assert js.steps == 3
    js2 = jobs_from_table(df, time_unit=10, length_unit=1, steps=4, max_length=20, cap=5,
                          scale={"mem": 20})
    np.testing.assert_array_equal(js2.arrival, [0, 0, 1, 2, 3])
    np.testing.assert_array_equal(js2.length, [1, 20, 10, 3, 20])
    np.testing.assert_array_equal(js2.demand[:, 1], [1, 5, 5, 0, 2])
    js3 = jobs_from_table(df, time_unit=10, start=1010, steps=2)
    np.testing.assert_array_equal(js3.arrival, [0, 1])  # c at 1012, e at 1029
    with pytest.raises(ValueError, match="gpu"):
        jobs_from_table(df, resources=("cpu", "gpu"))


def test_jobs_from_committed_alibaba_slice_run_to_completion():
    df = pd.read_csv(Path(__file__).resolve().parents[3] / "traces" / "alibaba2018_slice.csv")
    js = jobs_from_table(df, start=110_000, steps=100, max_length=20)
    assert len(js) > 20 and js.demand.max() <= 10 and js.length.max() <= 20
    assert np.bincount(js.arrival).max() > 1  # real traces: several jobs in one step
    s = QueueEnv().run(SJF(), js)
    assert s["finished"] + s["dropped"] == len(js) and s["unfinished"] == 0


# ---------------------------------------------------------------------- semantics
def small_env(**kw):
    return QueueEnv(QueueConfig(**kw))


def test_job_of_step_zero_is_offered_at_reset():
    env = QueueEnv()
    v = env.reset(jobs([(0, 2, 3, 4), (1, 1, 1, 1)]))
    assert v.time == 0 and v.slot_valid.tolist() == [True] + [False] * 9
    assert v.slot_length[0] == 2 and v.slot_demand[0].tolist() == [3, 4]
    assert v.slot_arrival[0] == 0 and v.backlog == 0
    np.testing.assert_array_equal(v.free, np.full((20, 2), 10.0))


def test_several_jobs_start_in_one_step_and_void_advances_time():
    env = QueueEnv()
    env.reset(jobs([(0, 1, 2, 2), (0, 3, 3, 3), (0, 2, 9, 1)]))
    r = env.step(1)
    assert r.started and r.reward == 0 and env.time == 0
    r = env.step(0)
    assert r.started and env.time == 0
    v = env.view()
    assert v.free[0].tolist() == [5, 5] and v.free[1].tolist() == [7, 7]
    # slot 2 (demand 9 cpu) fits only once job 1 (3 cpu, 3 steps) is gone
    assert v.fits_now().tolist() == [False] * 10
    rec = env.records()
    assert rec["start"][:2].tolist() == [0, 0]
    r = env.step(v.void)
    assert not r.started and env.time == 1
    # reward before the advance: running jobs (len 1, 3) and the waiting one (len 2)
    assert r.reward == pytest.approx(-(1 + 1 / 3 + 1 / 2))
    v = env.view()
    assert v.free[0].tolist() == [7, 7] and v.free[-1].tolist() == [10, 10]
    assert env.records()["finish"][0] == 1


def test_empty_slot_or_unplaceable_job_moves_on():
    env = QueueEnv(QueueConfig(horizon=4))
    env.reset(jobs([(0, 5, 1, 1), (3, 1, 1, 1)]))
    assert not env.step(3).started and env.time == 1  # empty slot
    assert not env.step(0).started and env.time == 2  # length 5 > horizon 4
    with pytest.raises(ValueError, match="0..10"):
        env.step(11)
    with pytest.raises(ValueError):
        env.step(1.0)


def test_backlog_full_drops_and_head_moves_into_freed_slot():
    env = small_env(slots=1, backlog=1)
    v = env.reset(jobs([(0, 1, 1, 1), (0, 2, 1, 1), (0, 3, 1, 1)]))
    assert v.backlog == 1 and v.slot_length[0] == 1
    rec = env.records()
    assert rec["dropped"].tolist() == [False, False, True]
    env.step(0)  # job 0 starts; the backlog head (job 1, length 2) moves into slot 0
    v = env.view()
    assert v.time == 0 and v.backlog == 0
    assert v.slot_valid[0] and v.slot_length[0] == 2
    env.step(0)
    while not env.done:
        env.step(1)
    s = env.summary()
    assert (s["jobs"], s["finished"], s["dropped"], s["unfinished"]) == (3, 2, 1, 0)
    assert np.isnan(env.records()["slowdown"][2])
    # both started at 0: finishes 1 and 2, slowdowns 1 and 1
    assert env.records()["finish"][:2].tolist() == [1, 2]
    assert s["mean_slowdown"] == 1.0 and s["steps"] == 2


def test_arrival_goes_to_first_empty_slot_then_backlog():
    env = small_env(slots=3, backlog=5)
    env.reset(jobs([(0, 1, 1, 1), (0, 4, 1, 1), (0, 7, 1, 1), (1, 2, 1, 1), (1, 3, 1, 1)],
                   steps=2))
    env.step(0)  # slot 0 emptied, backlog empty
    env.step(3)  # t = 1: job 3 -> slot 0, job 4 -> backlog
    v = env.view()
    assert v.slot_length.tolist() == [2, 4, 7] and v.slot_arrival.tolist() == [1, 0, 0]
    assert v.backlog == 1


def test_job_that_only_fits_later_is_reserved_at_the_earliest_offset():
    env = QueueEnv()
    env.reset(jobs([(0, 3, 8, 8), (0, 2, 5, 5)]))
    env.step(0)  # rows 0..2 -> (2, 2)
    assert not env.view().fits_now()[1]
    r = env.step(1)  # fits from offset 3 on: reserved for later, time frozen
    assert r.started and env.time == 0
    v = env.view()
    assert v.free[:5, 0].tolist() == [2, 2, 2, 5, 5] and v.free[5, 0] == 10
    while not env.done:
        env.step(env.config.slots)
    rec = env.records()
    assert rec["start"].tolist() == [0, 3] and rec["finish"].tolist() == [3, 5]
    assert rec["slowdown"].tolist() == [1.0, 2.5]


def test_last_offset_horizon_minus_length_is_tried():
    # the authors' range(0, T - len) never tries offset T - len; dcsim does
    env = QueueEnv(QueueConfig(horizon=5))
    env.reset(jobs([(0, 2, 10, 10), (0, 3, 10, 10), (0, 5, 1, 1)]))
    env.step(0)
    assert env.step(1).started
    assert env.records()["start"][1] == 2  # = T - length
    env2 = QueueEnv(QueueConfig(horizon=5))
    env2.reset(jobs([(0, 5, 1, 1)]))
    assert env2.step(0).started  # length == T fits at offset 0


def test_longer_than_horizon_stays_unfinished_and_max_steps_ends_episode():
    env = QueueEnv(QueueConfig(horizon=5, max_steps=30))
    s = env.run(SJF(), jobs([(0, 6, 1, 1), (0, 2, 1, 1), (1, 1, 20, 1)]))
    assert s["steps"] == 30 and s["forced"]
    assert (s["finished"], s["unfinished"], s["dropped"]) == (1, 2, 0)
    rec = env.records()
    assert np.isnan(rec["start"][0]) and np.isnan(rec["finish"][0])
    assert np.isnan(rec["start"][2])  # demand above capacity: never starts either
    assert s["mean_slowdown"] == 1.0 and s["mean_completion_time"] == 2.0
    with pytest.raises(RuntimeError, match="over"):
        env.step(0)


def test_empty_jobset_and_idle_steps():
    env = QueueEnv()
    env.reset(JobSet(arrival=[], length=[], demand=[], steps=1))
    assert env.done
    s = env.summary()
    assert s["jobs"] == 0 and np.isnan(s["mean_slowdown"])
    # arrivals only at step 4: the episode runs through the empty steps
    s = env.run(SJF(), jobs([(4, 1, 1, 1)]))
    assert s["finished"] == 1 and s["steps"] == 5 and s["mean_slowdown"] == 1


def test_view_is_read_only_and_copy_is_a_snapshot():
    env = QueueEnv()
    v = env.reset(jobs([(0, 1, 1, 1), (0, 2, 2, 2)]))
    for a in (v.free, v.capacity, v.slot_valid, v.slot_length, v.slot_demand, v.slot_arrival):
        assert not a.flags.writeable
    with pytest.raises(ValueError):
        v.free[0, 0] = 0
    snap = env.view(copy=True)
    env.step(0)
    assert snap.slot_valid[0] and snap.free[0, 0] == 10
    assert not env.view().slot_valid[0] and env.view().free[0, 0] == 9


class Bad(Scheduler):
    name = "bad_sched"

    def __init__(self, action):
        super().__init__()
        self.action = action

    def choose(self, view):
        return self.action


@pytest.mark.parametrize("action", [11, -1, 1.5, True, "0", None])
def test_run_rejects_invalid_actions_naming_the_scheduler(action):
    with pytest.raises(PluginError, match="bad_sched"):
        QueueEnv().run(Bad(action), jobs([(0, 1, 1, 1)]))


def test_run_accepts_numpy_ints_and_reuses_the_last_jobset():
    env = QueueEnv()
    s1 = env.run(Bad(np.int64(10)), jobs([(2, 1, 1, 1)]))  # always void: job never runs
    assert s1["finished"] == 0 and s1["forced"] and s1["steps"] == 10_000
    s2 = env.run(SJF())
    assert s2["finished"] == 1


def test_penalties_are_configurable():
    env = small_env(penalty_running=0.0, penalty_slots=-2.0, penalty_backlog=-5.0, slots=1)
    env.reset(jobs([(0, 2, 1, 1), (0, 4, 1, 1), (0, 5, 1, 1)]))
    env.step(0)  # job 0 runs; job 1 in the slot; job 2 in the backlog
    assert env.step(1).reward == pytest.approx(-2 / 4 - 5 / 5)


# ---------------------------------------------------------------------- invariants
job_rows = st.lists(
    st.tuples(st.integers(0, 6), st.integers(1, 7), st.integers(0, 6), st.integers(0, 6)),
    min_size=0, max_size=12)


@settings(max_examples=60, deadline=None)
@given(rows=job_rows, seed=st.integers(0, 2**16), void_p=st.floats(0.0, 0.6),
       slots=st.integers(1, 4), backlog=st.integers(0, 3))
def test_invariants_under_random_actions(rows, seed, void_p, slots, backlog):
    rows = sorted(rows, key=lambda r: r[0])
    js = (jobs(rows, steps=7) if rows else JobSet(arrival=[], length=[], demand=[], steps=7))
    cap = np.array([5.0, 5.0])
    T = 6
    env = QueueEnv(QueueConfig(capacity=5, horizon=T, slots=slots, backlog=backlog,
                               max_steps=40))
    env.reset(js)
    rng = np.random.default_rng(seed)
    total = 0.0
    finished_at: dict[int, float] = {}
    while not env.done:
        v = env.view()
        a = slots if rng.random() < void_p else int(rng.integers(slots + 1))
        total += env.step(a).reward
        v = env.view()
        assert np.all(v.free >= -1e-9) and np.all(v.free <= cap + 1e-9)
        rec = env.records()
        # free = capacity − reservations of started jobs over the next T steps
        t = env.time
        expect = np.tile(cap, (T, 1))
        for j in np.flatnonzero(~np.isnan(rec["start"])):
            s, L = int(rec["start"][j]), int(rec["length"][j])
            lo, hi = max(s, t) - t, min(s + L, t + T) - t
            if hi > lo:
                expect[lo:hi] -= js.demand[j]
        np.testing.assert_allclose(v.free, expect)
        for j in np.flatnonzero(~np.isnan(rec["finish"])):  # finished once, never changed
            assert finished_at.setdefault(j, rec["finish"][j]) == rec["finish"][j]
            assert rec["finish"][j] <= t
        assert len(finished_at) == int((~np.isnan(rec["finish"])).sum())
    rec, s = env.records(), env.summary()
    fin = ~np.isnan(rec["finish"])
    np.testing.assert_array_equal((rec["finish"] - rec["start"])[fin], rec["length"][fin])
    started = ~np.isnan(rec["start"])
    assert np.all(rec["start"][started] >= rec["arrival"][started])
    assert not np.any(started & rec["dropped"])
    assert s["jobs"] == s["finished"] + s["dropped"] + s["unfinished"] == len(js)
    assert s["finished"] == int(fin.sum()) and s["dropped"] == int(rec["dropped"].sum())
    if not s["forced"]:
        assert s["unfinished"] == 0
    # return = −Σ time in system / length over every job that entered (DeepRM's reward)
    t_end = env.time
    entered = (rec["arrival"] <= t_end) & ~rec["dropped"]
    stay = np.where(fin, rec["finish"], t_end) - rec["arrival"]
    assert total == pytest.approx(-(stay[entered] / rec["length"][entered]).sum())


def test_config_validation_and_per_resource_capacity():
    with pytest.raises(ValueError, match="capacity"):
        QueueConfig(capacity=[10, 0])
    with pytest.raises(ValueError, match="horizon"):
        QueueConfig(horizon=0)
    cfg = QueueConfig(capacity=[10, 20])
    assert cfg.capacity == (10.0, 20.0) and hash(cfg) == hash(QueueConfig(capacity=(10, 20)))
    env = QueueEnv(cfg)
    v = env.reset(jobs([(0, 1, 5, 15)]))
    assert v.capacity.tolist() == [10, 20] and v.fits_now()[0]
    with pytest.raises(ValueError, match="3 resources"):
        env.reset(jobs([(0, 1, 1, 1, 1)], resources=("a", "b", "c")))
