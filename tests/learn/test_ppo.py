"""PPO (:mod:`dcsim.learn.ppo`) under the two PPO trainers: GAE, the clipped update and its
KL early stops, the policy frozen while the critic warms up, and one name per knob
(``minibatch_size``)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

torch = pytest.importorskip("torch")
pytest.importorskip("gymnasium")

from dcsim.cli import main  # noqa: E402
from dcsim.errors import ConfigError  # noqa: E402
from dcsim.learn import ppo  # noqa: E402


def test_gae_equals_the_discounted_sums_written_out():
    """Each advantage is Σ_k (γλ)^k δ_{t+k} up to the episode's end, δ_t = r_t + γ V_{t+1}
    (0 after an end) − V_t; the return is advantage + value."""
    rng = np.random.default_rng(0)
    T, B, gamma, lam = 7, 3, 0.9, 0.8
    rewards = rng.normal(size=(T, B)).astype(np.float32)
    values = rng.normal(size=(T, B)).astype(np.float32)
    dones = (rng.random((T, B)) < 0.3).astype(np.float32)
    nxt = rng.normal(size=B).astype(np.float32)
    adv, ret = ppo.gae(rewards, values, dones, nxt, gamma, lam)
    for b in range(B):
        v_next = [*values[1:, b], nxt[b]]
        delta = [rewards[t, b] + gamma * v_next[t] * (1 - dones[t, b]) - values[t, b]
                 for t in range(T)]
        for t in range(T):
            want, w = 0.0, 1.0
            for k in range(t, T):
                want += w * delta[k]
                if dones[k, b]:
                    break
                w *= gamma * lam
            assert adv[t, b] == pytest.approx(want, rel=1e-5, abs=1e-5)
    assert adv.dtype == np.float32 and np.allclose(ret, adv + values)


def _toy(kl_stop: str, target_kl: float | None, epochs: int = 3):
    """A linear softmax policy and value on random states; returns the update's statistics
    and how many minibatches it evaluated."""
    torch.manual_seed(0)
    n, d, k = 32, 4, 3
    x = torch.randn(n, d)
    pi, v = torch.nn.Linear(d, k), torch.nn.Linear(d, 1)
    with torch.no_grad():
        logp_all = torch.log_softmax(pi(x), dim=1)
        act = torch.multinomial(logp_all.exp(), 1)[:, 0]
        old_logp = logp_all.gather(1, act[:, None])[:, 0].numpy()
        old_v = v(x)[:, 0].numpy()
    adv = np.linspace(-1, 1, n).astype(np.float32)
    batch = ppo.Batch.of(old_logp, adv, adv + old_v, old_v, torch.device("cpu"))
    calls = []

    def evaluate(mb, mbt):
        calls.append(len(mb))
        lp = torch.log_softmax(pi(x[mbt]), dim=1)
        return (lp.gather(1, act[mbt][:, None])[:, 0], -(lp.exp() * lp).sum(1),
                v(x[mbt])[:, 0])

    s = ppo.Settings(update_epochs=epochs, minibatch_size=8, clip_coef=0.2, value_clip=2.0,
                      ent_coef=0.01, vf_coef=0.5, max_grad_norm=0.5, norm_adv=True,
                      clip_vloss=True, target_kl=target_kl, kl_stop=kl_stop)
    opt = torch.optim.Adam([*pi.parameters(), *v.parameters()], lr=0.5)
    stats = ppo.update(s, batch, evaluate, opt, np.random.default_rng(0),
                        [list(pi.parameters()), list(v.parameters())])
    return stats, calls


def test_update_runs_every_minibatch_of_every_epoch_without_a_kl_target():
    stats, calls = _toy("minibatch", None)
    assert calls == [8] * 12  # 3 epochs x 32/8
    assert set(stats) == set(ppo.UPDATE_STATS)
    assert stats["approx_kl"] > 0 and 0 <= stats["clipfrac"] <= 1


@pytest.mark.parametrize("kl_stop, evaluated", [("minibatch", 2), ("epoch", 4)])
def test_the_kl_early_stop_looks_where_it_is_told(kl_stop, evaluated):
    """Nara stops after the first minibatch whose KL exceeds the target (the first has KL 0:
    its weights are the rollout's), VMR²L after the first epoch whose mean KL does."""
    _, calls = _toy(kl_stop, 1e-9)
    assert len(calls) == evaluated


def test_critic_only_leaves_the_policy_unchanged():
    torch.manual_seed(0)
    pi, v = torch.nn.Linear(2, 2), torch.nn.Linear(2, 1)
    before = [p.detach().clone() for p in pi.parameters()]
    x = torch.randn(4, 2)
    batch = ppo.Batch.of(np.zeros(4, np.float32), np.ones(4, np.float32),
                          np.ones(4, np.float32), np.zeros(4, np.float32), torch.device("cpu"))

    def evaluate(mb, mbt):
        lp = torch.log_softmax(pi(x[mbt]), dim=1)
        return lp[:, 0], -(lp.exp() * lp).sum(1), v(x[mbt])[:, 0]

    s = ppo.Settings(update_epochs=2, minibatch_size=2, clip_coef=0.2, value_clip=0.2,
                      ent_coef=0.5, vf_coef=0.5, max_grad_norm=0.5, norm_adv=False,
                      clip_vloss=False, target_kl=None, kl_stop="epoch")
    opt = torch.optim.Adam([*pi.parameters(), *v.parameters()], lr=0.1)
    ppo.update(s, batch, evaluate, opt, np.random.default_rng(1), [list(v.parameters())],
                critic_only=True)
    assert all(torch.equal(a, b) for a, b in zip(before, pi.parameters(), strict=True))


def test_minibatch_size_is_the_one_name_and_the_old_key_says_what_replaces_it(tmp_path):
    """Both trainers take ``minibatch_size`` (decisions per minibatch); VMR²L's former
    ``num_minibatches`` is refused naming the field and its replacement, in one line."""
    from dcsim.learn.nara import config as nara_config
    from dcsim.learn.vmr2l import config as vmr2l_config

    assert nara_config.TrainConfig().minibatch_size == 256
    assert vmr2l_config.TrainConfig().minibatch_size == 125  # the authors' 2000 / 16
    cfg = tmp_path / "old.yaml"
    cfg.write_text("num_envs: 8\nnum_steps: 250\nnum_minibatches: 16\n")
    with pytest.raises(ConfigError, match=r"old.yaml: num_minibatches: no longer a setting; "
                       r"set minibatch_size .* minibatch_size: 125"):
        vmr2l_config.load_train_config(cfg)
    ok = tmp_path / "new.yaml"
    ok.write_text("minibatch_size: 100\n")
    with pytest.raises(ConfigError, match="num_minibatches: no longer a setting"):
        vmr2l_config.load_train_config(ok, num_minibatches=4)  # --set num_minibatches=4
    r = CliRunner().invoke(main, ["train", "vmr2l", str(cfg), "--out", str(tmp_path / "o")])
    assert r.exit_code != 0 and "Traceback" not in r.output
    lines = [s for s in r.output.splitlines() if s.strip()]
    assert len(lines) == 1 and "minibatch_size" in lines[0], r.output
    # the shipped experiments say minibatch_size, and nothing says num_minibatches
    from pathlib import Path
    root = Path(__file__).parents[2]
    for path in [*(root / "experiments").glob("*.yaml"), *(root / "docs").rglob("*.md")]:
        assert "num_minibatches:" not in path.read_text(), path  # as a key
    assert "minibatch_size" in (root / "experiments" / "vmr2l_train.yaml").read_text()
    shipped = json.loads((root / "dcsim/learn/checkpoints/nara_alpha_uniform.json").read_text())
    assert shipped["training"]["config"]["minibatch_size"] == 256
