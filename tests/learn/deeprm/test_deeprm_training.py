"""DeepRM's training (:mod:`dcsim.learn.deeprm`): the torch policy computes the numpy
scheduler's network, the REINFORCE trainer is seeded and writes its outputs, its checkpoint
runs in the ``deeprm`` scheduler, and ``dcsim train deeprm`` reads its config."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dcsim.queue import QueueConfig, QueueEnv, deeprm_jobset
from dcsim.schedulers.deeprm import DeepRMScheduler, load_checkpoint, policy_probs
from tests.helpers.deeprm import SPEC, random_weights


def test_numpy_and_torch_policies_agree():
    torch = pytest.importorskip("torch")
    from dcsim.learn.deeprm.network import Policy

    torch.manual_seed(0)
    pol = Policy(SPEC.size, 20, SPEC.actions, init_std=0.05)
    w = pol.numpy_weights()
    rng = np.random.default_rng(0)
    x = (rng.random((16, SPEC.size)) < 0.2).astype(np.float32)
    with torch.no_grad():
        p_torch = torch.softmax(pol(torch.from_numpy(x)), dim=1).numpy()
    p_np = policy_probs(w, x)
    assert np.allclose(p_np, p_torch, atol=1e-6)
    assert np.allclose(p_np.sum(axis=1), 1.0)
    # and loading numpy weights into torch gives the same network
    w2 = random_weights(1)
    pol.load_numpy(w2)
    with torch.no_grad():
        p_torch = torch.softmax(pol(torch.from_numpy(x)), dim=1).numpy()
    assert np.allclose(policy_probs(w2, x), p_torch, atol=1e-6)


TINY = dict(iterations=2, jobsets_per_iter=2, rollouts=3, steps=10, eval_every=1,
            eval_jobsets=3, max_steps=100, episode_max_length=200)


def test_trainer_smoke_writes_outputs_and_is_seeded(tmp_path):
    pytest.importorskip("torch")
    import pandas as pd

    from dcsim.learn.deeprm.train import TrainConfig, train

    cfg = TrainConfig(**TINY)
    r1 = train(cfg, tmp_path / "a", command="test", log=None)
    r2 = train(cfg, tmp_path / "b", command="test", log=None)
    prog = pd.read_parquet(tmp_path / "a" / "progress.parquet")
    assert prog["iteration"].tolist() == [1, 2]
    assert {"wall_s", "train_return", "train_slowdown", "eval_slowdown",
            "entropy"} <= set(prog.columns)
    assert prog["eval_slowdown"].notna().all()
    for name in ("checkpoint", "last"):
        a = load_checkpoint(tmp_path / "a" / f"{name}.npz")
        b = load_checkpoint(tmp_path / "b" / f"{name}.npz")
        for k in a.weights:
            assert np.array_equal(a.weights[k], b.weights[k])
    assert r1["best_eval_slowdown"] == r2["best_eval_slowdown"]
    meta = load_checkpoint(tmp_path / "a" / "last.npz").meta
    assert meta["training"]["iterations"] == 2 and meta["queue_config"]["slots"] == 10
    assert meta["jobs"]["steps"] == 10 and meta["training"]["command"] == "test"
    # a different seed gives different weights
    train(TrainConfig(**{**TINY, "seed": 1, "iterations": 1}), tmp_path / "c", log=None)
    c = load_checkpoint(tmp_path / "c" / "last.npz")
    assert not np.array_equal(c.weights["w1"], a.weights["w1"])


def test_trained_checkpoint_runs_in_the_scheduler(tmp_path):
    pytest.importorskip("torch")
    from dcsim.learn.deeprm.train import TrainConfig, train

    train(TrainConfig(**{**TINY, "iterations": 1}), tmp_path, log=None)
    s = DeepRMScheduler(DeepRMScheduler.Options(checkpoint=str(tmp_path / "checkpoint.npz")))
    r = QueueEnv(QueueConfig(max_steps=100)).run(
        s, deeprm_jobset(np.random.default_rng(0), steps=10))
    assert r["jobs"] == r["finished"] + r["dropped"] + r["unfinished"]


def test_cli_train_deeprm_tiny_config_and_bad_field(tmp_path):
    pytest.importorskip("torch")
    import yaml
    from click.testing import CliRunner

    from dcsim.cli import main

    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(yaml.safe_dump({**TINY, "iterations": 5}))
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["train", "deeprm", str(cfg), "--out", str(out),
                                    "--iterations", "1", "--seed", "3"])
    assert res.exit_code == 0, res.output
    assert (out / "progress.parquet").is_file() and (out / "checkpoint.json").is_file()
    meta = json.loads((out / "checkpoint.json").read_text())
    assert meta["training"]["iterations"] == 1 and meta["training"]["config"]["seed"] == 3
    assert "--iterations 1 --seed 3" in meta["training"]["command"]

    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**TINY, "rollouts": 0}))
    res = CliRunner().invoke(main, ["train", "deeprm", str(bad), "--out", str(out)])
    assert res.exit_code == 1
    assert "rollouts" in res.output and "bad.yaml" in res.output
    bad.write_text(yaml.safe_dump({**TINY, "learning_rate": 0.1}))
    res = CliRunner().invoke(main, ["train", "deeprm", str(bad), "--out", str(out)])
    assert res.exit_code == 1 and "learning_rate: unknown field" in res.output


def test_cli_train_without_torch_says_how_to_install(monkeypatch, tmp_path):
    from click.testing import CliRunner

    from dcsim import cli

    monkeypatch.setattr(cli, "_have_torch", lambda: False)
    res = CliRunner().invoke(cli.main, ["train", "deeprm", str(tmp_path / "x.yaml")])
    assert res.exit_code == 1
    assert 'pip install -e ".[learn]"' in res.output
    assert len(res.output.strip().splitlines()) == 1


def test_example_training_config_is_valid():
    pytest.importorskip("torch")
    from dcsim.learn.deeprm.train import load_train_config

    cfg = load_train_config(Path(__file__).parents[3] / "experiments" / "deeprm_train.yaml")
    assert cfg.image_spec() == SPEC and cfg.rollouts == 20 and cfg.discount == 1.0


