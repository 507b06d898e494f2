"""The trainer base (:mod:`dcsim.learn.trainer`): the training record (the best and the
last checkpoint), and reproducibility (``deterministic``) set, recorded and restored."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("gymnasium")

from dcsim.errors import ConfigError  # noqa: E402
from dcsim.learn import trainer  # noqa: E402


@pytest.mark.parametrize("higher", [True, False])
def test_training_record_keeps_the_best_and_the_last(tmp_path, higher):
    written: dict[str, tuple] = {}

    def write(path, weights, meta):
        written[path.name] = (weights["w"].item(), meta)

    def meta(**kw):
        return kw

    rec = trainer.TrainingRecord(tmp_path, higher_is_better=higher, write=write, meta=meta)
    good, bad = (0.9, 0.5) if higher else (0.1, 0.5)
    rec.evaluated(1, {"w": np.array(1.0)}, bad, {}, wall=1.0, env_steps=10)
    rec.evaluated(2, {"w": np.array(2.0)}, good, {"x": 1}, wall=2.0, env_steps=20)
    rec.evaluated(3, {"w": np.array(3.0)}, bad, {}, wall=3.0, env_steps=30)
    assert written["checkpoint.npz"][0] == 2.0 and written["last.npz"][0] == 3.0
    assert written["last.npz"][1]["best_iteration"] == 2
    assert rec.state_doc() == {"value": good, "iteration": 2, "x": 1}
    rec.unevaluated(4, {"w": np.array(4.0)}, wall=4.0, env_steps=40)
    assert written["last.npz"][1]["value"] is None and written["last.npz"][0] == 4.0
    rec.finish(4, wall=5.0, env_steps=40)
    assert written["checkpoint.npz"][1]["iterations"] == 4
    assert written["checkpoint.npz"][1]["iteration"] == 2


@pytest.fixture
def restore_torch_determinism(monkeypatch):
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    was = torch.are_deterministic_algorithms_enabled()
    yield
    torch.use_deterministic_algorithms(was)


def test_deterministic_on_cuda_sets_torch_and_cublas(restore_torch_determinism, monkeypatch):
    """What ``deterministic: true`` sets for a CUDA device (the settings need no GPU to be
    made; on the CPU nothing changes)."""
    import os

    torch.use_deterministic_algorithms(False)
    doc = trainer.make_deterministic(True, torch.device("cpu"))
    assert doc == {"deterministic": True, "device": "cpu",
                   "torch_deterministic_algorithms": False}
    assert "CUBLAS_WORKSPACE_CONFIG" not in os.environ
    assert trainer.make_deterministic(False, torch.device("cuda"))[
        "torch_deterministic_algorithms"] is False
    doc = trainer.make_deterministic(True, torch.device("cuda"))
    assert torch.are_deterministic_algorithms_enabled()
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    assert doc == {"deterministic": True, "device": "cuda",
                   "torch_deterministic_algorithms": True,
                   "cublas_workspace_config": ":4096:8"}
    # CUDA initialised before the setting could reach cuBLAS: said, not silently ignored
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG")
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    with pytest.warns(RuntimeWarning, match="CUBLAS_WORKSPACE_CONFIG=:4096:8"):
        trainer.make_deterministic(True, torch.device("cuda"))


def test_an_op_without_a_deterministic_variant_is_one_clear_error(tmp_path,
                                                                  restore_torch_determinism):
    from dcsim.learn.nara.config import TrainConfig

    class Raising(trainer.Trainer):
        kind = "nara"

        def __init__(self, cfg, error):
            super().__init__(cfg)
            self.error = error

        def setup(self):
            raise self.error

    deterministic = RuntimeError("index_add_cuda_ does not have a deterministic "
                                 "implementation, but you set "
                                 "'torch.use_deterministic_algorithms(True)'.\nmore")
    with pytest.raises(ConfigError, match=r"deterministic: torch cannot run this training "
                       r"deterministically on cpu: index_add_cuda_ .*set deterministic: "
                       r"false"):
        Raising(TrainConfig(device="cpu"), deterministic).run(tmp_path, log=None)
    with pytest.raises(RuntimeError, match="something else"):
        Raising(TrainConfig(device="cpu"), RuntimeError("something else")).run(tmp_path,
                                                                               log=None)


def test_the_setting_is_applied_recorded_and_same_seed_gives_same_weights(
        tmp_path, restore_torch_determinism, monkeypatch):
    """``deterministic`` reaches make_deterministic with the training's device, is in the
    checkpoint JSON (config and what was set) and torch's mode is restored after; on the
    CPU the same seed gives the same weights, with the setting on or off."""
    from dcsim.allocators.multi.learned import load_checkpoint
    from dcsim.learn.nara.train import TrainConfig, train

    tiny = {"iterations": 2, "num_envs": 2, "num_steps": 8, "minibatch_size": 8,
            "update_epochs": 1, "eval_every": 2, "eval_episodes": 1, "eval_requests": 6,
            "episode_requests": 5, "device": "cpu"}
    seen = []
    real = trainer.make_deterministic
    monkeypatch.setattr(trainer, "make_deterministic",
                        lambda d, dev: seen.append((d, dev.type)) or real(d, dev))
    torch.use_deterministic_algorithms(False)
    runs = {}
    for name, det in (("a", True), ("b", True), ("c", False)):
        runs[name] = train(TrainConfig(**tiny, deterministic=det), tmp_path / name, log=None)
    assert seen == [(True, "cpu"), (True, "cpu"), (False, "cpu")]
    assert not torch.are_deterministic_algorithms_enabled()
    meta = json.loads((tmp_path / "a" / "last.json").read_text())["training"]
    assert meta["config"]["deterministic"] is True
    assert meta["determinism"] == {"deterministic": True, "device": "cpu",
                                   "torch_deterministic_algorithms": False}
    w = {k: load_checkpoint(r["last"]).weights for k, r in runs.items()}
    for k in w["a"]:
        assert np.array_equal(w["a"][k], w["b"][k]) and np.array_equal(w["a"][k], w["c"][k])
