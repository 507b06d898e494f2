"""One Nara agent per topology, as the 2023 paper trains them: fine-tuning from a policy
(``init_from``, ``critic_warmup``), a trainer's ``--set`` for one topology, and the ``nara``
allocator's ``per_topology`` option that runs each topology's own policy."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dcsim.allocators.multi.learned import (
    NaraAllocator,
    load_checkpoint,
    save_checkpoint,
    shipped_checkpoints,
)
from dcsim.errors import ConfigError
from dcsim.model.topologies import build_topology
from dcsim.modes.loss import Engine, EngineConfig
from dcsim.workload.spec import build_source
from tests.helpers.learned import NINE, WORKLOAD_2023, random_weights

EXP = Path(__file__).parents[3] / "experiments"
TINY = dict(num_envs=2, num_steps=12, minibatch_size=12, update_epochs=1, eval_every=1,
            eval_episodes=1, eval_requests=6, episode_requests=5, max_wall_s=None)


def _other_policy(tmp_path: Path, seed: int) -> Path:
    """A copy of optical_all with other (random) weights: a distinguishable policy."""
    ck = load_checkpoint(shipped_checkpoints()["optical_all"])
    path = tmp_path / f"other{seed}.npz"
    save_checkpoint(path, random_weights(ck.arch, seed=seed), ck.arch, {},
                    resources=("cpu", "mem"), features=ck.features)
    return path


def _run(topology: dict, options: dict, requests: int = 60) -> list[list[int]]:
    topo = build_topology(topology)
    alloc = NaraAllocator(NaraAllocator.Options(reservation="per_pair_channel", **options),
                          rng=np.random.default_rng(0), topology=topo)
    rows: list[dict] = []
    Engine(topo, build_source({**WORKLOAD_2023, "requests": requests}, topo), alloc,
           np.random.default_rng(2023), EngineConfig(capacity="wait"),
           sink=lambda kind, cols: rows.append(cols)).run()
    return [list(s) for cols in rows if "servers" in cols for s in cols["servers"]]


# --------------------------------------------------------------------------- per_topology
def test_per_topology_runs_each_topology_with_its_own_policy(tmp_path):
    """Each topology's rows are exactly those of ``checkpoint:`` set to its own policy,
    and the two policies differ on it (so the choice is visible)."""
    other = str(_other_policy(tmp_path, 1))
    per = {"optical-8-1:16": "optical_all", "optical-16-1:8": other}
    for topo, ck in ((NINE[0], "optical_all"), (NINE[4], other)):
        assert _run(topo, {"per_topology": per}) == _run(topo, {"checkpoint": ck})
    assert _run(NINE[4], {"checkpoint": other}) != _run(NINE[4], {"checkpoint": "optical_all"})


def test_per_topology_refuses_an_unlisted_topology_and_a_double_source(tmp_path):
    topo = build_topology(NINE[1])
    with pytest.raises(ConfigError, match=r"no policy for topology 'optical-8-1:8'.*"
                                          r"listed: optical-8-1:16"):
        NaraAllocator(NaraAllocator.Options(per_topology={"optical-8-1:16": "optical_all"},
                                            reservation="per_pair_channel"), topology=topo)
    with pytest.raises(ValueError, match="checkpoint or per_topology, not both"):
        NaraAllocator.Options(checkpoint="optical_all",
                              per_topology={"optical-8-1:16": "optical_all"})
    with pytest.raises(ValueError, match="optical-8-1:16: .*does not exist"):
        NaraAllocator.Options(per_topology={"optical-8-1:16": str(tmp_path / "none.npz")})
    with pytest.raises(ValueError, match="at least one"):
        NaraAllocator.Options(per_topology={})


def test_cli_validate_names_a_missing_per_topology_policy(tmp_path):
    import yaml
    from click.testing import CliRunner

    from dcsim.cli import main

    exp = yaml.safe_load((EXP / "nara_optical_learned.yaml").read_text())
    agent = next(a for a in exp["allocators"] if "per_topology" in a.get("options", {}))
    name = next(iter(agent["options"]["per_topology"]))
    agent["options"]["per_topology"][name] = str(tmp_path / "gone.npz")
    f = tmp_path / "e.yaml"
    f.write_text(yaml.safe_dump(exp))
    r = CliRunner().invoke(main, ["validate", str(f)])
    assert r.exit_code != 0
    assert "per_topology" in r.output and "gone.npz" in r.output
    assert "Traceback" not in r.output


# --------------------------------------------------------------------------- fine-tuning
def test_init_from_starts_from_the_policy_and_warmup_freezes_it(tmp_path):
    """Iteration 0's candidate is the starting policy itself; while ``critic_warmup``
    lasts only the critic learns, so the policy's weights are unchanged."""
    pytest.importorskip("torch")
    pytest.importorskip("gymnasium")
    from dcsim.learn.nara.train import load_train_config, train

    cfg = load_train_config(EXP / "nara_train_optical_topology.yaml", iterations=2,
                            init_from="optical_all", critic_warmup=2, **TINY)
    assert cfg.departures == "after_first_step" and cfg.features == 2
    r = train(cfg, tmp_path / "t", log=None)
    start = load_checkpoint(shipped_checkpoints()["optical_all"]).weights
    last = load_checkpoint(tmp_path / "t" / "last.npz").weights
    for k, w in start.items():
        np.testing.assert_array_equal(last[k], w, err_msg=k)
    import pandas as pd
    prog = pd.read_parquet(tmp_path / "t" / "progress.parquet")
    assert prog["iteration"].tolist() == [0, 1, 2]
    assert prog["v_loss"].iloc[1:].notna().all()
    assert r["best_iteration"] in (0, 1, 2)


