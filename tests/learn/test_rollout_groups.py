"""The rollout computed in groups, each process running its own (``rollout_groups``, issue
#36 item 4): the same rollout as a lock-step loop drawing the same variates and seeds, the
same weights at any worker count, resumable, and refused where it cannot run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

pytest.importorskip("torch")
pytest.importorskip("gymnasium")

from dcsim.errors import ConfigError  # noqa: E402
from dcsim.learn.workers.groups import Groups, sample  # noqa: E402
from dcsim.learn.workers.lockstep import LockstepEnvs  # noqa: E402
from tests.helpers.toy_env import CountingEnv  # noqa: E402
from tests.helpers.training import same, trained  # noqa: E402


# ------------------------------------------------------------------------------ sampling
@settings(max_examples=200, deadline=None)
@given(hnp.arrays(np.float64, (4, 6), elements=st.floats(-20, 20)),
       hnp.arrays(np.float64, 4, elements=st.floats(0, 1, exclude_max=True)))
def test_sample_is_the_inverse_cdf_at_each_variate(logp, u):
    a = sample(logp, u)
    p = np.exp(logp - logp.max(axis=1, keepdims=True))
    c = np.cumsum(p, axis=1)
    for i in range(len(a)):
        below = c[i, a[i] - 1] if a[i] > 0 else 0.0
        assert below < u[i] * c[i, -1] or a[i] == 0  # the first entry reaching u
        assert a[i] == len(c[i]) - 1 or c[i, a[i]] >= u[i] * c[i, -1]


# ------------------------------------------------------------------------------ machinery
class RowPolicy:
    """Log-probabilities that are a function of each observation alone (a row's result
    does not depend on the batch), so that groups and one batch agree exactly."""

    def __init__(self):
        self.w = np.zeros(1)

    def load(self, weights):
        self.w = weights["w"]

    def logp(self, obs):
        z = np.stack([o["x"] for o in obs]) * self.w[None, :]
        return (z - np.log(np.exp(z).sum(axis=1, keepdims=True))).astype(np.float32)

    def values(self, obs):
        return np.stack([o["x"] for o in obs]).sum(axis=1).astype(np.float32)


def _lockstep_reference(n, weights, u, seeds):
    """The same rollout by hand, one lock-step at a time in this process."""
    envs = [CountingEnv() for _ in range(n)]
    obs = [e.reset(seed=i)[0] for i, e in enumerate(envs)]
    pol = RowPolicy()
    pol.load(weights)
    rows, acts, rewards, dones, ended = [], [], [], [], []
    for t in range(len(u)):
        rows.extend(obs)
        lp = pol.logp(obs)
        a = sample(lp.astype(np.float64), u[t])
        acts.append(a)
        r_t, d_t = [], []
        for i, e in enumerate(envs):
            o, r, done, _, info = e.step(int(a[i]))
            if done:
                ended.append((t, i, info))
                o = e.reset(seed=int(seeds[t, i]))[0]
            obs[i] = o
            r_t.append(r)
            d_t.append(done)
        rewards.append(r_t)
        dones.append(d_t)
    return rows, np.array(acts), np.array(rewards), np.array(dones), ended, obs


@pytest.mark.parametrize(("n", "groups", "workers"), [(5, 2, 1), (5, 5, 1), (5, 2, 2),
                                                      (6, 3, 2)])
def test_groups_give_the_lockstep_rollout_for_the_same_draws(n, groups, workers):
    rng = np.random.default_rng(7)
    weights = {"w": rng.normal(size=CountingEnv.ACTIONS)}
    T = 9
    u = rng.random((T, n))
    seeds = rng.integers(1000, size=(T, n))
    with LockstepEnvs(CountingEnv, n, np.random.default_rng(0), workers=workers,
                      groups=groups) as envs:
        obs = envs.envs.reset([(i, i) for i in range(n)])
        for i in range(n):
            envs.episodes.reset(i, i)
        assert envs.processes == min(workers, groups)
        rolled = Groups(envs, RowPolicy).run(weights, obs, u, seeds)
        rows, acts, rewards, dones, ended, last = _lockstep_reference(n, weights, u, seeds)
        assert np.array_equal(rolled.flat["x"], np.stack([o["x"] for o in rows]))
        assert np.array_equal(rolled.actions, acts)
        assert np.array_equal(rolled.values.reshape(-1), RowPolicy().values(rows))
        assert np.array_equal(rolled.next_values, RowPolicy().values(last))
        assert np.array_equal(np.stack([s.rewards for s in rolled.steps]), rewards)
        assert np.array_equal(np.stack([s.dones for s in rolled.steps]), dones)
        got_ended = [(t, i, info) for t, s in enumerate(rolled.steps) for i, info, _ in s.ended]
        assert got_ended == ended
        assert all(np.array_equal(a["x"], b["x"]) for a, b in zip(rolled.steps[-1].obs, last,
                                                                  strict=True))
        # the episode log holds each episode's seed and the actions since, as stepping does
        for i in range(n):
            t_end = max([t for t, j, _ in ended if j == i], default=-1)
            assert envs.episodes.seeds[i] == (seeds[t_end, i] if t_end >= 0 else i)
            assert list(envs.episodes.actions[i]) == [int(a) for a in acts[t_end + 1:, i]]


# ------------------------------------------------------------------------------ training
def test_nara_rollout_groups_give_the_same_weights_at_one_and_two_workers(tmp_path):
    one = trained("nara", tmp_path / "1", rollout_groups=3)
    two = trained("nara", tmp_path / "2", rollout_groups=3, num_workers=2, update_shards=1)
    assert same(one, two)
    assert not same(one, trained("nara", tmp_path / "g1"))  # a training setting


@pytest.mark.slow  # workers start in fresh interpreters (a few seconds each run)
def test_rollout_groups_resume_with_another_worker_count(tmp_path):
    whole = trained("nara", tmp_path / "w", rollout_groups=2, num_workers=2,
                     update_shards=2)
    assert trained("nara", tmp_path / "s", rollout_groups=2, num_workers=2,
                    update_shards=2, stop_after=2) is None
    assert same(whole, trained("nara", tmp_path / "s", rollout_groups=2, update_shards=2,
                                 resume=True))


def test_more_groups_than_environments_is_refused():
    from dcsim.learn.nara.train import TrainConfig

    with pytest.raises(ValueError, match="rollout_groups: 4 groups of num_envs: 3"):
        TrainConfig(num_envs=3, rollout_groups=4)


def test_rollout_groups_run_on_the_cpu():
    """The groups' forward passes run in the workers, which have no GPU: ``device: auto``
    picks the CPU (the checkpoint records it), an explicit ``cuda`` is refused."""
    from dcsim.learn.nara.train import TrainConfig, load_train_config

    assert TrainConfig(rollout_groups=2).device == "cpu"
    assert TrainConfig(rollout_groups=1).device == "auto"
    with pytest.raises(ValueError, match="rollout_groups: 2 runs .* set device: cpu"):
        TrainConfig(rollout_groups=2, device="cuda")
    root = Path(__file__).resolve().parents[2]
    with pytest.raises(ConfigError, match="rollout_groups"):
        load_train_config(root / "experiments" / "nara_train.yaml", rollout_groups=2,
                          device="cuda")


def test_the_runner_refuses_unknown_requests():
    from dcsim.learn.workers.groups import Runner
    from dcsim.learn.workers.process import Local

    runner = Runner([[0]], RowPolicy)(Local([CountingEnv()]))
    with pytest.raises(ValueError, match="unknown request 'step'"):
        runner.handle("step", ())
