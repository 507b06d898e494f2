"""`dcsim train` lines say how far the training is (#48): the iteration of all, the steps
per second and an ETA from this invocation's own pace; between evaluations a line comes
when a while passed without one."""

from __future__ import annotations

import re

import pytest

from dcsim.learn import progress
from dcsim.learn.progress import Pace

HEAD = re.compile(r"^iter +(\d+)/(\d+) +[\d.]+s +steps +(\d+) \((\d+|--)/s\) +ETA (.+?)(  |$)")


def test_the_eta_and_the_rate_come_from_this_invocations_iterations():
    p = Pace(iterations=10)
    p.begin(0, 0.0, 0)
    assert p.head(0, 0.0, 0) == "iter    0/10      0.0s  steps        0 (--/s)  ETA --"
    assert p.eta(2, 20.0) == 80.0 and p.rate(20.0, 5000) == 250.0
    assert p.head(2, 20.0, 5000) == "iter    2/10     20.0s  steps     5000 (250/s)  ETA 1 min 20 s"
    assert p.eta(10, 100.0) == 0.0
    resumed = Pace(iterations=10)
    resumed.begin(6, 300.0, 6000)  # saved after iteration 6, 300 s and 6,000 steps in
    assert resumed.eta(6, 300.0) is None
    assert resumed.eta(7, 310.0) == 30.0 and resumed.rate(310.0, 7000) == 100.0
    capped = Pace(iterations=100, max_wall_s=60.0)  # max_wall_s ends it first
    capped.begin(0, 0.0, 0)
    assert capped.eta(1, 10.0) == 50.0 and capped.eta(1, 70.0) == 0.0


def test_a_line_between_evaluations_is_due_after_every_seconds():
    p = Pace(iterations=10, every=10.0)
    p.begin(0, 0.0, 0)
    assert not p.due(9.9) and p.due(10.0)
    p.head(3, 12.0, 0)  # a line said at 12 s
    assert not p.due(21.0) and p.due(22.0)
    assert not Pace(iterations=10, every=0).due(1e9)


def test_dcsim_train_deeprm_lines_carry_iteration_rate_and_eta(tmp_path):
    pytest.importorskip("torch")
    from dcsim.learn.deeprm.train import TrainConfig, train

    lines: list[str] = []
    cfg = TrainConfig(iterations=3, jobsets_per_iter=2, rollouts=3, steps=10, eval_every=1,
                      eval_jobsets=3, max_steps=100, episode_max_length=200)
    train(cfg, tmp_path / "a", command="test", log=lines.append)
    heads = [HEAD.match(s) for s in lines if s.startswith("iter ")]
    assert len(heads) == 3 and all(heads), lines
    assert [(m.group(1), m.group(2)) for m in heads] == [("1", "3"), ("2", "3"), ("3", "3")]
    assert all(m.group(4) != "--" and int(m.group(3)) > 0 for m in heads), lines
    steps = [int(m.group(3)) for m in heads]
    assert steps == sorted(steps) and steps[0] < steps[-1]  # decisions so far
    assert heads[0].group(5) != "--" and heads[-1].group(5) == "0.0 s"


def test_dcsim_train_nara_says_how_far_it_is_between_evaluations(tmp_path, monkeypatch):
    """eval_every 3 of 4 iterations: the evaluated iterations (3 and the last) print their
    full line; with the interval at 0 s every other iteration prints the head alone."""
    pytest.importorskip("torch")
    pytest.importorskip("gymnasium")
    from dcsim.learn.nara import train as nara_train

    monkeypatch.setattr(progress, "EVERY", 1e-9)
    lines: list[str] = []
    cfg = nara_train.TrainConfig(iterations=4, num_envs=2, num_steps=16, minibatch_size=16,
                          update_epochs=1, eval_every=3, eval_episodes=1, eval_requests=8,
                          episode_requests=5)
    nara_train.train(cfg, tmp_path / "n", command="test", log=lines.append)
    heads = [(HEAD.match(s), s) for s in lines if s.startswith("iter ")]
    assert all(m for m, _ in heads), lines
    its = [int(m.group(1)) for m, _ in heads]
    assert its == [1, 2, 3, 4], lines
    full = [it for (m, s), it in zip(heads, its, strict=True) if "eval acc" in s]
    assert full == [3, 4]
    assert all(int(m.group(3)) == 32 * it for (m, _), it in zip(heads, its, strict=True))

