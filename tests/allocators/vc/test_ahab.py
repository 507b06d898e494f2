"""AHAB: admission control around an embedder, and the batched KRAKEN it relies on."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dcsim.allocators.vc.ahab import Ahab
from dcsim.allocators.vc.kraken import kraken_embed
from dcsim.allocators.vc.kraken.batch import hose_loads_batch, kraken_embed_batch
from dcsim.errors import ConfigError
from dcsim.model import ClusterState, Request, StateView
from dcsim.model.topologies import build_topology
from dcsim.model.vc import TreeLevels
from dcsim.modes.loss import EngineConfig
from dcsim.workload.facts import WorkloadFacts
from dcsim.workload.spec import build_source
from tests.helpers.engine import run
from tests.helpers.vc import VC_TREE, vc_workload

VC_WORKLOAD = vc_workload()


def simulate(allocator, seed=3, workload=VC_WORKLOAD):
    topo = build_topology(VC_TREE)
    _, summary, rows = run(topo, build_source(workload, topo), allocator,
                           EngineConfig(warmup_requests=20), seed)
    return summary, pd.DataFrame(rows)


def ahab(**options):
    return Ahab(Ahab.parse_options(options), rng=np.random.default_rng(11))


def test_lookahead_zero_behaves_as_its_embedder():
    """ahab with lookahead: 0 accepts exactly what kraken accepts, where kraken puts it."""
    from dcsim.allocators.vc.kraken import Kraken

    _, plain = simulate(Kraken())
    _, wrapped = simulate(ahab(lookahead=0))
    pd.testing.assert_series_equal(plain["accepted"], wrapped["accepted"])
    assert plain["servers"].map(tuple).equals(wrapped["servers"].map(tuple))


def test_admission_control_rejects_some_vcs_its_embedder_could_place():
    """Under overload AHAB turns down embeddable VCs (that is its point) and keeps running."""
    from dcsim.allocators.vc.kraken import Kraken

    s_plain, _ = simulate(Kraken())
    s_ahab, rows = simulate(ahab(sequences=6, lookahead=5))
    assert s_ahab["accepted"] < s_plain["accepted"]
    assert rows["accepted"].any()


class Spy(Ahab):
    """Records, for each decision, whether the embedder alone could place the VC."""

    name = "ahab_spy"

    def allocate(self, request, view):
        n, s, b = int(request.attrs["N"]), request.attrs["S"], request.attrs["B"]
        placeable = kraken_embed(self.levels, view.free[:, 0], view.link_free, n, s, b)
        choice = super().allocate(request, view)
        self.log.append((placeable is not None, choice is not None))
        return choice


def test_never_accepts_what_the_embedder_cannot_place():
    """Every accepted VC was embeddable by the wrapped embedder at that moment."""
    spy = Spy(Spy.parse_options({"sequences": 4, "lookahead": 4}), rng=np.random.default_rng(2))
    spy.log = []
    simulate(spy)
    assert spy.log and not any(acc and not ok for ok, acc in spy.log)
    assert any(ok and not acc for ok, acc in spy.log)  # and it did use its discretion


def test_light_load_shortcut_accepts_without_lookahead():
    """With more than half the compute free, an embeddable VC is accepted outright."""
    topo = build_topology(VC_TREE)
    view = StateView(ClusterState(topo))
    a = ahab()
    view.workload = WorkloadFacts.of(build_source(VC_WORKLOAD, topo))
    a.setup(view)
    a._sample_futures = lambda: pytest.fail("lookahead ran under light load")
    req = Request(0, 0.0, 1.0, np.array([8.0]), 1.0, {"N": 4, "S": 2.0, "B": 1.0})
    assert a.allocate(req, view) is not None


def test_empirical_distributions_need_no_workload_attrs(tmp_path):
    """distributions: empirical resamples seen requests, so a trace without N,S,B dists works;
    distributions: workload on such a workload is a clear error."""
    rng = np.random.default_rng(0)
    n = 120
    trace = pd.DataFrame({
        "arrival": np.cumsum(rng.exponential(0.25, n)),
        "duration": rng.exponential(8, n),
        "N": rng.integers(2, 10, n), "S": rng.choice([1, 2, 4], n),
        "B": rng.choice([1, 2, 4], n),
    })
    trace["cpu"] = trace["N"] * trace["S"]
    trace["bandwidth"] = trace["B"]
    path = tmp_path / "vc.csv"
    trace.to_csv(path, index=False)
    workload = {"trace": {"path": str(path), "columns": {"N": "N", "S": "S", "B": "B"}}}
    summary, rows = simulate(ahab(distributions="empirical", sequences=4, lookahead=4),
                             workload=workload)
    assert summary["received"] > 0 and rows["accepted"].any()
    with pytest.raises(ConfigError, match="distributions: empirical"):
        simulate(ahab(), workload=workload)


def test_labels_name_the_composition():
    """Results label the composition: ahab(kraken), ahab(kraken,empirical)."""
    assert Ahab.label_for(Ahab.Options()) == "ahab(kraken)"
    assert Ahab.label_for(Ahab.Options(distributions="empirical")) == "ahab(kraken,empirical)"
    assert Ahab.label_for(Ahab.Options(paired=True)) == "ahab(kraken,paired)"
    with pytest.raises(ConfigError, match="embed"):
        a = Ahab(Ahab.Options(embed="first_fit"))
        a.setup(StateView(ClusterState(build_topology(VC_TREE))))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(1, 6))
def test_batched_kraken_equals_kraken_row_by_row(seed, k):
    """kraken_embed_batch gives, per row, the embedding kraken_embed gives on that state."""
    topo = build_topology(VC_TREE)
    levels = TreeLevels(topo)
    rng = np.random.default_rng(seed)
    free = rng.integers(0, 9, (k, topo.n_servers)).astype(float)
    lf = np.floor(topo.link_capacity * rng.random((k, topo.n_links)))
    n = rng.integers(1, 14, k)
    s = rng.choice([0.0, 1.0, 2.0, 4.0], k)
    b = rng.choice([0.0, 1.0, 2.0, 4.0], k)
    counts, ok = kraken_embed_batch(levels, free, lf, n, s, b)
    loads = hose_loads_batch(levels, counts, n, b)
    for i in range(k):
        one = kraken_embed(levels, free[i], lf[i], int(n[i]), float(s[i]), float(b[i]))
        assert (one is None) == (not ok[i])
        if one is not None:
            assert np.array_equal(one, counts[i])
            np.testing.assert_allclose(loads[i], levels.hose_loads(one, int(n[i]), b[i]))


def test_paired_futures_accept_whatever_leaves_every_future_embeddable():
    """With common futures (paired), if every future VC still fits after R, the with-R side
    scores exactly R's N*S more, so AHAB accepts; independent futures only add noise."""
    topo = build_topology(VC_TREE)  # 12 hosts x 8 CU, empty: tiny futures always fit
    view = StateView(ClusterState(topo))
    tiny = {**VC_WORKLOAD, "attrs": {**VC_WORKLOAD["attrs"],
                                     "N": {"dist": "uniform_int", "low": 2, "high": 3},
                                     "S": {"dist": "discrete", "values": [1, 2]},
                                     "B": {"dist": "constant", "value": 1}}}
    view.workload = WorkloadFacts.of(build_source(tiny, topo))
    req = Request(0, 0.0, 1.0, np.array([2.0]), 1.0, {"N": 2, "S": 1.0, "B": 1.0})
    decisions = {}
    for paired in (True, False):
        a = ahab(paired=paired, shortcut=None, sequences=4, lookahead=3)
        a.setup(view)
        decisions[paired] = [a.allocate(req, view) is not None for _ in range(40)]
    assert all(decisions[True])
    assert not all(decisions[False])  # the paper's independent halves: noise can reject


