"""Labels never hold an absolute path (#48): a learned policy's ``checkpoint:`` is named in
its label, and so in the results' ``allocator`` column, partitions and run ids, by the
file's name and a short hash of its contents."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from dcsim.errors import ConfigError
from dcsim.labels import absolute_paths, for_label, without_paths
from dcsim.plugins import get_plugin_class
from dcsim.runner import load_experiment, run_experiment
from dcsim.schedulers.deeprm import SHIPPED_CHECKPOINT, load_checkpoint, save_checkpoint


def _copy_checkpoint(folder: Path, name: str = "checkpoint.npz") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    dst = folder / name
    shutil.copyfile(SHIPPED_CHECKPOINT, dst)
    shutil.copyfile(SHIPPED_CHECKPOINT.with_suffix(".json"), dst.with_suffix(".json"))
    return dst


def _short_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:8]


def test_a_checkpoint_path_shows_as_its_file_name_and_content_hash(tmp_path):
    ck = _copy_checkpoint(tmp_path / "deep" / "folder")
    cls = get_plugin_class("deeprm", "scheduler")
    label = cls.label_for(cls.parse_options({"checkpoint": str(ck), "greedy": True}))
    assert label == f"deeprm(checkpoint=checkpoint.npz@{_short_hash(ck)}, greedy=True)"
    assert str(tmp_path) not in label and "/" not in label
    # the same file elsewhere: the same label; another file of the same name: another
    moved = _copy_checkpoint(tmp_path / "elsewhere")
    assert cls.label_for(cls.parse_options({"checkpoint": str(moved), "greedy": True})) \
        == label
    ck0 = load_checkpoint(SHIPPED_CHECKPOINT)
    other = save_checkpoint(tmp_path / "other" / "checkpoint.npz",
                            {k: v * 0.5 for k, v in ck0.weights.items()}, ck0.spec)
    assert cls.label_for(cls.parse_options({"checkpoint": str(other), "greedy": True})) \
        != label


def test_values_that_are_not_files_keep_their_labels(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "alpha_uniform").write_text("a file named like a shipped policy")
    assert for_label("alpha_uniform") == "alpha_uniform"  # a plain word is never a file
    assert for_label("0.5") == "0.5" and for_label(3) == 3 and for_label(None) is None
    assert for_label("/no/such/folder/ck.npz") == "ck.npz"  # still no folder
    assert for_label({"optical-8-1:16": "/no/such/ck.npz"}) == {"optical-8-1:16": "ck.npz"}
    nara = get_plugin_class("nara", "allocator")
    assert nara.label_for(nara.parse_options({"checkpoint": "optical_all"})) == \
        "nara(checkpoint=optical_all)"
    tetris = get_plugin_class("tetris_star", "scheduler")
    assert tetris.label_for(tetris.parse_options({"knob": 0.2})) == "tetris_star(knob=0.2)"


def test_a_plugins_own_label_loses_its_folders_and_a_label_with_one_is_refused(tmp_path):
    assert without_paths("mine(model=/home/me/run/ck.npz, k=1)") == "mine(model=ck.npz, k=1)"
    assert without_paths("ahab(kraken,host_link=per_vm)") == "ahab(kraken,host_link=per_vm)"
    assert absolute_paths("a/b 1/2") == [] and absolute_paths("x ~/ck.npz") == ["~/ck.npz"]
    cfg = yaml.safe_load((Path(__file__).parents[1] / "experiments" /
                          "quickstart.yaml").read_text())
    cfg.update(seeds=1, allocators=[{"name": "best_fit", "label": f"bf {tmp_path}/x"}])
    f = tmp_path / "q.yaml"
    f.write_text(yaml.safe_dump(cfg))
    with pytest.raises(ConfigError, match="allocators.0.label: .*absolute path"):
        load_experiment(f)


def test_results_and_run_ids_of_a_checkpoint_run_hold_no_path(tmp_path):
    ck = _copy_checkpoint(tmp_path / "train_out")
    cfg = yaml.safe_load((Path(__file__).parents[1] / "experiments" /
                          "deeprm_load_sweep.yaml").read_text())
    cfg.pop("matrix")
    cfg.update(seeds=1, schedulers=[{"name": "deeprm", "options": {"checkpoint": str(ck)}}])
    cfg["workload"].update(jobsets=2, steps=10)
    f = tmp_path / "d.yaml"
    f.write_text(yaml.safe_dump(cfg))
    exp = load_experiment(f)
    (run,) = exp.runs
    assert run.label == f"deeprm(checkpoint=checkpoint.npz@{_short_hash(ck)})"
    assert str(tmp_path) not in run.run_id and str(tmp_path) not in run.label
    out = run_experiment(exp, out=tmp_path / "results")
    summary = pd.read_parquet(out / "summary.parquet")
    assert summary["allocator"].tolist() == [run.label]
    for col in summary.columns:
        if summary[col].dtype == object:
            assert not summary[col].astype(str).str.contains(str(tmp_path)).any(), col
    assert all(str(tmp_path) not in p.name for p in out.rglob("*"))
