"""Training's environments stepped in worker processes (issue #36, item 4): the same weights
for the same seed whatever ``num_workers``, one clear error when a worker fails, and no
worker left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import yaml

pytest.importorskip("torch")
pytest.importorskip("gymnasium")

from dcsim.learn import resume as rs  # noqa: E402
from dcsim.learn.workers.lockstep import EnvWorkerError, LockstepEnvs  # noqa: E402
from tests.helpers.training import NARA, same, trained  # noqa: E402


def test_nara_gives_the_same_weights_at_one_and_two_workers(tmp_path):
    """3 environments, so the two workers hold unequal blocks (2 and 1)."""
    one = trained("nara", tmp_path / "1")
    two = trained("nara", tmp_path / "2", num_workers=2)
    assert same(one, two)
    meta = json.loads((tmp_path / "2" / "last.json").read_text())["training"]
    assert meta["config"]["num_workers"] == 2


@pytest.mark.slow  # workers start in fresh interpreters (a few seconds each run)
def test_vmr2l_and_a_resume_with_another_worker_count_give_the_same_weights(tmp_path):
    one = trained("vmr2l", tmp_path / "1")
    assert same(one, trained("vmr2l", tmp_path / "3", num_workers=3))
    # stopped with 2 workers, resumed in-process: the run that was never stopped
    assert trained("vmr2l", tmp_path / "s", num_workers=2, stop_after=1) is None
    assert same(one, trained("vmr2l", tmp_path / "s", resume=True))
    whole = trained("nara", tmp_path / "n1")
    assert trained("nara", tmp_path / "ns", stop_after=2) is None
    assert same(whole, trained("nara", tmp_path / "ns", num_workers=2, resume=True))


def _env():
    from dcsim.learn.vmr2l.env import VMR2LEnv, VMR2LEnvConfig

    return partial(VMR2LEnv, VMR2LEnvConfig(hosts=(6, 8), mnl=3))


def test_an_error_in_a_worker_is_one_message_and_every_worker_ends():
    """Envs 0-1 step in this process, env 2 in worker 1: its environment's exception is
    one EnvWorkerError naming the worker, its environments and the cause."""
    envs = LockstepEnvs(_env(), 3, np.random.default_rng(0), width=2, workers=2)
    procs = list(envs.envs.procs.values())
    assert len(procs) == 1 and procs[0].is_alive()
    envs.reset_all()
    with pytest.raises(EnvWorkerError, match=r"^environment worker 1 \(envs 2\) failed: "
                       r"TypeError: .*\(at .*vmr2l/env.py:\d+\)$"):
        envs.call("slot_mask", [0, 0, "not a token"])
    assert not any(p.is_alive() for p in procs)
    envs.close()  # closing again is harmless


def test_a_worker_that_dies_is_named_and_the_others_end():
    with LockstepEnvs(_env(), 3, np.random.default_rng(0), width=2, workers=3) as envs:
        procs = dict(envs.envs.procs)
        envs.reset_all()
        os.kill(procs[1].pid, signal.SIGKILL)
        procs[1].join(5)
        with pytest.raises(EnvWorkerError, match=r"environment worker 1 \(envs 1\) died"):
            envs.step([(0, 0), (0, 0), (0, 0)])
    assert not any(p.is_alive() for p in procs.values())  # every worker ended


def test_a_bad_environment_config_is_the_config_error_and_no_worker_is_left():
    import multiprocessing

    from dcsim.errors import ConfigError
    from dcsim.learn.nara.env import NaraEnv

    with pytest.raises(ConfigError, match=r"topology.preset"):
        LockstepEnvs(partial(NaraEnv, topology={"kind": "fabric", "preset": "nope"}), 2,
                     np.random.default_rng(0), workers=2)
    assert multiprocessing.active_children() == []


def test_the_trainer_goes_on_while_a_worker_starts(tmp_path):
    """Building the environments does not wait for the workers' (nor does an attachment):
    the worker here builds its environment only once a file exists, which this process
    writes after LockstepEnvs and attach returned."""
    import multiprocessing

    from tests.helpers.toy_env import waiting_in_a_worker

    go = tmp_path / "go"
    with LockstepEnvs(partial(waiting_in_a_worker, str(go)), 2, np.random.default_rng(0),
                      workers=2) as envs:
        envs.attach("parts", type)  # any picklable function of the environments
        assert envs.envs.owed == {1: ["building its environments", "attaching parts"]}
        go.touch()
        assert len(envs.reset_all()) == 2
        assert envs.envs.owed == {1: []}
    assert multiprocessing.active_children() == []


@pytest.mark.parametrize("fails", ["build", "attach"])
def test_a_worker_that_fails_to_start_is_named_at_the_next_request(fails):
    import multiprocessing

    from tests.helpers.toy_env import CountingEnv, broken_attachment, failing_in_a_worker

    make = failing_in_a_worker if fails == "build" else CountingEnv
    envs = LockstepEnvs(make, 2, np.random.default_rng(0), workers=2)
    envs.attach("groups", broken_attachment)
    doing = {"build": "building its environments", "attach": "attaching groups"}[fails]
    with pytest.raises(EnvWorkerError, match=rf"^environment worker 1 \(envs 1\) failed "
                       rf"{doing}: RuntimeError: "):
        envs.reset_all()
    assert multiprocessing.active_children() == []
    envs.close()


def _session_processes(sid: int) -> list[int]:
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            if int(fields[3]) == sid and fields[0] != "Z":
                pids.append(int(d.name))
    return pids


@pytest.mark.slow  # a dcsim train in a subprocess, with workers
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_ctrl_c_to_the_process_group_stops_with_workers_and_leaves_none(tmp_path):
    """Ctrl-C in a terminal reaches the trainer and its workers: the workers ignore it, the
    trainer stops at the end of the iteration (saved, one line, exit 130), and no process
    of the session is left."""
    cfg = tmp_path / "nara.yaml"
    cfg.write_text(yaml.safe_dump({**NARA, "iterations": 500, "num_envs": 4,
                                   "num_steps": 64, "minibatch_size": 64, "eval_every": 1,
                                   "num_workers": 2}))
    p = subprocess.Popen([sys.executable, "-m", "dcsim", "train", "nara", str(cfg), "--out",
                          str(tmp_path / "out")], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True,
                         env={**os.environ, "PYTHONUNBUFFERED": "1"}, cwd=tmp_path)
    try:
        line = p.stdout.readline()
        while line and not line.startswith("iter "):
            line = p.stdout.readline()
        assert line.startswith("iter "), p.stderr.read()
        os.killpg(p.pid, signal.SIGINT)
        out, err = p.communicate(timeout=60)
    finally:
        p.kill()
    assert p.returncode == 130, err
    assert "Traceback" not in out + err
    lines = [s for s in err.splitlines() if s.strip()]
    assert lines[-1].startswith("interrupted: stopped after iteration"), err
    end = time.monotonic() + 10
    while _session_processes(p.pid) and time.monotonic() < end:
        time.sleep(0.1)
    assert _session_processes(p.pid) == []
    assert rs.saved_iteration(tmp_path / "out") >= 1


def test_observations_cross_the_pipe_stacked_and_come_back_equal():
    from dcsim.learn.workers.process import pack, unpack

    rng = np.random.default_rng(0)
    same = [{"a": rng.random((3, 2)), "b": np.arange(4) + i} for i in range(3)]
    how, data = pack(same)
    assert how == "stacked" and data["a"].shape == (3, 3, 2)
    back = unpack((how, data))
    assert all(np.array_equal(x[k], y[k]) and x[k].dtype == y[k].dtype
               for x, y in zip(same, back, strict=True) for k in x)
    ragged = [{"a": np.zeros(2)}, {"a": np.zeros(3)}]
    assert pack(ragged) == ("list", ragged) and unpack(pack(ragged)) is ragged
    assert pack([1, 2]) == ("list", [1, 2])
