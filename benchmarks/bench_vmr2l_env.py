"""Steps per second of ``dcsim/VMR2L-v0`` on production-like 279-host mappings (issue #37):
the environment as shipped (features updated for the two hosts a migration touches) against
the same environment recomputing every feature at every step (what it did before), on the
same mappings and the same actions, measured in the same run. Resets are not timed.

    python benchmarks/bench_vmr2l_env.py --steps 2000 --repeat 3
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from dcsim.learn.vmr2l.env import REWARD_SCALE, VMR2LEnv
from dcsim.reschedulers.vmr2l import observe, slot_migration


class FullRebuild(VMR2LEnv):
    """The environment's step as it was before issue #37: every feature recomputed from
    the state for each observation, the fragment summed before and after each step and the
    fragment rate summed again (the baseline; the same observations and rewards)."""

    def features(self):
        return observe(self.state, self.tokens)

    def step(self, action):
        token, slot = int(action[0]), int(action[1])
        before = self.state.fragment()
        invalid = not (0 <= token < len(self.tokens)) or not self.slot_mask(token)[slot]
        moved = None
        if not invalid:
            m = slot_migration(self.state, int(self.tokens[token]), slot)
            if m is not None:
                self.state.apply(m, self.t + 1)
                moved = m
        self.t += 1
        after = self.state.fragment()
        info = {"invalid": invalid, "moved": moved is not None, "migration": moved,
                "fragment": after, "fragment_rate": self.state.fragment_rate()}
        return (self._obs(), float((before - after) / REWARD_SCALE),
                self.t >= self.config.mnl, False, info)


def actions(env: VMR2LEnv, rng: np.random.Generator, n: int) -> list[tuple[int, int]]:
    """A legal random action sequence from the env's current state (it is stepped)."""
    out = []
    for _ in range(n):
        vm = int(rng.choice(np.flatnonzero(env.vm_mask())))
        slot = int(rng.choice(np.flatnonzero(env.slot_mask(vm))))
        out.append((vm, slot))
        env.step((vm, slot))
    return out


def same_results(a, b) -> bool:
    """Two step results equal: observation arrays, reward, termination, fragment rate."""
    return (all(np.array_equal(a[0][k], b[0][k]) for k in a[0]) and a[1:4] == b[1:4]
            and a[4]["fragment_rate"] == b[4]["fragment_rate"])


def timed(envs: list[VMR2LEnv], seed: int, acts, chunk: int = 50):
    """Step every env of ``envs`` through ``acts`` from ``reset(seed)``, alternating
    between them every ``chunk`` steps so that machine noise hits all alike: each env's
    total seconds, and whether every step's result was the same in all (compared between
    chunks, untimed; only a chunk's results are kept, so memory stays flat)."""
    for env in envs:
        env.reset(seed=seed)
    seconds = [0.0] * len(envs)
    same = True
    for lo in range(0, len(acts), chunk):
        results = []
        for i, env in enumerate(envs):
            t = time.perf_counter()
            res = [env.step(a) for a in acts[lo:lo + chunk]]
            seconds[i] += time.perf_counter() - t
            results.append(res)
        same = same and all(same_results(a, b) for res in results[1:]
                            for a, b in zip(results[0], res, strict=True))
    return seconds, same


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    cfg = dict(preset="production", mnl=args.steps)
    new, old = VMR2LEnv(**cfg), FullRebuild(**cfg)
    ratios = []
    for r in range(args.repeat):
        new.reset(seed=r)
        acts = actions(new, np.random.default_rng(r), args.steps)
        (t_new, t_old), same = timed([new, old], r, acts)
        ratios.append(t_old / t_new)
        print(f"mapping {r}: {args.steps / t_new:8.0f} steps/s incremental, "
              f"{args.steps / t_old:8.0f} full rebuild, ratio {t_old / t_new:5.2f}, "
              f"same observations and rewards: {same}")
    print(f"median ratio (incremental / full rebuild steps/s): {np.median(ratios):.2f}")


if __name__ == "__main__":
    main()
