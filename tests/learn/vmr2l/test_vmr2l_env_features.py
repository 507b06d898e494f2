"""dcsim/VMR2L-v0 updates its features after each migration for the two hosts it touched
(issue #37): the arrays must equal a full recomputation, bit for bit, whatever the moves."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("gymnasium")

from dcsim.learn.vmr2l.env import VMR2LEnv  # noqa: E402
from dcsim.reschedulers.vmr2l import observe  # noqa: E402


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), preset=st.sampled_from(["small", "production_small"]),
       hosts=st.integers(4, 24), steps=st.integers(1, 40))
def test_incremental_features_equal_a_full_rebuild(seed, preset, hosts, steps):
    env = VMR2LEnv(preset=preset, hosts=hosts, mnl=steps)
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    done, moved = False, 0
    while not done:
        vm = int(rng.choice(np.flatnonzero(env.vm_mask())))
        legal = np.flatnonzero(env.slot_mask(vm))
        slot = int(rng.choice(legal)) if rng.random() < 0.9 else int(rng.integers(2 * hosts))
        obs, reward, done, _, info = env.step((vm, slot))
        moved += info["moved"]
        hf, vf = observe(env.state, env.tokens)
        assert np.array_equal(env.features()[0], hf)
        assert np.array_equal(env.features()[1], vf)
        assert np.array_equal(obs["hosts"][:len(hf)], hf)
        assert np.array_equal(obs["vms"][:len(vf)], vf)
        assert info["fragment"] == env.state.fragment()
        assert info["fragment_rate"] == env.state.fragment_rate()


def test_double_numa_vms_are_covered():
    """The presets above hold double-NUMA VMs, so the property test moves them too."""
    env = VMR2LEnv(preset="production_small", hosts=16, mnl=1)
    env.reset(seed=0)
    assert env.state.vm_double[env.tokens].any() and (~env.state.vm_double[env.tokens]).any()
