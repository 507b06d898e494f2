"""The 2023 paper's learned Nara agent on the optical topologies: one policy trained across
the nine (the topology drawn per episode), feature version 2 (channels in request units),
and the shipped ``optical_all`` policy as the numpy ``nara`` allocator."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dcsim.allocators.multi.learned import (
    Architecture,
    NaraAllocator,
    Observer,
    load_checkpoint,
    shipped_checkpoints,
)
from dcsim.model.topologies import build_topology
from dcsim.modes.loss import Engine, EngineConfig
from dcsim.tie_break import greedy_argmax_torch
from dcsim.workload.spec import build_source
from tests.helpers.learned import (
    NINE,
    WORKLOAD_2023,
    assert_same_greedy_choice,
    greedy_env_servers,
    greedy_numpy_rollout,
    random_weights,
)

EXP = Path(__file__).parents[1] / "experiments"


def optical_env(**kw):
    pytest.importorskip("gymnasium")
    from dcsim.learn.nara.env import NaraEnv

    kw.setdefault("topology", NINE[0])
    return NaraEnv(workload=WORKLOAD_2023, reservation="per_pair_channel", features=2, **kw)




# --------------------------------------------------------------------------- the draw
def test_topology_draw_is_deterministic_per_seed_and_covers_the_list():
    """reset(seed=s) draws the same topology every time, all nine come up over 60 seeds,
    and the episode is exactly the one a single-topology environment runs with that seed."""
    env = optical_env(topologies=NINE, requests=4)
    drawn = []
    for s in range(60):
        _, info = env.reset(seed=s)
        assert env.topology is env.topologies[info["topology"]]
        drawn.append(info["topology"])
    other = optical_env(topologies=NINE, requests=4)
    assert [other.reset(seed=s)[1]["topology"] for s in reversed(range(60))] == drawn[::-1]
    assert set(drawn) == set(range(9))
    for s in (0, 1):
        env.reset(seed=s)
        single = optical_env(topology=NINE[drawn[s]], requests=4)
        single.reset(seed=s)
        while True:
            assert env.topology.name == single.topology.name
            assert np.array_equal(env.action_masks(), single.action_masks())
            a = int(np.flatnonzero(env.action_masks())[0])
            o1, r1, d1, _, _ = env.step(a)
            o2, r2, d2, _, _ = single.step(a)
            assert r1 == r2 and d1 == d2
            assert all(np.array_equal(o1[k], o2[k]) for k in o1)
            if d1:
                break


# --------------------------------------------------------------------------- features
def test_feature_version_2_counts_channels_in_request_units():
    """On optical 8-1:16 (8 channels per server link), hand-worked: a server's column is
    its link's free channels / the pairs a new server would add (one per server already
    chosen, at least 1); an edge's is free/bandwidth, clipped to 32, / 32; the global is
    the servers chosen / 16. Choosing two servers of one rack takes one channel on each of
    their links."""
    env = optical_env(requests=3)
    env.reset(seed=5)
    topo = env.topology
    link = {}                                   # server -> its one link
    for i, (u, v) in enumerate(topo.links):
        for node in (u, v):
            if topo.graph.nodes[node]["kind"] == "server":
                link[topo.server_index(node)] = i
    lay = env.layout
    assert env.partial.request.demand[0] > 32  # seed 5's first request needs 3+ servers
    col = 2 * 2 + 5
    picks = [0, 1]                              # two servers of rack 0
    for k in range(3):
        part = env.partial
        o = env.observer.observe(part, env.view)
        free = np.array([part.link_free[link[s]] for s in range(lay.n_servers)])
        if k < 2:
            assert np.all(free[2:] == 8.0)      # nothing else placed yet
        assert np.allclose(o["nodes"][:lay.n_servers, col], np.minimum(free / max(k, 1), 10))
        assert np.allclose(o["edges"][:, 2],
                           np.minimum(part.link_free[lay.edge_link], 32.0) / 32.0)
        assert o["globals"][-1] == pytest.approx(k / 16)
        assert np.all(o["nodes"][lay.n_servers:, col] == 0.0)
        if k == 2:
            # servers 0 and 1 gave a channel each to their pair: 7 / 2 pairs a third adds
            assert free[0] == free[1] == 7.0
            assert o["nodes"][0, col] == pytest.approx(3.5)
            assert o["nodes"][5, col] == pytest.approx(4.0)
            break
        env.step(picks[k])


def test_feature_version_2_under_union_counts_the_bandwidth_once():
    """Fabric alpha, union (2021): a server link of 1 unit free holds 1/bw requests, and a
    link already carrying the request counts as unlimited (clipped to 10)."""
    pytest.importorskip("gymnasium")
    from dcsim.learn.nara.env import NaraEnv

    env = NaraEnv(requests=10, features=2)
    env.reset(seed=1)
    part = env.partial
    o = env.observer.observe(part, env.view)
    bw = part.bandwidth
    lay = env.layout
    for i in range(lay.n_edges):
        s = int(lay.edge_index[0, i])
        if s < lay.n_servers:
            free = part.link_free[lay.edge_link[i]]
            assert o["nodes"][s, 9] == pytest.approx(min(free / bw, 10.0), rel=1e-6)
    assert o["nodes"].shape[1] == 10 and o["edges"].shape[1] == 3
    assert o["globals"].shape == (7,)


def test_feature_version_1_is_unchanged_by_version_2():
    """Version 2 appends columns: the first ones are version 1's, value for value."""
    topo = build_topology(NINE[4])
    pytest.importorskip("gymnasium")
    env = optical_env(topology=NINE[4], requests=30)
    env.reset(seed=2)
    for _ in range(12):
        o1 = Observer(topo, features=1).observe(env.partial, env.view)
        o2 = env.observer.observe(env.partial, env.view)
        assert np.array_equal(o2["nodes"][:, :9], o1["nodes"])
        assert np.array_equal(o2["edges"][:, :2], o1["edges"])
        assert np.array_equal(o2["globals"][:6], o1["globals"])
        _, _, done, _, _ = env.step(int(np.flatnonzero(env.action_masks())[-1]))
        if done:
            break


