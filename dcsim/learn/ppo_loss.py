"""The clipped PPO loss of a set of decisions, written once for the PPO core's one-pass
update (:func:`dcsim.learn.ppo_core.update`, each term a mean over the minibatch) and for
the parts of :mod:`dcsim.learn.shards` (each term a part's sum over the whole minibatch's
size, so that the parts add up to the minibatch's means)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

#: how a term's per-decision values become one number (a mean, or a part's share)
Reduce = Callable[[torch.Tensor], torch.Tensor]


def ppo_loss(s: Any, new_logp: torch.Tensor, entropy: torch.Tensor, v: torch.Tensor,
             old_logp: torch.Tensor, adv: torch.Tensor, ret: torch.Tensor,
             old_v: torch.Tensor, reduce: Reduce, critic_only: bool
             ) -> tuple[torch.Tensor, tuple[float, float, float, float, float]]:
    """The loss to differentiate and its statistics (``pg_loss, v_loss, entropy,
    approx_kl, clipfrac``): the clipped policy loss, the (clipped) value loss ×
    ``vf_coef`` and the entropy bonus × ``ent_coef`` (the value loss alone when
    ``critic_only``); ``s`` has :class:`~dcsim.learn.ppo_core.Settings`' fields."""
    logratio = new_logp - old_logp
    ratio = logratio.exp()
    with torch.no_grad():
        kl = float(reduce((ratio - 1) - logratio))
        clipfrac = float(reduce(((ratio - 1.0).abs() > s.clip_coef).float()))
    pg = reduce(torch.max(-adv * ratio, -adv * ratio.clamp(1 - s.clip_coef, 1 + s.clip_coef)))
    if s.clip_vloss:
        v_clip = old_v + (v - old_v).clamp(-s.value_clip, s.value_clip)
        v_loss = 0.5 * reduce(torch.max((v - ret) ** 2, (v_clip - ret) ** 2))
    else:
        v_loss = 0.5 * reduce((v - ret) ** 2)
    ent = reduce(entropy)
    total = s.vf_coef * v_loss if critic_only else pg - s.ent_coef * ent + s.vf_coef * v_loss
    return total, (float(pg.detach()), float(v_loss.detach()), float(ent.detach()), kl,
                   clipfrac)
