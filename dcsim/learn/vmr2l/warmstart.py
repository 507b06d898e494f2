"""dcsim's warm start for VMR²L's PPO (``warmstart: alpha_vbpp | greedy``; the authors
have none): behaviour cloning of a heuristic's migrations, the critic regressing the
teacher's discounted returns."""

from __future__ import annotations

import numpy as np
import torch

from dcsim.learn.vmr2l.config import TrainConfig
from dcsim.learn.vmr2l.env import VMR2LEnv
from dcsim.learn.vmr2l.network import (
    VMR2LPolicy,
    batch_tensors,
    evaluate_actions,
    stack_observations,
)
from dcsim.reschedulers.builtin import AlphaVBPP, Greedy


def teacher_data(cfg: TrainConfig, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Behaviour-cloning samples: the heuristic ``cfg.warmstart``'s migrations on
    ``warmstart_mappings`` training mappings, one sample per migration (the observation
    before it, the VM's token, its slot)."""
    teacher = {"alpha_vbpp": AlphaVBPP, "greedy": Greedy}[cfg.warmstart]()
    env = VMR2LEnv(cfg.env_config())
    obs, vm_a, slot_a, ret = [], [], [], []
    for _ in range(cfg.warmstart_mappings):
        o, _ = env.reset(seed=int(rng.integers(2**62)))
        plan = teacher.reschedule(env.state.copy(), cfg.mnl)
        pos = {int(k): i for i, k in enumerate(env.tokens)}
        rewards = []
        for m in plan:
            token = pos[int(m.vm)]
            slot = 2 * m.host + (0 if m.numa < 0 else m.numa)
            obs.append(o)
            vm_a.append(token)
            slot_a.append(slot)
            o, r, _, _, info = env.step((token, slot))
            rewards.append(r)
            assert not info["invalid"]
        g, rtg = 0.0, []
        for r in reversed(rewards):   # discounted return from each step on
            g = r + cfg.gamma * g
            rtg.append(g)
        ret += rtg[::-1]
    data = stack_observations(obs)
    data["vm_a"] = np.array(vm_a, dtype=np.int64)
    data["slot_a"] = np.array(slot_a, dtype=np.int64)
    data["ret"] = np.array(ret, dtype=np.float32)
    return data


def clone(policy: VMR2LPolicy, cfg: TrainConfig, data: dict[str, np.ndarray],
          rng: np.random.Generator, device, say) -> float:
    """Behaviour cloning on ``data``; returns the last epoch's mean loss."""
    opt = torch.optim.Adam(policy.parameters(), lr=cfg.warmstart_lr, eps=1e-5)
    n = len(data["vm_a"])
    mb_size = cfg.minibatch_size
    policy.train()
    loss_mean = float("nan")
    for epoch in range(cfg.warmstart_epochs):
        perm = rng.permutation(n)
        losses = []
        for start in range(0, n, mb_size):
            mb = perm[start:start + mb_size]
            tb = batch_tensors({k: v[mb] for k, v in data.items()}, device)
            vm = torch.as_tensor(data["vm_a"][mb], device=device)
            slot = torch.as_tensor(data["slot_a"][mb], device=device)
            H = tb["H"]
            mask = torch.ones(len(mb), 2 * H, dtype=torch.bool, device=device)
            mask &= ~tb["host_pad"].repeat_interleave(2, dim=1)
            logp, _, v, _, _ = evaluate_actions(policy, tb, vm, slot, mask)
            ret = torch.as_tensor(data["ret"][mb], device=device)
            # the critic learns the teacher's returns too, so that PPO starts with
            # advantages that are not noise (a random critic undoes the cloning)
            loss = -logp.mean() + 0.5 * ((v - ret) ** 2).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.max_grad_norm)
            opt.step()
            losses.append(float(loss.detach()))
        loss_mean = float(np.mean(losses))
        say(f"warm start ({cfg.warmstart}, {n} migrations): epoch {epoch + 1} loss "
            f"{loss_mean:.3f}")
    return loss_mean
