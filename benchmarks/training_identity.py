"""Does a change to the trainers change what they train? Record, with one checkout, the
weights (last and best checkpoint, warm start, every array of the resume state) and the
progress rows (less the timings) of a few tiny Nara, VMR²L and DeepRM trainings and of the
first iterations of shipped checkpoints' recorded configs; compare them, with another
checkout, bit for bit (issue #36: the PPO core was checked this way; the trainers' move to
``dcsim.learn.<family>.train`` on one Trainer base too). Either layout of ``dcsim.learn``
is found (:func:`trainer`), so one checkout may be of before the move.

    PYTHONPATH=<old tree> python benchmarks/training_identity.py record DIR [cases...]
    PYTHONPATH=<new tree> python benchmarks/training_identity.py compare DIR [cases...]

Same machine and library versions for both. ``compare`` exits 1 if any case differs. The
``ship_*`` cases take seconds (Nara) to about 15 minutes (VMR²L's warm start on one core).
"""
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__import__("dcsim").__file__).parents[1]
CK = ROOT / "dcsim" / "learn" / "checkpoints"

NARA_TINY = {"iterations": 4, "num_envs": 2, "num_steps": 16, "minibatch_size": 12,
             "update_epochs": 2, "eval_every": 2, "eval_episodes": 1, "eval_requests": 8,
             "episode_requests": 6}
VMR2L_TINY = {"iterations": 4, "hosts": [6, 8], "mnl": 3, "num_envs": 2, "num_steps": 5,
              "num_minibatches": 3, "update_epochs": 2, "eval_every": 2, "eval_mappings": 2,
              "eval_hosts": 8, "attention": "sparse", "dropout": 0.1,
              "warmstart": "alpha_vbpp", "warmstart_mappings": 2, "warmstart_epochs": 1}


DEEPRM_TINY = {"iterations": 4, "jobsets_per_iter": 2, "rollouts": 3, "steps": 10,
               "eval_every": 2, "eval_jobsets": 3, "max_steps": 100,
               "episode_max_length": 200}

#: each family's trainer module before the move to dcsim.learn.<family>.train
OLD_TRAINERS = {"nara": "dcsim.learn.ppo", "vmr2l": "dcsim.learn.vmr2l_ppo",
                "deeprm": "dcsim.learn.deeprm"}


def trainer(kind):
    """The module with ``kind``'s TrainConfig and train(), in this checkout's layout."""
    import importlib
    try:
        return importlib.import_module(f"dcsim.learn.{kind}.train")
    except ModuleNotFoundError:
        return importlib.import_module(OLD_TRAINERS[kind])


