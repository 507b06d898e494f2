"""Training stops on Ctrl-C at the end of an iteration, resumably, and ``--resume`` continues
it to the same weights as a run that was never stopped (issue #34, item 5)."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

pytest.importorskip("torch")
pytest.importorskip("gymnasium")

from dcsim.cli import main  # noqa: E402
from dcsim.errors import ConfigError  # noqa: E402
from dcsim.learn import resume as rs  # noqa: E402

# stop after iteration 2 of 4; eval_every 3, so the stop falls between two evaluations
# and the resumed run evaluates (and may pick its best checkpoint) after resuming
NARA = {"iterations": 4, "num_envs": 2, "num_steps": 16, "minibatch_size": 16,
        "update_epochs": 1, "eval_every": 3, "eval_episodes": 1, "eval_requests": 8,
        "episode_requests": 5}
DEEPRM = {"iterations": 4, "jobsets_per_iter": 2, "rollouts": 3, "steps": 10,
          "eval_every": 3, "eval_jobsets": 3, "max_steps": 100, "episode_max_length": 200}
# dropout on: the update draws from torch's generator, which must be restored too
VMR2L = {"iterations": 4, "hosts": [6, 8], "mnl": 3, "num_envs": 2, "num_steps": 5,
         "minibatch_size": 5, "update_epochs": 2, "eval_every": 3, "eval_mappings": 2,
         "eval_hosts": 8, "attention": "sparse", "dropout": 0.1, "warmstart": "alpha_vbpp",
         "warmstart_mappings": 2, "warmstart_epochs": 1}


def _trainer(kind: str):
    if kind == "nara":
        from dcsim.allocators.multi.learned import load_checkpoint
        from dcsim.learn.nara import train as mod
        return mod, NARA, load_checkpoint
    if kind == "deeprm":
        from dcsim.learn.deeprm import train as mod
        from dcsim.schedulers.deeprm import load_checkpoint
        return mod, DEEPRM, load_checkpoint
    from dcsim.learn.vmr2l import train as mod
    from dcsim.reschedulers.vmr2l import load_checkpoint
    return mod, VMR2L, load_checkpoint


def _same_weights(load, a: Path, b: Path) -> bool:
    wa, wb = load(a).weights, load(b).weights
    return wa.keys() == wb.keys() and all(np.array_equal(wa[k], wb[k]) for k in wa)


def _progress(path: Path):
    import pandas as pd

    return pd.read_parquet(path).drop(columns=["wall_s", "steps_per_s"], errors="ignore")


@pytest.mark.parametrize("kind", ["nara", "deeprm", "vmr2l"])
def test_stopped_then_resumed_gives_the_weights_of_an_uninterrupted_run(kind, tmp_path):
    mod, tiny, load = _trainer(kind)
    cfg = mod.TrainConfig(**tiny)
    whole = mod.train(cfg, tmp_path / "whole", log=None)
    with pytest.raises(rs.TrainingInterrupted) as stopped:
        mod.train(cfg, tmp_path / "split", log=None, stop_after=2)
    assert (stopped.value.iteration, stopped.value.iterations) == (2, 4)
    split = tmp_path / "split"
    last = json.loads((split / "last.json").read_text())["training"]
    assert last["iteration"] == 2  # last.npz is the stopped iteration's, not evaluated
    assert (split / "resume.npz").is_file()
    with np.load(split / "resume.npz", allow_pickle=False) as z:  # no pickle anywhere
        assert all(z[k].dtype.kind in "biuf" for k in z.files)
    lines: list[str] = []
    resumed = mod.train(cfg, split, log=lines.append, resume=True)
    assert any("resuming after iteration 2 of 4" in s for s in lines)
    assert resumed["iterations"] == whole["iterations"] == 4
    assert resumed["best_iteration"] == whole["best_iteration"]
    assert _same_weights(load, whole["last"], resumed["last"])  # bit for bit
    assert _same_weights(load, whole["best"], resumed["best"])
    assert _progress(tmp_path / "whole" / "progress.parquet").equals(
        _progress(split / "progress.parquet"))
    # the recorded command is the one the weights come from
    assert json.loads((split / "last.json").read_text())["training"]["iteration"] == 4


def test_a_killed_run_resumes_from_its_last_evaluation(tmp_path, monkeypatch):
    """Killed outright (no chance to save) in iteration 3: resume.npz is the one written
    with last.npz at iteration 2's evaluation, and resuming redoes iteration 3."""
    mod, tiny, load = _trainer("deeprm")
    cfg = mod.TrainConfig(**{**tiny, "eval_every": 2})
    whole = mod.train(cfg, tmp_path / "whole", log=None)

    def killed(self, iteration):
        if iteration == 3:
            raise SystemExit("killed")
        return False

    monkeypatch.setattr(rs.StopRequest, "__call__", killed)
    with pytest.raises(SystemExit):
        mod.train(cfg, tmp_path / "k", log=None)
    monkeypatch.undo()
    assert rs.saved_iteration(tmp_path / "k") == 2
    resumed = mod.train(cfg, tmp_path / "k", log=None, resume=True)
    assert _same_weights(load, whole["last"], resumed["last"])