def test_numpy_and_torch_networks_agree_on_optical_with_version_2():
    torch = pytest.importorskip("torch")
    from dcsim.learn.nara.network import NaraPolicy, graph_batch, stack_obs

    env = optical_env(topologies=NINE, requests=16)
    arch = Architecture.for_resources(2, 2)
    pol = NaraPolicy(arch)
    pol.load_numpy(random_weights(arch, seed=3))
    batch, numpy_logits = greedy_numpy_rollout(env, pol.numpy_weights(), arch, [0, 7], 6)
    with torch.no_grad():
        zt = pol(graph_batch(stack_obs(batch)))
        choices = greedy_argmax_torch(zt).numpy()  # as the PPO trainer's greedy evaluation
        zt = zt.numpy()
    for (z, m), t, c in zip(numpy_logits, zt, choices, strict=True):
        assert np.allclose(z[m], t[m], rtol=1e-4, atol=1e-4)
        # the same choice: ties (identical servers score the same in exact arithmetic, the
        # two libraries round differently) decided by dcsim's rule in both
        assert_same_greedy_choice(z, m, t, int(c))


# --------------------------------------------------------------------------- training
def test_multi_topology_training_smoke(tmp_path):
    """experiments/nara_train_optical.yaml, shrunk to two tiny iterations: it trains, the
    evaluation runs on each of the nine topologies, and the checkpoint says so."""
    pytest.importorskip("torch")
    pytest.importorskip("gymnasium")
    from dcsim.learn.nara.train import load_train_config, train

    cfg = load_train_config(EXP / "nara_train_optical.yaml", iterations=2, num_envs=2,
                            num_steps=12, minibatch_size=12, update_epochs=1, eval_every=1,
                            eval_episodes=1, eval_requests=6, episode_requests=5,
                            max_wall_s=None)
    assert len(cfg.topologies) == 9 and cfg.features == 2
    assert cfg.reservation == "per_pair_channel" and cfg.episode_requests == 5
    r = train(cfg, tmp_path / "t", log=None)
    assert r["iterations"] == 2
    meta = json.loads((tmp_path / "t" / "checkpoint.json").read_text())
    names = {f"optical-{t['channels']}-{t['oversubscription']}" for t in NINE}
    assert set(meta["training"]["eval_per_topology"]) == names
    assert set(meta["training"]["eval_tetris"]["per_topology"]) == names
    assert meta["features"]["version"] == 2 and meta["architecture"]["node_features"] == 10
    ck = load_checkpoint(tmp_path / "t" / "checkpoint.npz")
    assert ck.features == 2
    import pandas as pd
    prog = pd.read_parquet(tmp_path / "t" / "progress.parquet")
    assert {f"eval_acceptance:{n}" for n in names} <= set(prog.columns)


