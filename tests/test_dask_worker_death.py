"""A Dask worker that dies (``os._exit`` in a plugin, a signal, the out-of-memory killer)
costs exactly the run it was running, as on the local process pool
(tests/test_resume.py::test_a_worker_that_dies_fails_only_its_own_run): that run is
recorded in failures.jsonl as ``WorkerDied``, every other run is committed, and
``dcsim run --executor dask`` exits 1 in bounded time instead of hanging (issue #34)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.helpers.configs import small_experiment

pytest.importorskip("distributed")

PLUGIN = "dcsim_dying_allocator"

SOURCE = '''"""An allocator whose process dies on its first request in one seed's runs."""
import os

from dcsim import Allocator, hookimpl
from dcsim.allocators.single import FirstFitAllocator


class Dying(Allocator):
    name = "dying"
    description = "first fit; os._exit(3) on the first request of seed index $DYING_SEED"

    def allocate(self, request, view):
        # the engine hands the allocator run_rngs(seed, index)[1]: spawn key (index, 1)
        if self.rng.bit_generator.seed_seq.spawn_key[0] == int(os.environ.get("DYING_SEED",
                                                                              -1)):
            os._exit(3)
        return FirstFitAllocator(topology=self.topology).allocate(request, view)


@hookimpl
def register_allocators(register):
    register(Dying)
'''

CFG = small_experiment("dask_worker_death", seed=3, seeds=3, requests=200, pods=1, racks=2,
                       hosts=2, allocators=["first_fit", "dying"])


@pytest.fixture
def site(tmp_path) -> Path:
    """The plugin as ``pip install`` would leave it: its module and a dist-info whose
    entry_points.txt names it in group ``dcsim`` (put on the child's PYTHONPATH)."""
    files = {
        f"{PLUGIN}/__init__.py": SOURCE,
        f"{PLUGIN}-0.1.0.dist-info/METADATA":
            "Metadata-Version: 2.1\nName: dcsim-dying-allocator\nVersion: 0.1.0\n",
        f"{PLUGIN}-0.1.0.dist-info/entry_points.txt": f"[dcsim]\ndying = {PLUGIN}\n",
    }
    root = tmp_path / "site"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def dcsim_run(site: Path, *args, dying_seed: int = -1,
              timeout: float = 120) -> subprocess.CompletedProcess:
    """``dcsim run ARGS`` in a process of its own (killed, failing the test, after
    ``timeout`` seconds), with the plugin installed, dying in seed ``dying_seed``'s run."""
    env = dict(os.environ, DYING_SEED=str(dying_seed))
    env["PYTHONPATH"] = os.pathsep.join(
        [str(site), *filter(None, [env.get("PYTHONPATH")])])
    env.pop("DCSIM_PLUGINS", None)
    return subprocess.run([sys.executable, "-m", "dcsim", "run", *map(str, args)], env=env,
                          capture_output=True, text=True, timeout=timeout)


def failures(out: Path) -> list[dict]:
    f = out / "failures.jsonl"
    return [json.loads(x) for x in f.read_text().splitlines()] if f.exists() else []


def committed(out: Path) -> set[str]:
    return {p.stem for p in (out / "runs").glob("*.json")}


def test_a_dying_worker_costs_only_its_own_run(tmp_path, site):
    """The run whose allocator calls os._exit(3) fails as WorkerDied, naming the exit code,
    after the bounded retries; the other five are committed; exit 1 within 120 s. A
    --resume with the plugin fixed runs only that run."""
    config = tmp_path / "exp.yaml"
    config.write_text(yaml.safe_dump(CFG, sort_keys=False))
    out = tmp_path / "out"
    t0 = time.monotonic()
    r = dcsim_run(site, config, "--out", out, "--executor", "dask", "--jobs", "2",
                  dying_seed=1)
    took = time.monotonic() - t0
    assert r.returncode == 1, r.stdout + r.stderr
    assert "error: 1 of 6 runs failed" in r.stderr, r.stderr
    [f] = failures(out)
    assert (f["allocator"], f["seed"], f["error"]) == ("dying", 1, "WorkerDied")
    assert "exit code 3" in f["message"], f["message"]
    assert f["run_id"] not in committed(out) and len(committed(out)) == 5
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["runs_failed"] == 1 and manifest["runs_finished"] == 5
    assert took < 120

    r = dcsim_run(site, config, "--out", out, "--executor", "dask", "--jobs", "2", "--resume")
    assert r.returncode == 0, r.stdout + r.stderr
    assert len(committed(out)) == 6 and not failures(out)


def test_killed_worker_becomes_worker_died_naming_how_it_ended():
    """Dask's KilledWorker is recorded as the local pool's WorkerDied: with the exit code or
    signal the local cluster's Nanny saw, or, on a remote cluster, where to look."""
    from types import SimpleNamespace

    from distributed.scheduler import KilledWorker

    from dcsim.runner.dask_executor import RETRIES, _task_failure

    plan = SimpleNamespace(run_id="dying-s1-x", label="dying", seed=1, params={})
    killed = KilledWorker("dcsim-dying-s1-x-1", SimpleNamespace(address="tcp://10.0.0.5:4000"),
                          RETRIES)
    f = _task_failure(plan, killed, {"tcp://10.0.0.5:4000": -9}, local=True)
    assert f["error"] == "WorkerDied" and f["run_id"] == "dying-s1-x"
    assert "(killed by signal 9 (SIGKILL); os._exit" in f["message"]
    assert f"on each of its {RETRIES + 1} tries" in f["message"]
    f = _task_failure(plan, killed, {}, local=False)
    assert "exit code unknown; see the log of worker tcp://10.0.0.5:4000" in f["message"]
    assert _task_failure(plan, ValueError("x"), {}, local=False)["error"] == "ValueError"