def test_resume_is_refused_naming_the_reason(tmp_path):
    mod, tiny, _ = _trainer("deeprm")
    cfg = mod.TrainConfig(**tiny)
    with pytest.raises(ConfigError, match=r"nothing to resume \(no such folder"):
        mod.train(cfg, tmp_path / "none", log=None, resume=True)
    assert not (tmp_path / "none").exists()
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=r"nothing to resume \(no resume\.npz"):
        mod.train(cfg, tmp_path / "empty", log=None, resume=True)
    with pytest.raises(rs.TrainingInterrupted):
        mod.train(cfg, tmp_path / "run", log=None, stop_after=1)
    changed = mod.TrainConfig(**{**tiny, "lr": 0.002, "rollouts": 4})
    with pytest.raises(ConfigError, match=r"config differs .*: rollouts: 4 \(recorded: 3\); "
                                          r"lr: 0\.002 \(recorded: 0\.001\)"):
        mod.train(changed, tmp_path / "run", log=None, resume=True)
    with pytest.raises(ConfigError, match=r"config differs .*iterations: 5 \(recorded: 4\)"):
        mod.train(mod.TrainConfig(**{**tiny, "iterations": 5}), tmp_path / "run", log=None,
                  resume=True)
    nara, nara_tiny, _ = _trainer("nara")
    with pytest.raises(ConfigError, match=r"the state of a `dcsim train deeprm` run"):
        nara.train(nara.TrainConfig(**nara_tiny), tmp_path / "run", log=None, resume=True)
    mod.train(cfg, tmp_path / "run", log=None, resume=True)  # the recorded config: fine
    with pytest.raises(ConfigError, match="nothing to resume: the training ran all its 4"):
        mod.train(cfg, tmp_path / "run", log=None, resume=True)


def test_a_run_stopped_by_max_wall_s_continues_with_a_larger_budget(tmp_path):
    mod, tiny, load = _trainer("deeprm")
    whole = mod.train(mod.TrainConfig(**tiny), tmp_path / "whole", log=None)
    short = mod.TrainConfig(**{**tiny, "max_wall_s": 1e-6})
    r = mod.train(short, tmp_path / "w", log=None)
    assert r["iterations"] == 1
    with pytest.raises(ConfigError, match="when its max_wall_s .* ran out; raise it"):
        mod.train(short, tmp_path / "w", log=None, resume=True)
    resumed = mod.train(mod.TrainConfig(**tiny), tmp_path / "w", log=None, resume=True)
    assert resumed["iterations"] == 4
    assert _same_weights(load, whole["last"], resumed["last"])


def test_cli_stop_and_resume(tmp_path, monkeypatch):
    """`dcsim train` stopped (as by Ctrl-C): exit 130, one line naming the command that
    continues; `--resume` finishes to the uninterrupted run's weights; a changed config is
    one error line naming the field."""
    _, tiny, load = _trainer("deeprm")
    cfg = tmp_path / "t.yaml"
    cfg.write_text(yaml.safe_dump(tiny))
    r = CliRunner().invoke(main, ["train", "deeprm", str(cfg), "--out", str(tmp_path / "a")])
    assert r.exit_code == 0, r.output
    out = tmp_path / "b"
    original = rs.StopRequest.__init__
    monkeypatch.setattr(rs.StopRequest, "__init__",
                        lambda self, stop_after=None: original(self, 2))
    r = CliRunner().invoke(main, ["train", "deeprm", str(cfg), "--out", str(out)])
    monkeypatch.undo()
    assert r.exit_code == 130, r.output
    assert (f"interrupted: stopped after iteration 2 of 4; last.npz and the state to resume "
            f"from are in {out}; `dcsim train deeprm {cfg} --out {out} --resume` continues"
            in r.output)
    r = CliRunner().invoke(main, ["train", "deeprm", str(cfg), "--out", str(out), "--seed",
                                  "3", "--resume"])
    assert r.exit_code == 1
    assert r.output.strip().splitlines()[-1] == (
        f"error: {out}: cannot resume: the config differs from the one the training ran "
        "with: seed: 3 (recorded: 0)")
    r = CliRunner().invoke(main, ["train", "deeprm", str(cfg), "--out", str(out), "--resume"])
    assert r.exit_code == 0, r.output
    assert "resuming after iteration 2 of 4" in r.output
    assert _same_weights(load, tmp_path / "a" / "last.npz", out / "last.npz")
    meta = json.loads((out / "last.json").read_text())["training"]
    assert meta["command"] == f"dcsim train deeprm {cfg} --out {out}"