# --------------------------------------------------------------------------- shipped policy
def test_shipped_optical_policy_records_its_training():
    path = shipped_checkpoints()["optical_all"]
    ck = load_checkpoint(path)
    assert ck.features == 2
    t = ck.meta["training"]
    assert t["command"].startswith("dcsim train nara experiments/nara_train_optical.yaml")
    assert t["config"]["topologies"] == NINE
    assert t["config"]["reservation"] == "per_pair_channel"
    assert t["wall_time_s"] > 0 and len(t["eval_per_topology"]) == 9


def test_shipped_optical_policy_runs_as_the_nara_allocator_without_torch():
    """The ``nara`` allocator runs ``optical_all`` in numpy: a fresh interpreter that runs
    it on an optical topology never imports torch."""
    code = """
import json, sys, numpy as np
from dcsim.allocators.multi.learned import NaraAllocator
from dcsim.model.topologies import build_topology
from dcsim.modes.loss import Engine, EngineConfig
from dcsim.workload.spec import build_source
wl = json.loads(sys.argv[1])
topo = build_topology({"kind": "optical", "channels": 8, "oversubscription": "1:8"})
alloc = NaraAllocator(NaraAllocator.Options(checkpoint="optical_all",
                      reservation="per_pair_channel"), rng=np.random.default_rng(0),
                      topology=topo)
eng = Engine(topo, build_source({**wl, "requests": 40}, topo), alloc,
             np.random.default_rng(2023), EngineConfig(capacity="wait"))
s = eng.run()
print(s["received"], s["accepted"], "torch" in sys.modules, "gymnasium" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code, json.dumps(WORKLOAD_2023)],
                         capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == "40" and 0 < int(out[1]) <= 40
    assert out[2:] == ["False", "False"]


def test_shipped_optical_policy_matches_the_environment():
    """The allocator and the training environment read the same version-2 observations."""
    ck = load_checkpoint(shipped_checkpoints()["optical_all"])
    env_servers = greedy_env_servers(ck, optical_env(topology=NINE[1], requests=40), seed=2023)
    topo = build_topology(NINE[1])
    rows = []
    alloc = NaraAllocator(NaraAllocator.Options(checkpoint="optical_all",
                                                reservation="per_pair_channel"),
                          rng=np.random.default_rng(0), topology=topo)
    Engine(topo, build_source({**WORKLOAD_2023, "requests": 40}, topo), alloc,
           np.random.default_rng(2023), EngineConfig(capacity="wait"),
           sink=lambda kind, cols: rows.append(cols)).run()
    servers = [list(s) for cols in rows if "servers" in cols for s in cols["servers"]]
    assert env_servers == servers


@pytest.mark.parametrize("departures", ["before_arrivals", "after_first_step"])
def test_environment_trains_under_the_baselines_rules_as_the_allocator_runs_them(departures):
    """eligible: any_free and pair_paths: authors_sticky in the training environment: the
    same greedy choices as the allocator with those options (and not the default mask's:
    the rules change what the agent may pick)."""
    ck = load_checkpoint(shipped_checkpoints()["optical_8_1x16"])
    rules = {"eligible": "any_free", "pair_paths": "authors_sticky"}
    got = {}
    for name, opts in (("rules", rules), ("default", {})):
        env_servers = greedy_env_servers(
            ck, optical_env(topology=NINE[0], requests=60, capacity="wait",
                            departures=departures, **opts), seed=7)
        topo = build_topology(NINE[0])
        rows = []
        alloc = NaraAllocator(NaraAllocator.Options(checkpoint="optical_8_1x16",
                                                    reservation="per_pair_channel", **opts),
                              rng=np.random.default_rng(0), topology=topo)
        Engine(topo, build_source({**WORKLOAD_2023, "requests": 60}, topo), alloc,
               np.random.default_rng(7), EngineConfig(capacity="wait", departures=departures),
               sink=lambda kind, cols, rows=rows: rows.append(cols)).run()
        servers = [list(s) for cols in rows if "servers" in cols for s in cols["servers"]]
        assert env_servers == servers, name
        got[name] = servers
    assert got["rules"] != got["default"]


def test_training_config_carries_the_rules_to_every_environment():
    pytest.importorskip("gymnasium")   # the environment's config lives beside the environment
    from dcsim.learn.nara.config import TrainConfig

    cfg = TrainConfig(eligible="any_free", pair_paths="authors_sticky")
    for env in [cfg.env_config(), *cfg.eval_configs()]:
        assert (env.eligible, env.pair_paths) == ("any_free", "authors_sticky")
    assert (TrainConfig().env_config().eligible,
            TrainConfig().env_config().pair_paths) == ("needed", "all")


# --------------------------------------------------------------------------- experiments
@pytest.mark.parametrize(("name", "base", "seeds", "wirings", "points"),
                         [("nara_optical_learned", "nara_optical", 5, ("", "-authors_small"), 18),
                          ("nara_optical_learned_scaled", "nara_optical_scaled", 3,
                           ("-scaled", "-authors_large"), 54)])
def test_learned_experiments_are_the_baseline_experiments_plus_the_agent(
        name, base, seeds, wirings, points):
    """Same seed, workload, topology and matrix as the baselines' experiment (so their rows
    are that experiment's; the scaled one also sweeps the holding time), the agents first
    (each topology's own policy on both wirings, each topology's policy trained under the
    baselines' rules run under them, then the one for all nine) and the baselines after
    them, with the same options; the scaled one is reduced to 3 seeds."""
    import yaml
    from click.testing import CliRunner

    from dcsim.cli import main

    mine = yaml.safe_load((EXP / f"{name}.yaml").read_text())
    theirs = yaml.safe_load((EXP / f"{base}.yaml").read_text())
    for key in ("seed", "capacity", "departures", "topology", "workload"):
        assert mine[key] == theirs[key], key
    extra = {k: v for k, v in mine["matrix"].items() if k not in theirs["matrix"]}
    assert {k: mine["matrix"][k] for k in theirs["matrix"]} == theirs["matrix"]
    assert extra == ({} if "scaled" not in name
                     else {"workload.duration.high": [241, 362, 482]})
    assert mine["seeds"] == seeds
    per_topology, rules, one = mine["allocators"][:3]
    want = {"reservation": "per_pair_channel", "per_topology": {
        f"optical-{t['channels']}-{t['oversubscription']}{suffix}":
            f"optical_{t['channels']}_{t['oversubscription'].replace(':', 'x')}"
        for suffix in wirings for t in NINE}}
    assert per_topology == {"name": "nara", "label": "nara_topology", "options": want}
    assert rules == {"name": "nara", "label": "nara_topology_rules", "options": {
        "reservation": "per_pair_channel", "eligible": "any_free",
        "pair_paths": "authors_sticky",
        "per_topology": {k: f"{v}_rules" for k, v in want["per_topology"].items()}}}
    assert set(rules["options"]["per_topology"].values()) <= set(shipped_checkpoints())
    assert one == {"name": "nara", "label": "nara", "options": {
        "checkpoint": "optical_all", "reservation": "per_pair_channel"}}
    assert mine["allocators"][3:] == theirs["allocators"]
    r = CliRunner().invoke(main, ["validate", str(EXP / f"{name}.yaml")])
    assert r.exit_code == 0, r.output
    assert f"{points} sweep point(s), {seeds} seed(s)" in r.output
