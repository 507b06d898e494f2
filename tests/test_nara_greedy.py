"""Nara's greedy choice is computed in float64, where the shipped policies' ties and gaps
lie decades apart, so the chosen servers do not depend on the BLAS build or the processor
(in float32 they did: the suite's recorded rows changed on a GPU machine's numpy)."""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

import numpy as np
import pytest

import dcsim.allocators.multi.learned as learned
from dcsim.allocators.multi.learned import float64_weights, greedy_server, policy_logits
from dcsim.tie_break import TIE_TOL_FLOAT64, greedy_argmax
from tests import golden
from tests.helpers.learned import random_weights


@functools.cache
def _decisions(name: str) -> list[tuple]:
    """Every greedy decision (float64 weights, architecture, layout, observation) of the
    reduced shipped experiment ``name`` (run once per test process)."""
    seen = []

    def spy(w64, arch, layout, obs):
        seen.append((w64, arch, layout, obs))
        return greedy_server(w64, arch, layout, obs)

    with pytest.MonkeyPatch.context() as mp, tempfile.TemporaryDirectory() as d:
        mp.setattr(learned, "greedy_server", spy)
        golden.run_reduced(name, Path(d))
    return seen


@pytest.mark.parametrize("name", ["nara_optical_learned_scaled", "nara_learned"])
def test_shipped_policies_ties_and_gaps_lie_far_from_the_tolerance(name):
    """The tie rule's premise, on the shipped policies' real decisions: every finite logit
    lies either within 1/20 of the float64 tolerance of the best (a tie: rounding) or at
    least 20x the tolerance below it (a true gap), so another machine's rounding cannot
    move one across."""
    decisions = _decisions(name)
    assert len(decisions) > 300
    near = 0
    for w64, arch, layout, obs in decisions:
        z = policy_logits(w64, arch, layout, obs)
        f = z[np.isfinite(z)]
        rel = (f.max() - f) / max(abs(f.max()), 1.0)
        near += rel[(rel > TIE_TOL_FLOAT64 / 20) & (rel < TIE_TOL_FLOAT64 * 20)].size
    assert near == 0, f"{near} logits within 20x of the tie tolerance"


def test_the_choice_survives_another_machines_rounding():
    """Noise of 1e-11 relative on the float64 logits (far above float64's rounding) never
    changes a greedy choice of a shipped policy; noise of float32's size does change some
    under the float32 rule, which is what the float64 inference is for."""
    rng = np.random.default_rng(0)
    decisions = _decisions("nara_optical_learned_scaled")
    moved32 = 0
    for w64, arch, layout, obs in decisions:
        z = policy_logits(w64, arch, layout, obs)
        chosen = greedy_argmax(z, rtol=TIE_TOL_FLOAT64, atol=TIE_TOL_FLOAT64)
        for _ in range(3):
            noisy = z * (1 + rng.uniform(-1e-11, 1e-11, z.shape))
            assert greedy_argmax(noisy, rtol=TIE_TOL_FLOAT64, atol=TIE_TOL_FLOAT64) == chosen
        noisy32 = z * (1 + rng.uniform(-7e-6, 7e-6, z.shape))
        moved32 += greedy_argmax(noisy32) != greedy_argmax(z)
    assert moved32 > 0


def test_float64_and_float32_inference_agree_up_to_float32_rounding():
    pytest.importorskip("gymnasium")  # the learn extra's environment builds the observation
    from dcsim.allocators.multi.learned import Architecture
    from dcsim.learn.nara.env import NaraEnv

    env = NaraEnv(requests=8)
    env.reset(seed=3)
    o = env.observer.observe(env.partial, env.view)
    arch = Architecture(node_features=o["nodes"].shape[1], edge_features=o["edges"].shape[1],
                        global_features=o["globals"].shape[0])
    w = random_weights(arch, seed=1)
    z32 = policy_logits(w, arch, env.layout, o)
    z64 = policy_logits(float64_weights(w), arch, env.layout, o)
    assert z32.dtype == z64.dtype == np.float64
    fin = np.isfinite(z64)
    assert np.array_equal(fin, np.isfinite(z32))
    np.testing.assert_allclose(z32[fin], z64[fin], rtol=1e-4, atol=1e-4)
    assert not np.array_equal(z32[fin], z64[fin])  # the two precisions really differ