def test_an_exception_inside_the_nara_simulation_is_raised_not_an_episode_end(monkeypatch):
    """The cause of the lost Ctrl-C: SimPy turns an exception raised inside the arrival
    process (a KeyboardInterrupt) into a failed process, and the environment's stepping
    loop took that for the end of the episode."""
    import dcsim.learn.nara.env as ne

    env = ne.NaraEnv(requests=6)
    env.reset(seed=0)
    real = ne.allocate_multi_steps

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(ne, "allocate_multi_steps", interrupted)
    with pytest.raises(KeyboardInterrupt):
        for _ in range(50):  # the next request's allocation starts within a few steps
            env.step(int(np.flatnonzero(env.action_masks())[0]))
    monkeypatch.setattr(ne, "allocate_multi_steps", real)


# --------------------------------------------------------------------------- real signals
class _Train:
    """``dcsim train nara`` in a subprocess, its output lines collected as they come."""

    def __init__(self, tmp_path: Path, *extra: str):
        cfg = tmp_path / "nara.yaml"
        if not cfg.exists():  # iterations of ~0.1-0.3 s, each logged (eval_every 1)
            cfg.write_text(yaml.safe_dump({**NARA, "iterations": 500, "num_steps": 64,
                                           "minibatch_size": 64, "eval_every": 1}))
        self.p = subprocess.Popen(
            [sys.executable, "-m", "dcsim", "train", "nara", str(cfg), "--out",
             str(tmp_path / "out"), *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"}, cwd=tmp_path)
        self.lines: dict[str, list[str]] = {"stdout": [], "stderr": []}
        self.queues: dict[str, queue.Queue] = {"stdout": queue.Queue(),
                                               "stderr": queue.Queue()}
        for name in self.lines:
            threading.Thread(target=self._read, args=(name,), daemon=True).start()

    def _read(self, name: str) -> None:
        for line in getattr(self.p, name):
            self.lines[name].append(line)
            self.queues[name].put(line)
        self.queues[name].put(None)

    def wait_for(self, prefix: str, stream: str = "stdout", timeout: float = 60.0) -> str:
        end = time.monotonic() + timeout
        while True:
            line = self.queues[stream].get(timeout=max(end - time.monotonic(), 0.01))
            if line is None:
                raise AssertionError(f"{stream} ended before a line starting {prefix!r}: "
                                     f"{''.join(self.lines['stderr'])}")
            if line.startswith(prefix):
                return line

    def finish(self, timeout: float = 30.0) -> tuple[int, str, str]:
        try:
            rc = self.p.wait(timeout=timeout)
        finally:
            self.p.kill()
        time.sleep(0.1)  # the readers see the end of the pipes
        return rc, "".join(self.lines["stdout"]), "".join(self.lines["stderr"])


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_stops_dcsim_train_nara_after_the_iteration(tmp_path):
    """The bug: SIGINTs were lost during `dcsim train nara`. One now stops it at the end
    of the iteration under way: exit 130 within seconds, last.npz and the resume state
    written, one line, no traceback."""
    run = _Train(tmp_path)
    assert run.wait_for("iter ").startswith("iter    1")
    t = time.monotonic()
    run.p.send_signal(signal.SIGINT)
    rc, out, err = run.finish()
    assert rc == 130, err
    assert time.monotonic() - t < 15
    assert "Traceback" not in err + out
    last = [s for s in err.splitlines() if s.strip()][-1]
    folder = tmp_path / "out"
    k = json.loads((folder / "last.json").read_text())["training"]["iteration"]
    assert last == (f"interrupted: stopped after iteration {k} of 500; last.npz and the "
                    f"state to resume from are in {folder}; `dcsim train nara "
                    f"{tmp_path / 'nara.yaml'} --out {folder} --resume` continues")
    assert (folder / "last.npz").is_file() and k >= 1 and rs.saved_iteration(folder) == k


@pytest.mark.slow  # a second torch start-up in a child process
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_second_ctrl_c_stops_dcsim_train_nara_at_once(tmp_path):
    run = _Train(tmp_path)
    assert run.wait_for("iter ").startswith("iter    1")
    assert run.wait_for("iter ").startswith("iter    2")  # iteration 1's state is saved
    run.p.send_signal(signal.SIGINT)
    assert run.wait_for("interrupted:", "stderr").startswith("interrupted: stopping")
    run.p.send_signal(signal.SIGINT)
    rc, out, err = run.finish()
    assert rc == 130, err
    assert "Traceback" not in err + out
    last = [s for s in err.splitlines() if s.strip()][-1]
    assert last.startswith(f"interrupted: stopped at once; {tmp_path / 'out'} keeps the "
                           "state of iteration ")
    assert last.endswith("--resume` continues from there")
    assert rs.saved_iteration(tmp_path / "out") >= 1
