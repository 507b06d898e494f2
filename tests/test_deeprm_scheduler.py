"""DeepRM's learned scheduler: image state, checkpoints and the ``deeprm`` scheduler (numpy;
its training: ``tests/learn/deeprm/test_deeprm_training.py``)."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile

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
    save_checkpoint,
)
from tests.helpers.deeprm import SPEC, random_weights


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
    s.setup(env.view())
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


def test_greedy_action_ignores_empty_slots():
    from dcsim.schedulers.deeprm import greedy_action, greedy_actions

    valid = np.array([True, False, True])
    assert greedy_action(np.array([0.2, 0.5, 0.1, 0.2]), valid) == 0   # empty slot 1 skipped
    assert greedy_action(np.array([0.1, 0.5, 0.1, 0.3]), valid) == 3   # void
    assert greedy_action(np.array([0.1, 0.9, 0.0, 0.0]), np.zeros(3, bool)) == 3
    scores = np.array([[0.2, 0.5, 0.1, 0.2], [0.3, 0.1, 0.3, 0.3]])
    assert greedy_actions(scores, np.array([valid, valid])).tolist() == [0, 0]