def vmr2l_fix(d):
    """A VMR²L config of either side of #36's rename (num_minibatches -> minibatch_size)."""
    d = dict(d)
    fields = {f.name for f in dataclasses.fields(trainer("vmr2l").TrainConfig)}
    if "num_minibatches" in d and "num_minibatches" not in fields:
        d["minibatch_size"] = max(1, d["num_envs"] * d["num_steps"] // d.pop("num_minibatches"))
    return d


def shipped(name):
    meta = json.loads((CK / f"{name}.json").read_text())
    return dict(meta["training"]["config"])


CASES = {
    "nara_tiny": ("nara", NARA_TINY, None),
    "nara_tiny_kl_noclip": ("nara", {**NARA_TINY, "target_kl": 0.001, "clip_vloss": False,
                                     "critic_warmup": 1, "seed": 3}, None),
    "nara_tiny_optical": ("nara", {**NARA_TINY, "features": 2,
                                   "topology": {"kind": "optical", "channels": 8,
                                                "oversubscription": "1:4"}}, "optical"),
    "vmr2l_tiny": ("vmr2l", VMR2L_TINY, None),
    "vmr2l_tiny_plain": ("vmr2l", {**VMR2L_TINY, "warmstart": "none", "dropout": 0.0,
                                   "clip_vloss": False, "target_kl": 0.001, "seed": 5}, None),
    "nara_tiny_init_from": ("nara", {**NARA_TINY, "init_from": "alpha_uniform",
                                     "critic_warmup": 1}, None),
    "vmr2l_tiny_init_from": ("vmr2l", {**VMR2L_TINY, "warmstart": "none", "dropout": 0.0,
                                       "init_from": "vmr2l_production"}, None),
    # shipped checkpoints: their recorded configs, stopped after N iterations
    "ship_nara_optical_8_1x4_rules": ("nara", "nara_optical_8_1x4_rules", 2),
    "ship_nara_alpha_azure": ("nara", "nara_alpha_azure", 2),
    "ship_nara_optical_all": ("nara", "nara_optical_all", 1),
    "ship_vmr2l_production": ("vmr2l", "vmr2l_production", 1),
    "deeprm_tiny": ("deeprm", DEEPRM_TINY, None),
    "deeprm_tiny_rmsprop_pool": ("deeprm", {**DEEPRM_TINY, "optimizer": "rmsprop",
                                            "train_pool": 3, "discount": 0.9, "seed": 2},
                                 None),
    "ship_deeprm": ("deeprm", "deeprm", 2),
}


def run(case, out):
    kind, cfgd, extra = CASES[case]
    mod = trainer(kind)
    from dcsim.learn import resume as rs
    stop_after = None
    if isinstance(cfgd, str):
        stop_after = extra
        cfgd = shipped(cfgd)
        if kind == "nara":
            cfgd["base_dir"] = str(ROOT / "experiments")
    if kind == "vmr2l":
        cfgd = vmr2l_fix(cfgd)
    cfg = mod.TrainConfig(**cfgd)
    t0 = time.perf_counter()
    try:
        mod.train(cfg, out, log=None, stop_after=stop_after)
    except rs.TrainingInterrupted:
        pass
    rec = {}
    for f in ("last.npz", "checkpoint.npz", "warmstart.npz"):
        if (out / f).exists():
            with np.load(out / f) as z:
                rec.update({f"{f}:{k}": z[k] for k in z.files})
    with np.load(out / "resume.npz") as z:
        for k in z.files:
            if k not in ("__doc__",) and not k.startswith("progress"):
                rec[f"resume:{k}"] = z[k]
    prog = pd.read_parquet(out / "progress.parquet").drop(
        columns=["wall_s", "steps_per_s"], errors="ignore")
    return rec, prog, time.perf_counter() - t0


def main():
    mode, d = sys.argv[1], Path(sys.argv[2])
    cases = sys.argv[3:] or list(CASES)
    d.mkdir(parents=True, exist_ok=True)
    bad = 0
    for case in cases:
        with tempfile.TemporaryDirectory() as tmp:
            rec, prog, s = run(case, Path(tmp) / "out")
        if mode == "record":
            np.savez(d / f"{case}.npz", **rec)
            prog.to_parquet(d / f"{case}.parquet")
            print(f"{case}: recorded {len(rec)} arrays, {len(prog)} rows ({s:.1f}s)", flush=True)
            continue
        with np.load(d / f"{case}.npz") as z:
            old = {k: z[k] for k in z.files}
        oprog = pd.read_parquet(d / f"{case}.parquet")
        same_keys = old.keys() == rec.keys()
        diff = [k for k in old if k in rec and not np.array_equal(old[k], rec[k])]
        prog_same = oprog.equals(prog)
        ok = same_keys and not diff and prog_same
        bad += not ok
        print(f"{case}: {'IDENTICAL' if ok else 'DIFFERENT'} ({len(rec)} arrays"
              f"{'' if same_keys else ', keys differ: ' + str(sorted(set(old) ^ set(rec)))}"
              f"{', differing: ' + str(diff[:5]) if diff else ''}, {len(prog)} progress rows"
              f"{'' if prog_same else ' DIFFER'}; {s:.1f}s)", flush=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
