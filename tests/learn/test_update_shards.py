"""A minibatch's gradient as the sum of ``update_shards`` parts (issue #36, item 4: the
update scales with cores): the parts add up to the one-pass gradient, and for a given
``update_shards`` the weights are the same whichever process computes each part."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("gymnasium")

from dcsim.errors import ConfigError  # noqa: E402
from dcsim.learn import ppo  # noqa: E402
from dcsim.learn.workers.shards import Replica, Shards, parameters  # noqa: E402
from tests.helpers.training import same_weights, trained  # noqa: E402

ROOT = Path(__file__).parents[2]


class _OneProcess:
    """What Shards reads of the lock-step environments when there are no workers."""

    processes = 1


def _toy_nets():
    torch.manual_seed(0)
    return {"pi": torch.nn.Linear(4, 3), "v": torch.nn.Linear(4, 1)}


def _toy_evaluate(nets, data, mb, device):
    x = torch.as_tensor(data["x"][mb])
    lp = torch.log_softmax(nets["pi"](x), dim=1)
    act = torch.as_tensor(data["act"][mb])
    return (lp.gather(1, act[:, None])[:, 0], -(lp.exp() * lp).sum(1), nets["v"](x)[:, 0])


def _toy_update(parts: int, *, critic_only: bool = False, minibatch: int = 8):
    """One epoch of the PPO update on a linear policy and value (plain SGD, so the new
    weights are the old ones minus the gradient); returns the weights and statistics."""
    nets = _toy_nets()
    rng = np.random.default_rng(0)
    n = 24
    x = rng.normal(size=(n, 4)).astype(np.float32)
    with torch.no_grad():
        lp = torch.log_softmax(nets["pi"](torch.as_tensor(x)), dim=1)
        act = torch.multinomial(lp.exp(), 1, generator=torch.Generator().manual_seed(1))[:, 0]
        old_logp = lp.gather(1, act[:, None])[:, 0].numpy()
        old_v = nets["v"](torch.as_tensor(x))[:, 0].numpy()
    data = {"x": x, "act": act.numpy()}
    adv = rng.normal(size=n).astype(np.float32)
    ret = (adv + old_v).astype(np.float32)
    s = ppo.Settings(update_epochs=1, minibatch_size=minibatch, clip_coef=0.2,
                      value_clip=2.0, ent_coef=0.01, vf_coef=0.5, max_grad_norm=1e9,
                      norm_adv=True, clip_vloss=True, target_kl=None, kl_stop="minibatch")
    opt = torch.optim.SGD(parameters(nets), lr=0.1)
    shards = None
    if parts > 1:
        shards = Shards(parts, nets, Replica(_toy_nets, _toy_evaluate, 1), _OneProcess(),
                        torch.device("cpu"))
        shards.begin(data, old_logp, ret, old_v)
    stats = ppo.update(s, ppo.Batch.of(old_logp, adv, ret, old_v, torch.device("cpu")),
                        lambda mb, _t: _toy_evaluate(nets, data, mb, None), opt,
                        np.random.default_rng(2), [parameters(nets)], critic_only=critic_only,
                        shards=shards)
    return [p.detach().clone() for p in parameters(nets)], stats


@pytest.mark.parametrize("parts", [2, 3, 8, 50])
def test_the_parts_add_up_to_the_minibatch_gradient(parts):
    """Each part's share is its loss terms over the whole minibatch's size, so the sum is the
    one-pass gradient up to rounding, and the statistics are the minibatch's; more parts
    than decisions is one decision a part."""
    one, one_stats = _toy_update(1)
    many, many_stats = _toy_update(parts)
    before = parameters(_toy_nets())
    for a, b, w0 in zip(one, many, before, strict=True):
        assert not torch.equal(a, w0)  # the update moved the weights
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert many_stats == pytest.approx(one_stats, rel=1e-5, abs=1e-7)


def test_a_frozen_policy_gets_no_gradient_from_any_part():
    before = parameters(_toy_nets())
    weights, _ = _toy_update(3, critic_only=True)
    pi = len(list(_toy_nets()["pi"].parameters()))
    assert all(torch.equal(a, b) for a, b in zip(weights[:pi], before[:pi], strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(weights[pi:], before[pi:], strict=True))


#: the tiny trainings' settings here: two epochs, and a first iteration that trains the critic
#: alone (critic_warmup); VMR²L without dropout, which parts cannot share
NARA_PARTS = {"num_steps": 10, "minibatch_size": 10, "update_epochs": 2, "critic_warmup": 1}
VMR2L_PARTS = {"iterations": 2, "dropout": 0.0, "update_shards": 2}


def test_nara_parts_give_the_same_weights_in_one_process_and_over_two(tmp_path):
    """3 parts over 2 processes: the trainer computes parts 0 and 2, the worker part 1;
    the first iteration trains the critic alone (critic_warmup)."""
    here = trained("nara", tmp_path / "1", **NARA_PARTS, update_shards=3)[0]
    assert same_weights(here, trained("nara", tmp_path / "2", **NARA_PARTS, update_shards=3,
                                      num_workers=2)[0])
    # a setting, as minibatch_size
    assert not same_weights(here, trained("nara", tmp_path / "one_pass", **NARA_PARTS)[0])


@pytest.mark.slow  # workers start in fresh interpreters
def test_vmr2l_parts_give_the_same_weights_at_any_worker_count(tmp_path):
    one = trained("vmr2l", tmp_path / "1", **VMR2L_PARTS)[0]
    assert same_weights(one, trained("vmr2l", tmp_path / "2", **VMR2L_PARTS,
                                     num_workers=2)[0])
    assert same_weights(one, trained("vmr2l", tmp_path / "3", **VMR2L_PARTS,
                                     num_workers=3)[0])


def test_parts_and_dropout_are_one_clear_error(tmp_path):
    from dcsim.learn.vmr2l import train as vmr2l_train
    with pytest.raises(ConfigError, match="update_shards: 2 .*dropout: 0"):
        vmr2l_train.load_train_config(ROOT / "experiments" / "vmr2l_train.yaml",
                                    update_shards=2, dropout=0.1)