def test_after_warmup_the_policy_moves(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("gymnasium")
    from dcsim.learn.nara.train import load_train_config, train

    cfg = load_train_config(EXP / "nara_train_optical_topology.yaml", iterations=2,
                            init_from="optical_all", critic_warmup=1, **TINY)
    train(cfg, tmp_path / "t", log=None)
    start = load_checkpoint(shipped_checkpoints()["optical_all"]).weights
    last = load_checkpoint(tmp_path / "t" / "last.npz").weights
    assert any(not np.array_equal(last[k], w) for k, w in start.items())


def test_init_from_must_fit_the_config(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("gymnasium")
    from dcsim.learn.nara.train import load_train_config

    cfg = EXP / "nara_train_optical_topology.yaml"
    with pytest.raises(ConfigError, match=r"init_from: .* another architecture: embed 16 "
                                          r"\(config: 8\)"):
        load_train_config(cfg, init_from="optical_all", embed=8)
    with pytest.raises(ConfigError, match="init_from: .*feature version 2, the config sets "
                                          "features: 1"):
        load_train_config(cfg, init_from="optical_all", features=1)
    with pytest.raises(ConfigError, match=r"nara_train_optical_topology.yaml: init_from: "):
        load_train_config(cfg, init_from=str(tmp_path / "none.npz"))


def test_trainer_set_reaches_into_sections():
    """``--set topology.channels=8`` (dotted) sets one entry of a section; a bad value is
    one error naming the file and the field."""
    pytest.importorskip("torch")
    pytest.importorskip("gymnasium")
    from dcsim.learn.nara.train import load_train_config

    cfg = load_train_config(EXP / "nara_train_optical_topology.yaml",
                            **{"topology.channels": 32, "topology.oversubscription": "1:4"})
    assert cfg.topology == {"kind": "optical", "channels": 32, "oversubscription": "1:4"}
    with pytest.raises(ConfigError, match="topology.oversubscription"):
        load_train_config(EXP / "nara_train_optical_topology.yaml",
                          **{"topology.oversubscription": 76})


def test_cli_train_set_is_recorded_and_bad_keys_are_one_line(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("gymnasium")
    from click.testing import CliRunner

    from dcsim.cli import main

    cfg = tmp_path / "c.yaml"
    text = (EXP / "nara_train_optical_topology.yaml").read_text()
    for k, v in TINY.items():
        text += f"\n{k}: {'null' if v is None else v}"
    cfg.write_text(text.replace("iterations: 450", "iterations: 1"))
    r = CliRunner().invoke(main, ["train", "nara", str(cfg), "--out", str(tmp_path / "o"),
                                  "--set", "topology.channels=32",
                                  "--set", "topology.oversubscription='1:4'"])
    assert r.exit_code == 0, r.output
    meta = json.loads((tmp_path / "o" / "checkpoint.json").read_text())
    assert meta["training"]["config"]["topology"]["channels"] == 32
    assert "--set topology.channels=32" in meta["training"]["command"]
    r = CliRunner().invoke(main, ["train", "nara", str(cfg), "--set", "nonsense=1"])
    assert r.exit_code != 0 and "nonsense: unknown field" in r.output
    assert "Traceback" not in r.output


# --------------------------------------------------------------------------- shipped agents
@pytest.mark.parametrize("topology", NINE, ids=lambda t: f"{t['channels']}-{t['oversubscription']}")
def test_each_shipped_per_topology_agent_records_its_own_training(topology):
    """optical_<c>_<1xo> was trained from scratch on that topology alone, on the authors'
    clock, by experiments/nara_train_optical_topology.yaml with --set picking it."""
    c, o = topology["channels"], topology["oversubscription"]
    ck = load_checkpoint(shipped_checkpoints()[f"optical_{c}_{o.replace(':', 'x')}"])
    t = ck.meta["training"]
    assert t["command"].startswith(
        "dcsim train nara experiments/nara_train_optical_topology.yaml")
    assert f"--set topology.channels={c}" in t["command"]
    cfg = t["config"]
    assert cfg["topology"] == topology and cfg["topologies"] is None
    assert cfg["departures"] == "after_first_step" and cfg["init_from"] is None
    assert cfg["features"] == 2 and ck.features == 2
    # 450 iterations, unless the 1500-s safety stop came first on a busy machine
    assert cfg["iterations"] == 450 and 0 < t["iteration"] <= t["iterations"] <= 450
    assert t["iterations"] == 450 or t["wall_time_s"] >= cfg["max_wall_s"]
    assert 0 < t["eval_acceptance"] <= 1 and 0 < t["eval_tetris"]["acceptance"] <= 1
