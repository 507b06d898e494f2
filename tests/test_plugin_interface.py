"""One interface shape across the policy kinds (issue #50 item 3): the item first and the
read-only view last, ``view`` by name, ``setup`` the once-per-run hook, departures and
failures offered to every kind whose mode has them; old shapes still work, with a
DeprecationWarning naming the new one."""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest

from dcsim.allocators import Allocator
from dcsim.gpu_allocators import GpuAllocator, ScoredAllocator
from dcsim.placers import Placer
from dcsim.schedulers import Scheduler
from dcsim.vm.model import VM, Host, MappingState
from dcsim.vm.view import MappingView


def state_with_free(free_cpu, cap=44):
    """Hosts of ``cap`` cores per NUMA whose free cpu is ``free_cpu[h][j]`` (one filler VM
    on each NUMA)."""
    hosts = [Host(f"h{h}", (cap, cap), (10**6, 10**6)) for h in range(len(free_cpu))]
    vms, place = [], []
    for h, row in enumerate(free_cpu):
        for j, f in enumerate(row):
            if cap - f > 0:
                vms.append(VM(f"fill{h}{j}", cap - f, 0))
                place.append((h, j))
    return MappingState(hosts, vms, place)


def params(cls: type, method: str) -> list[str]:
    return list(inspect.signature(getattr(cls, method)).parameters)


@pytest.mark.parametrize(("cls", "method", "item"), [
    (Allocator, "allocate", "request"), (Placer, "place", "vm"),
    (GpuAllocator, "allocate", "pod"),
])
def test_every_decision_takes_the_item_then_the_view(cls, method, item):
    assert params(cls, method) == ["self", item, "view"]


@pytest.mark.parametrize("cls", [Allocator, Placer, GpuAllocator, Scheduler])
def test_every_policy_kind_has_setup_taking_the_view_first(cls):
    assert params(cls, "setup")[:2] == ["self", "view"]


@pytest.mark.parametrize("cls", [Allocator, Placer, GpuAllocator])
def test_departures_and_failures_reach_every_kind_whose_mode_has_them(cls):
    assert params(cls, "released")[-1] == "view"
    assert params(cls, "failed") == params(cls, "repaired") == ["self", "kind", "index", "view"]


def test_a_placer_in_the_old_order_warns_and_still_places():
    with pytest.warns(DeprecationWarning, match=r"place\(state, vm\) is the old argument "
                                                r"order; write place\(vm, view\)"):
        class Old(Placer):
            name = "old_first_fit"

            def place(self, state, vm):
                ok = state.fit_options(vm).ravel()
                return None if not ok.any() else divmod(int(ok.argmax()), 2)

    from dcsim.placers.builtin import FirstFit

    vm = VM("v", 4, 1)
    view = MappingView(state_with_free([[3, 8], [16, 16]]))
    assert Old().place(vm, view) == FirstFit().place(vm, view) == (0, 1)


def test_a_gpu_allocator_in_the_old_order_warns_and_still_allocates():
    with pytest.warns(DeprecationWarning, match=r"allocate\(cluster, pod\) is the old "
                                                r"argument order; write allocate\(pod, view\)"):
        class Old(GpuAllocator):
            name = "old_gpu"

            def allocate(self, cluster, pod):
                return (int(np.flatnonzero(cluster.feasible(pod))[0]), ())

    seen = []

    class Cluster:
        def feasible(self, pod):
            seen.append(pod)
            return np.array([False, True])

    assert Old().allocate("pod", Cluster()) == (1, ())
    assert seen == ["pod"]


def test_a_scored_allocator_in_the_old_order_warns():
    with pytest.warns(DeprecationWarning, match=r"score\(cluster, pod\)"):
        class Old(ScoredAllocator):
            name = "old_scored"

            def score(self, cluster, pod, idx):
                return np.zeros(len(idx))


def test_a_scheduler_with_reset_warns_and_setup_calls_it():
    with pytest.warns(DeprecationWarning, match=r"reset\(\) is the old name of the "
                                                r"once-per-run hook; write setup\(view\)"):
        class Old(Scheduler):
            name = "old_sched"
            calls = 0

            def reset(self):
                type(self).calls += 1

            def choose(self, view):
                return 0

    Old().setup(None)
    assert Old.calls == 1


def test_a_rescheduler_gets_a_read_only_view_and_the_old_shape_a_copy():
    from dcsim.reschedulers import Rescheduler
    from dcsim.vm.model import Migration

    seen = []

    class New(Rescheduler):
        name = "new_resched"

        def reschedule(self, view, mnl):
            seen.append(type(view).__name__)
            with pytest.raises(AttributeError):
                view.apply  # noqa: B018 - nothing that changes the mapping is reachable
            state = view.copy()
            return [Migration(0, 1, 0)] if state.reason(Migration(0, 1, 0)) is None else []

    with pytest.warns(DeprecationWarning, match=r"reschedule\(state, mnl\) is the old "
                                                r"shape; write reschedule\(view, mnl\)"):
        class Old(Rescheduler):
            name = "old_resched"

            def reschedule(self, state, mnl):
                seen.append(type(state).__name__)
                state.apply(Migration(0, 1, 0), 1)  # its own copy: the run's is untouched
                return [Migration(0, 1, 0)]

    base = state_with_free([[40, 44], [44, 44]])
    a, b = New().run(base, 1), Old().run(base, 1)
    assert seen == ["MappingView", "MappingState"]
    assert a.fr_after == b.fr_after and base.vm_host.tolist() == [0]


def test_new_shapes_warn_nothing():
    with warnings.catch_warnings():
        warnings.simplefilter("error")

        class New(Placer):
            name = "new_placer"

            def place(self, vm, view):
                return None

        class NewGpu(GpuAllocator):
            name = "new_gpu"

            def allocate(self, pod, view):
                return None

        class NewSched(Scheduler):
            name = "new_sched"

            def setup(self, view):
                pass

            def choose(self, view):
                return 0

        import dcsim.gpu_allocators.builtin  # noqa: F401 - the built-ins load silently
        import dcsim.placers.builtin  # noqa: F401
        import dcsim.schedulers.builtin  # noqa: F401
        import dcsim.schedulers.deeprm  # noqa: F401
