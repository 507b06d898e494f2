"""When first_fit loads its compiled scan (issue #37): only where it pays, never changing a
choice; what the manifest says about it."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from dcsim.allocators.single import FirstFitAllocator
from dcsim.model import ClusterState, Request, StateView
from dcsim.model.topologies import build_topology

numba = importlib.util.find_spec("numba") is not None
FLAT = {"kind": "flat", "servers": 32, "server": {"cpu": 8, "mem": 8}}


@pytest.fixture
def fresh_count(monkeypatch):
    """A fresh process's count, and a budget that the 50th request on 32 servers passes."""
    from dcsim.allocators import single

    monkeypatch.setattr(single, "OWED", [0.0])
    monkeypatch.setattr(FirstFitAllocator, "SCAN_AFTER_S",
                        49.5 * FirstFitAllocator.saving(32))


def choices(ff: FirstFitAllocator, seed: int, n: int) -> tuple[list, list[bool]]:
    state = ClusterState(build_topology(FLAT))
    view = StateView(state)
    rng = np.random.default_rng(seed)
    state.free[:] = rng.integers(0, 9, state.free.shape).astype(float)
    ff.setup(view)
    out, loaded = [], []
    for _ in range(n):
        req = Request(0, 0.0, 1.0, rng.integers(0, 6, 2).astype(float), 0.0, {})
        out.append(ff.allocate(req, view))
        loaded.append(ff._scan is not None)
    return out, loaded


@pytest.mark.skipif(not numba, reason="needs numba (the fast extra)")
def test_auto_loads_the_scan_only_once_it_pays(fresh_count, monkeypatch):
    monkeypatch.setenv("DCSIM_KERNELS", "auto")
    got, loaded = choices(FirstFitAllocator(), 0, 120)
    assert loaded.index(True) == 49 and all(loaded[49:])
    monkeypatch.setenv("DCSIM_KERNELS", "numpy")
    want, never = choices(FirstFitAllocator(), 0, 120)
    assert got == want and not any(never)
    # later first_fit instances of the process have paid for it: loaded at setup
    monkeypatch.setenv("DCSIM_KERNELS", "auto")
    _, again = choices(FirstFitAllocator(), 0, 1)
    assert again == [True]


@pytest.mark.skipif(not numba, reason="needs numba (the fast extra)")
def test_numba_loads_the_scan_at_once(fresh_count, monkeypatch):
    monkeypatch.setenv("DCSIM_KERNELS", "numba")
    _, loaded = choices(FirstFitAllocator(), 1, 3)
    assert all(loaded)


def test_numpy_never_loads_it_and_a_short_auto_run_never_imports_numba(tmp_path):
    """A quickstart-sized run in a fresh process does not import numba at all."""
    import subprocess
    import sys

    code = ("import sys, numpy as np\n"
            "from dcsim.allocators.single import FirstFitAllocator\n"
            "from dcsim.model import ClusterState, Request, StateView\n"
            "from dcsim.model.topologies import build_topology\n"
            f"view = StateView(ClusterState(build_topology({FLAT!r})))\n"
            "ff = FirstFitAllocator(); ff.setup(view)\n"
            "for i in range(1000):\n"
            "    ff.allocate(Request(i, 0.0, 1.0, np.array([1.0, 1.0]), 0.0, {}), view)\n"
            "print('numba' in sys.modules, ff._scan is None)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, env={**__import__("os").environ, "DCSIM_KERNELS": "auto"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "True"]


def test_the_scan_pays_sooner_the_more_servers_numpy_compares():
    """The estimated saving grows with the servers, so a large cluster loads the scan after
    fewer requests: about 200,000 on 64 servers, 30,000 on 40,000, 9,000 on 160,000."""
    after = {n: FirstFitAllocator.SCAN_AFTER_S / FirstFitAllocator.saving(n)
             for n in (64, 40_000, 160_000)}
    assert 150_000 < after[64] < 250_000
    assert 20_000 < after[40_000] < 40_000 and after[160_000] < 10_000
