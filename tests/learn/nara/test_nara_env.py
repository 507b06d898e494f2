"""The Nara Gymnasium environment (issue #7): the API, and that it runs the baselines' step."""

from __future__ import annotations

import numpy as np
import pytest

gym = pytest.importorskip("gymnasium")

from gymnasium.utils.env_checker import check_env  # noqa: E402

from dcsim.allocators.multi.baselines import Tetris, tetris_scores  # noqa: E402
from dcsim.errors import ConfigError  # noqa: E402
from dcsim.learn.nara.env import ENV_ID, NaraEnv  # noqa: E402
from dcsim.modes.loss import Engine, EngineConfig  # noqa: E402


def test_check_env_unpadded():
    check_env(NaraEnv(requests=16), skip_render_check=True)


def test_check_env_padded():
    env = NaraEnv(requests=16, max_nodes=64, max_edges=128, max_servers=48)
    check_env(env, skip_render_check=True)
    obs, _ = env.reset(seed=3)
    assert obs["nodes"].shape == (64, 9) and obs["edge_index"].shape == (2, 128)
    assert obs["node_mask"].sum() == 50 and obs["edge_mask"].sum() == 104
    assert not obs["action_mask"][40:].any()
    assert np.array_equal(env.action_masks(), obs["action_mask"].astype(bool))


def test_check_env_with_topologies_of_different_sizes():
    """``topologies``: every episode on one of them, padded to the largest (alpha: 40
    servers, 50 nodes; optical: 64 servers, 76 nodes)."""
    env = NaraEnv(requests=8, features=2,
                  topologies=[{"kind": "fabric", "preset": "alpha"},
                              {"kind": "optical", "channels": 8}])
    check_env(env, skip_render_check=True)
    seen = set()
    for seed in range(12):
        obs, info = env.reset(seed=seed)
        seen.add(info["topology"])
        assert obs["nodes"].shape == (76, 10) and obs["action_mask"].shape == (64,)
        n = env.layout.n_servers
        assert obs["node_mask"].sum() == env.layout.n_nodes
        assert not obs["action_mask"][n:].any()
    assert seen == {0, 1}
    with pytest.raises(ConfigError, match="topologies: their server resources differ"):
        NaraEnv(topologies=[{"kind": "fabric"},
                            {"kind": "flat", "server": {"cpu": 1, "gpu": 1}}])


def test_registered_with_gymnasium():
    env = gym.make(ENV_ID, requests=8)
    obs, info = env.reset(seed=0)
    assert obs["action_mask"].any() and info["received"] == 1
    env.close()


def _tetris_episode(env: NaraEnv, seed: int) -> int:
    env.reset(seed=seed)
    inv = env.view.inv_capacity ** 2
    done, steps = False, 0
    while not done:
        a = int(tetris_scores(env.partial, env.view, inv, 0.9).argmax())
        _, _, done, _, _ = env.step(a)
        steps += 1
    return steps


@pytest.mark.parametrize("reservation", ["union", "per_pair_channel"])
def test_scripted_tetris_reproduces_the_tetris_allocator(reservation):
    """Choosing Tetris's server at every step gives exactly the ``tetris`` allocator's run:
    the same requests, accept/reject, servers, amounts and links."""
    env = NaraEnv(requests=100, reservation=reservation)
    seed = 11
    _tetris_episode(env, seed)
    ours = env.results
    theirs = []

    class Recording(Tetris):
        def allocate(self, req, view):
            p = super().allocate(req, view)
            theirs.append((req, p))
            return p

    alloc = Recording(Recording.Options(reservation=reservation))
    Engine(env.topology, env.source, alloc, np.random.default_rng(seed),
           EngineConfig(capacity="wait")).run()
    assert len(ours) == len(theirs) == 100
    assert 0 < sum(p is not None for _, p in ours) < 100
    for (r1, p1), (r2, p2) in zip(ours, theirs, strict=True):
        assert r1.id == r2.id and r1.arrival == r2.arrival
        assert np.array_equal(r1.demand, r2.demand) and r1.bandwidth == r2.bandwidth
        assert (p1 is None) == (p2 is None)
        if p1 is not None:
            assert np.array_equal(p1.servers, p2.servers)
            assert np.array_equal(p1.amounts, p2.amounts)
            assert np.array_equal(p1.links, p2.links)
            assert np.array_equal(p1.bandwidth, p2.bandwidth)


def test_rewards_and_episode_end():
    env = NaraEnv(requests=20)
    env.reset(seed=5)
    inv = env.view.inv_capacity ** 2
    total, done = 0.0, False
    while not done:
        a = int(tetris_scores(env.partial, env.view, inv, 0.9).argmax())
        _, r, done, trunc, info = env.step(a)
        assert r in (0.0, 10.0, -10.0) and not trunc
        total += r
    acc = sum(p is not None for _, p in env.results)
    assert info["decided"] == info["received"] == 20 and info["accepted"] == acc
    assert total == 10 * acc - 10 * (20 - acc)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)


def test_invalid_action_fails_the_request():
    env = NaraEnv(requests=4, reward_failure=-3.0)
    obs, _ = env.reset(seed=1)
    env.step(int(np.flatnonzero(obs["action_mask"])[0]))  # a valid first server
    part = env.partial
    if part is None or part.request.id != 0:
        pytest.skip("the first request finished in one choice")
    chosen = part.servers[0]
    _, r, _, _, info = env.step(chosen)  # already chosen: invalid
    assert info["invalid_action"] and r == -3.0
    assert env.results[0][1] is None


def test_reset_seed_is_deterministic():
    env = NaraEnv(requests=10)
    a, _ = env.reset(seed=42)
    n1 = _tetris_episode(env, 42)
    b, _ = env.reset(seed=42)
    n2 = _tetris_episode(env, 42)
    assert n1 == n2
    for k in a:
        assert np.array_equal(a[k], b[k])


def test_bad_config_names_the_field():
    with pytest.raises(ConfigError, match=r"env\.requests"):
        NaraEnv(requests=0)
    with pytest.raises(ConfigError, match=r"env\.bogus: unknown field"):
        NaraEnv(bogus=1)
    with pytest.raises(ConfigError, match="max_nodes"):
        NaraEnv(max_nodes=10)


def test_environment_from_an_experiment_file():
    from pathlib import Path

    from dcsim.learn.nara.env import env_config_from_experiment

    path = Path(__file__).parents[3] / "experiments" / "nara_table1.yaml"
    cfg = env_config_from_experiment(path, requests=20)
    assert cfg.capacity == "wait" and cfg.requests == 20
    assert cfg.topology == {"kind": "fabric", "preset": "alpha"}
    env = NaraEnv(cfg)
    obs, _ = env.reset(seed=0)
    assert obs["nodes"].shape[0] == 50