def test_an_embedder_with_only_embed_gives_the_same_decisions():
    """AHAB needs nothing of an embedder but ``embed``: a plugin embedder that only
    implements it (default embed_batch row by row, the base's embed_sparse from its dense
    counts, no hints) makes exactly the decisions of the built-in KRAKEN with all its fast
    paths."""
    from dcsim.allocators.vc.embedder import VCAllocator
    from dcsim.allocators.vc.kraken import kraken_embed

    class OnlyEmbed(VCAllocator):
        name = "only_embed"

        def embed(self, free_cpu, link_free, n, s, b):
            return kraken_embed(self.levels, free_cpu, link_free, n, s, b, self.host_link)

    opts = {"host_link": "per_vm_strict", "sequences": 6, "lookahead": 8}
    fast, slow = ahab(**opts), ahab(**opts)
    original_setup = slow.setup

    def setup(view):
        original_setup(view)
        slow.embedder = OnlyEmbed(OnlyEmbed.parse_options({"host_link": "per_vm_strict"}))
        slow.embedder.setup(view)

    slow.setup = setup
    few = {**VC_WORKLOAD, "requests": 90}
    _, want = simulate(fast, workload=few)
    _, got = simulate(slow, workload=few)
    assert type(slow.embedder).embed_sparse is VCAllocator.embed_sparse  # the default one
    assert want["accepted"].any() and not want["accepted"].all()
    pd.testing.assert_frame_equal(got.drop(columns="decision_s"),
                                  want.drop(columns="decision_s"))
