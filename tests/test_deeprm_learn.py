"""DeepRM's learned scheduler: image state, numpy/torch policies, checkpoints, the ``deeprm``
scheduler, the REINFORCE trainer and ``dcsim train deeprm``."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from dcsim import plugins
from dcsim.errors import ConfigError
from dcsim.queue import JobSet, QueueConfig, QueueEnv, deeprm_jobset
from dcsim.schedulers import QueueView
from dcsim.schedulers.deeprm import (
    SHIPPED_CHECKPOINT,
    ArrivalClock,
    DeepRMScheduler,
    ImageSpec,
    image_state,
    load_checkpoint,
    policy_probs,
    save_checkpoint,
)

SPEC = ImageSpec(horizon=20, capacity=(10, 10), slots=10)  # the authors' defaults


def hand_view(backlog: int = 7) -> QueueView:
    """T = 20, capacity (10, 10), M = 10. A running job uses (3, 2) for steps 0-1 and a
    second (1, 0) at step 0 only; slot 1 holds a job of length 2, demand (4, 1); slot 4 a
    job of length 25 (> T), demand (12, 0) (> max_job_size); ``backlog`` jobs wait."""
    free = np.full((20, 2), 10.0)
    free[0] -= (4, 2)
    free[1] -= (3, 2)
    valid = np.zeros(10, bool)
    valid[[1, 4]] = True
    length = np.zeros(10, np.int64)
    length[[1, 4]] = (2, 25)
    demand = np.zeros((10, 2))
    demand[1] = (4, 1)
    demand[4] = (12, 0)
    return QueueView(time=5, capacity=np.array([10.0, 10.0]), free=free, slot_valid=valid,
                     slot_length=length, slot_demand=demand,
                     slot_arrival=np.array([0, 3, 0, 0, 1, 0, 0, 0, 0, 0]), backlog=backlog)


# --------------------------------------------------------------------------- image state
def test_image_size_is_the_authors_20_by_224():
    assert SPEC.width == 224 and SPEC.size == 20 * 224 and SPEC.actions == 11
    x = image_state(hand_view())
    assert x.shape == (4480,) and x.dtype == np.float32
    spec = ImageSpec.for_queue(QueueConfig(), 2)
    assert spec == SPEC and spec.backlog_width == 3


def test_image_contents_on_a_hand_built_view():
    img = image_state(hand_view(backlog=7), since_arrival=4).reshape(20, 224)
    # resource 0 (cpu): machine block columns 0..9, slot k at 10 + 10k
    cpu = img[:, 0:10]
    assert cpu[0].tolist() == [1] * 4 + [0] * 6
    assert cpu[1].tolist() == [1] * 3 + [0] * 7
    assert cpu[2:].sum() == 0
    slot1 = img[:, 20:30]
    assert slot1[:2].tolist() == [[1] * 4 + [0] * 6] * 2 and slot1[2:].sum() == 0
    slot4 = img[:, 50:60]                  # length 25 > T, demand 12 > 10: clipped
    assert slot4.sum() == 20 * 10
    others = [img[:, 10 + 10 * k:20 + 10 * k].sum() for k in (0, 2, 3, 5, 6, 7, 8, 9)]
    assert others == [0] * 8
    # resource 1 (mem): machine at 110..119, slot k at 120 + 10k
    mem = img[:, 110:120]
    assert mem[0].tolist() == [1] * 2 + [0] * 8 and mem[1].tolist() == mem[0].tolist()
    assert img[:, 130:140][:2].tolist() == [[1] + [0] * 9] * 2
    assert img[:, 160:170].sum() == 0       # slot 4 needs no mem
    # backlog: 7 jobs, width 3, filled row by row
    backlog = img[:, 220:223]
    assert backlog[:3].tolist() == [[1, 1, 1], [1, 1, 1], [1, 0, 0]]
    assert backlog[3:].sum() == 0
    # time since the last new job, normalised by max_track = 10, in every row
    assert np.allclose(img[:, 223], 0.4)
    assert image_state(hand_view(), since_arrival=50).reshape(20, 224)[0, 223] == 1.0


def test_image_backlog_width_parameter_changes_the_size():
    x = image_state(hand_view(backlog=5), backlog_width=1).reshape(20, 222)
    assert x[:, 220].tolist() == [1] * 5 + [0] * 15


def test_arrival_clock_tracks_time_since_last_new_job():
    # arrivals at steps 0 and 3; nothing can start (demand above capacity)
    js = JobSet(arrival=[0, 3], length=[1, 1], demand=[[11, 0], [11, 0]], steps=6)
    env = QueueEnv(QueueConfig(max_steps=8))
    clock = ArrivalClock(max_track=2)
    seen = []
    env.reset(js)
    while not env.done:
        v = env.view()
        seen.append((v.time, clock.update(v)))
        env.step(v.void)
    assert seen == [(0, 0), (1, 1), (2, 2), (3, 0), (4, 1), (5, 2), (6, 2), (7, 2)]


def test_arrival_clock_sees_arrivals_into_the_backlog():
    # one slot: the second job (step 2) waits in the backlog
    js = JobSet(arrival=[0, 2], length=[1, 1], demand=[[11, 0], [11, 0]], steps=3)
    env = QueueEnv(QueueConfig(slots=1, max_steps=4))
    clock = ArrivalClock()
    out = []
    env.reset(js)
    while not env.done:
        v = env.view()
        out.append(clock.update(v))
        env.step(v.void)
    assert out == [0, 1, 0, 1]


# --------------------------------------------------------------------------- checkpoints
def random_weights(seed=0, spec=SPEC, hidden=20):
    rng = np.random.default_rng(seed)
    return {"w1": rng.normal(0, 0.05, (hidden, spec.size)).astype(np.float32),
            "b1": rng.normal(0, 0.05, hidden).astype(np.float32),
            "w2": rng.normal(0, 0.5, (spec.actions, hidden)).astype(np.float32),
            "b2": rng.normal(0, 0.1, spec.actions).astype(np.float32)}


def test_checkpoint_round_trip(tmp_path):
    w = random_weights()
    p = save_checkpoint(tmp_path / "p.npz", w, SPEC, {"note": "x"})
    ck = load_checkpoint(p)
    assert ck.spec == SPEC and ck.hidden == 20 and ck.meta["note"] == "x"
    for k in w:
        assert np.array_equal(ck.weights[k], w[k])
    meta = json.loads((tmp_path / "p.json").read_text())
    assert meta["architecture"] == {**meta["architecture"], "input": 4480, "hidden": 20,
                                    "actions": 11}
    assert not list(tmp_path.glob(".tmp-*"))  # atomic writes leave nothing behind


def test_bad_checkpoints_raise_config_error_naming_the_file(tmp_path):
    w = random_weights()
    p = save_checkpoint(tmp_path / "p.npz", w, SPEC)
    # wrong shape
    bad = dict(w, w1=w["w1"][:, :100])
    np.savez(tmp_path / "p.npz", **bad)
    with pytest.raises(ConfigError, match=r"p\.npz.*'w1' has shape"):
        load_checkpoint(p)
    # missing JSON
    save_checkpoint(p, w, SPEC)
    (tmp_path / "p.json").unlink()
    with pytest.raises(ConfigError, match=r"p\.json.*missing"):
        load_checkpoint(p)
    # JSON for another number of slots than the arrays
    save_checkpoint(p, w, SPEC)
    meta = json.loads((tmp_path / "p.json").read_text())
    meta["image"]["slots"] = 5
    (tmp_path / "p.json").write_text(json.dumps(meta))
    with pytest.raises(ConfigError, match=r"p\.json"):
        load_checkpoint(p)
    # missing array, not a checkpoint at all
    save_checkpoint(p, w, SPEC)
    np.savez(p, w1=w["w1"], b1=w["b1"], w2=w["w2"])
    with pytest.raises(ConfigError, match=r"p\.npz: the arrays do not match the architecture"):
        load_checkpoint(p)
    p.write_bytes(b"not a zip")
    with pytest.raises(ConfigError, match=r"p\.npz"):
        load_checkpoint(p)
    with pytest.raises(ConfigError, match=r"nope\.npz.*not found"):
        load_checkpoint(tmp_path / "nope.npz")


def test_object_arrays_are_refused_no_pickle(tmp_path):
    w = random_weights()
    p = save_checkpoint(tmp_path / "p.npz", w, SPEC)
    obj = np.empty(2, dtype=object)
    obj[:] = [{"evil": 1}, None]
    np.savez(p, **{**w, "w1": obj})  # savez pickles object arrays
    with zipfile.ZipFile(p) as z:
        assert "w1.npy" in z.namelist()
    with pytest.raises(ConfigError, match=r"p\.npz.*(pickle|Object arrays)"):
        load_checkpoint(p)


def test_scheduler_rejects_a_checkpoint_for_another_environment(tmp_path):
    spec = ImageSpec(horizon=20, capacity=(10, 10), slots=5)
    p = save_checkpoint(tmp_path / "five.npz", random_weights(spec=spec), spec)
    s = DeepRMScheduler(DeepRMScheduler.Options(checkpoint=str(p)))
    js = deeprm_jobset(np.random.default_rng(0), steps=10)
    with pytest.raises(ConfigError, match=r"five\.npz.*slots 10 != 5"):
        QueueEnv().run(s, js)
    assert QueueEnv(QueueConfig(slots=5)).run(s, js)["finished"] >= 0
    ck = load_checkpoint(p)
    ck.check_queue(QueueConfig(slots=5), 2)
    with pytest.raises(ConfigError, match=r"five\.npz.*horizon 30 != 20"):
        ck.check_queue(QueueConfig(slots=5, horizon=30), 2)


def test_relative_checkpoint_path_resolves_against_the_working_directory(tmp_path,
                                                                         monkeypatch):
    save_checkpoint(tmp_path / "rel.npz", random_weights(), SPEC)
    monkeypatch.chdir(tmp_path)
    s = DeepRMScheduler(DeepRMScheduler.Options(checkpoint="rel.npz"))
    assert s.checkpoint.path == tmp_path / "rel.npz"


# --------------------------------------------------------------------------- scheduler
def test_shipped_checkpoint_loads_and_matches_the_default_environment():
    ck = load_checkpoint(SHIPPED_CHECKPOINT)
    ck.check_queue(QueueConfig(), 2)
    t = ck.meta["training"]
    assert t["command"].startswith("dcsim train deeprm") and t["wall_time_s"] > 0
    assert ck.meta["dcsim_version"]


def test_deeprm_scheduler_registered_and_deterministic():
    plugins.reset()
    cls = plugins.get_scheduler_class("deeprm")
    assert cls is DeepRMScheduler
    rng = np.random.default_rng(7)
    sets = [deeprm_jobset(rng, new_job_rate=0.7) for _ in range(3)]
    env = QueueEnv()
    greedy = cls.Options(greedy=True)
    s = cls(greedy)
    first = [env.run(s, js) for js in sets]
    again = [env.run(cls(greedy), js) for js in sets]
    assert first == again  # greedy needs no generator
    sampled = [env.run(cls(rng=np.random.default_rng(5)), js) for js in sets]
    assert sampled == [env.run(cls(rng=np.random.default_rng(5)), js) for js in sets]
    assert all(r["finished"] + r["dropped"] + r["unfinished"] == r["jobs"] for r in first)
    env.reset(sets[0])
    s.reset()
    for _ in range(50):
        if env.done:
            break
        a = s.choose(env.view())
        assert isinstance(a, int) and 0 <= a <= 10
        env.step(a)


def test_deeprm_scheduler_sampling_uses_its_rng():
    js = deeprm_jobset(np.random.default_rng(3), new_job_rate=0.7)
    opts = DeepRMScheduler.Options(greedy=False)
    env = QueueEnv()
    a = env.run(DeepRMScheduler(opts, rng=np.random.default_rng(1)), js)
    b = env.run(DeepRMScheduler(opts, rng=np.random.default_rng(1)), js)
    assert a == b


def test_deeprm_scheduler_does_not_import_torch():
    code = (
        "import sys, numpy as np\n"
        "from dcsim.plugins import get_scheduler_class\n"
        "from dcsim.queue import QueueEnv, deeprm_jobset\n"
        "s = get_scheduler_class('deeprm')()\n"
        "r = QueueEnv().run(s, deeprm_jobset(np.random.default_rng(0)))\n"
        "assert r['finished'] > 0, r\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


# --------------------------------------------------------------------------- torch side
def test_numpy_and_torch_policies_agree():
    torch = pytest.importorskip("torch")
    from dcsim.learn.deeprm.train import Policy

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

    cfg = load_train_config(Path(__file__).parents[1] / "experiments" / "deeprm_train.yaml")
    assert cfg.image_spec() == SPEC and cfg.rollouts == 20 and cfg.discount == 1.0


def test_greedy_action_ignores_empty_slots():
    from dcsim.schedulers.deeprm import greedy_action, greedy_actions

    valid = np.array([True, False, True])
    assert greedy_action(np.array([0.2, 0.5, 0.1, 0.2]), valid) == 0   # empty slot 1 skipped
    assert greedy_action(np.array([0.1, 0.5, 0.1, 0.3]), valid) == 3   # void
    assert greedy_action(np.array([0.1, 0.9, 0.0, 0.0]), np.zeros(3, bool)) == 3
    scores = np.array([[0.2, 0.5, 0.1, 0.2], [0.3, 0.1, 0.3, 0.3]])
    assert greedy_actions(scores, np.array([valid, valid])).tolist() == [0, 0]
