"""Every result names the code that made it (issue #33), and ``--resume`` never mixes results
of different code: it refuses, naming what changed, and ``--rerun-changed`` runs exactly the
runs whose code changed again."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from dcsim import plugins
from dcsim.results import provenance
from dcsim.runner import fingerprint
from tests.helpers.cli import invoke, ok
from tests.helpers.configs import small_experiment

PLUGIN = "dcsim_least_loaded_rack"
DIST = "dcsim-least-loaded-rack"

SOURCE = '''"""A third-party allocator: the fitting server with the most free cpu."""
import numpy as np

from dcsim import Allocator, hookimpl


class LeastLoaded(Allocator):
    name = "least_loaded_rack"
    description = "the fitting server with the most free cpu"

    def allocate(self, request, view):
        fitting = np.flatnonzero(view.fits(request.demand))
        if fitting.size == 0:
            return None
        return int(fitting[view.free[fitting, 0].argmax()])


@hookimpl
def register_allocators(register):
    register(LeastLoaded)
'''

CFG = small_experiment("provenance", seed=7, seeds=2, requests=150, pods=1, racks=2,
                       hosts=2,
                       allocators=["least_loaded_rack", "first_fit"])


def write_package(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


# ------------------------------------------------------------------------- fingerprints
def test_tree_hash_is_stable_and_sees_every_edit(tmp_path):
    """The same files give the same hash wherever they sit; an edit, a new file or a
    renamed one changes it; compiled Python does not."""
    pkg = write_package(tmp_path / "a" / "pkg", {"__init__.py": "x = 1\n",
                                                 "data/table.csv": "1,2\n"})
    first = provenance.tree_hash(pkg)
    assert provenance.tree_hash(pkg) == first
    same = write_package(tmp_path / "b" / "pkg", {"__init__.py": "x = 1\n",
                                                  "data/table.csv": "1,2\n"})
    assert provenance.tree_hash(same) == first
    write_package(pkg, {"__pycache__/__init__.cpython-311.pyc": "bytecode", "old.pyc": "b"})
    assert provenance.tree_hash(pkg) == first
    (pkg / "__init__.py").write_text("x = 2\n")
    edited = provenance.tree_hash(pkg)
    assert edited != first
    (pkg / "data" / "table.csv").rename(pkg / "data" / "other.csv")
    assert provenance.tree_hash(pkg) not in (first, edited)


def test_dcsim_fingerprint_is_computed_once_and_names_its_source():
    code = provenance.dcsim_code()
    assert provenance.dcsim_code() is code  # cached per process
    assert set(code) == {"version", "commit", "dirty", "source_hash"}
    assert code["source_hash"] == provenance.tree_hash(provenance.PACKAGE_DIR)
    assert len(code["source_hash"]) == 64
    # the checkout these tests run from is a git checkout, unless installed elsewhere
    assert (code["commit"] is None) == (code["dirty"] is None)


def test_git_state_is_none_outside_a_checkout(tmp_path):
    """A folder git does not track (or no git at all) gives None, never an error."""
    write_package(tmp_path, {"mod.py": "x = 1\n"})
    assert provenance.git_state(tmp_path) == {"commit": None, "dirty": None}


def test_git_state_names_the_commit_and_the_edits(tmp_path):
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    write_package(tmp_path, {"pkg/__init__.py": "x = 1\n"})
    try:
        subprocess.run([*git, "init", "-q"], cwd=tmp_path, check=True, capture_output=True)
        subprocess.run([*git, "add", "."], cwd=tmp_path, check=True)
        subprocess.run([*git, "commit", "-qm", "one"], cwd=tmp_path, check=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("no usable git")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True,
                          text=True).stdout.strip()
    assert provenance.git_state(tmp_path / "pkg") == {"commit": head, "dirty": False}
    (tmp_path / "pkg" / "__init__.py").write_text("x = 2\n")
    assert provenance.git_state(tmp_path / "pkg") == {"commit": head, "dirty": True}


def test_library_versions_come_from_metadata():
    libs = provenance.libraries()
    assert list(libs) == list(provenance.LIBRARIES)
    assert libs["numpy"] == importlib.metadata.version("numpy")
    assert provenance.installed_version("no-such-distribution-dcsim") is None


def test_modules_hash_covers_a_package_or_a_module(tmp_path, monkeypatch):
    write_package(tmp_path, {"pkg_x/__init__.py": "from .impl import y\n",
                             "pkg_x/impl.py": "y = 1\n", "single_x.py": "z = 1\n"})
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    provenance.modules_hash.cache_clear()
    pkg, single = provenance.modules_hash(("pkg_x",)), provenance.modules_hash(("single_x",))
    assert None not in (pkg, single) and pkg != single
    assert provenance.modules_hash(("no_such_module_x",)) is None
    (tmp_path / "pkg_x" / "impl.py").write_text("y = 2\n")  # a file beside the entry point
    provenance.modules_hash.cache_clear()
    assert provenance.modules_hash(("pkg_x",)) != pkg
    assert provenance.modules_hash(("single_x",)) == single


def test_code_id_folds_dcsim_plugins_and_libraries():
    libs = {"numpy": "2.0.0", "torch": None}
    plugin = {"kind": "allocator", "name": "x", "distribution": "d", "source_hash": "aa"}
    base = provenance.code_id("h", [plugin], libs)
    assert len(base) == 12 and base == provenance.code_id("h", [plugin], dict(libs))
    assert provenance.code_id("h2", [plugin], libs) != base
    assert provenance.code_id("h", [{**plugin, "source_hash": "bb"}], libs) != base
    assert provenance.code_id("h", [plugin], {**libs, "numpy": "2.0.1"}) != base
    assert provenance.code_id("h", [], libs) != base


def test_what_changed_names_dcsim_a_plugin_and_a_library():
    old = {"code_id": "a", "dcsim": {"version": "0.1.0", "commit": "abc1234def0", "dirty": False,
                                     "source_hash": "1" * 64},
           "libraries": {"numpy": "2.3.1"},
           "plugins": [{"kind": "allocator", "name": "x", "distribution": "d", "version": "0.1",
                        "source_hash": "aa"}]}
    new = {"code_id": "b", "dcsim": {"version": "0.1.0", "commit": "def5678abc0", "dirty": True,
                                     "source_hash": "2" * 64},
           "libraries": {"numpy": "2.4.0"},
           "plugins": [{**old["plugins"][0], "source_hash": "bb"}]}
    assert fingerprint.what_changed(old, new) == [
        ("dcsim's code", " (commit abc1234def -> def5678abc+dirty, source hash "
                         "111111111111 -> 222222222222)"),
        ("allocator 'x' (d 0.1)", ""),
        ("numpy", " (2.3.1 -> 2.4.0)"),
    ]
    changes = fingerprint.code_changes({"r1": {"code": old}, "r2": {}}, {"r1": new, "r2": new},
                                       ["r1", "r2"])
    assert changes.runs == ["r1", "r2"]
    assert changes.describe() == (
        "dcsim's code changed since 1 finished run (commit abc1234def -> def5678abc+dirty, "
        "source hash 111111111111 -> 222222222222); allocator 'x' (d 0.1) changed since 1 "
        "finished run; numpy changed since 1 finished run (2.3.1 -> 2.4.0); 1 finished run "
        "recorded no code fingerprint (made by a dcsim that did not record one)")
    assert not fingerprint.code_changes({"r1": {"code": new}}, {"r1": new}, ["r1"])


# ------------------------------------------------------------------ a plugin, end to end
@pytest.fixture
def plugin_site(tmp_path, monkeypatch):
    """A third-party plugin distribution on sys.path: its module and a dist-info whose
    entry_points.txt names it in group ``dcsim``, as ``pip install`` would leave it."""
    site = write_package(tmp_path / "site", {
        f"{PLUGIN}/__init__.py": SOURCE,
        f"{PLUGIN}-0.1.0.dist-info/METADATA":
            f"Metadata-Version: 2.1\nName: {DIST}\nVersion: 0.1.0\n",
        f"{PLUGIN}-0.1.0.dist-info/entry_points.txt":
            f"[dcsim]\nleast_loaded_rack = {PLUGIN}\n",
    })
    monkeypatch.delenv("DCSIM_PLUGINS", raising=False)
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    plugins.reset()
    fingerprint.reset()
    yield site
    sys.modules.pop(PLUGIN, None)
    plugins.reset()
    fingerprint.reset()


def edit_plugin(site: Path) -> None:
    """Change the allocator's code, and load it as a new ``dcsim run`` process would."""
    path = site / PLUGIN / "__init__.py"
    path.write_text(path.read_text().replace(".argmax()", ".argmin()"))
    sys.modules.pop(PLUGIN, None)
    importlib.invalidate_caches()
    plugins.reset()
    provenance.modules_hash.cache_clear()  # dcsim's own hash stays: its code did not change


def records(out: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in (out / "runs").glob("*.json")}


def stamps(out: Path, label: str) -> dict[Path, int]:
    """Modification times of ``label``'s run records and Parquet files."""
    found = [p for p in (out / "runs").glob(f"{label}-*.json")]
    found += [p for p in out.rglob("*.parquet") if f"allocator={label}" in p.as_posix()]
    return {p: p.stat().st_mtime_ns for p in found}


def test_results_name_the_plugin_and_resume_refuses_changed_code(plugin_site, tmp_path):
    """manifest.json and summary.parquet name the plugin's version and fingerprint; after
    its source changes, --resume refuses naming the allocator and its distribution and
    leaves the directory as it was; --rerun-changed reruns exactly its runs."""
    config = tmp_path / "exp.yaml"
    config.write_text(yaml.safe_dump(CFG, sort_keys=False))
    out = tmp_path / "out"
    ok("run", config, "--out", out)

    manifest = json.loads((out / "manifest.json").read_text())
    [plugin] = manifest["code"]["plugins"]
    assert plugin["kind"] == "allocator" and plugin["name"] == "least_loaded_rack"
    assert plugin["distribution"] == DIST and plugin["version"] == "0.1.0"
    assert plugin["source_hash"] == provenance.modules_hash((PLUGIN,))
    assert manifest["code"]["dcsim"] == provenance.dcsim_code()
    assert manifest["code"]["libraries"]["numpy"] == importlib.metadata.version("numpy")
    summary = pd.read_parquet(out / "summary.parquet")
    ids = dict(zip(summary["run_id"], summary["code_id"], strict=True))
    assert {m["run_id"]: m["code_id"] for m in manifest["runs"]} == ids
    ours = {i for r, i in ids.items() if r.startswith("least_loaded_rack-")}
    builtin = {i for r, i in ids.items() if r.startswith("first_fit-")}
    assert len(ours) == len(builtin) == 1 and ours != builtin
    for run_id, record in records(out).items():
        assert record["code_id"] == record["code"]["code_id"] == ids[run_id]
        used = [p["distribution"] for p in record["code"]["plugins"]]
        assert used == ([DIST] if run_id.startswith("least_loaded_rack-") else [])

    # nothing changed: resume keeps everything
    r = ok("run", config, "--out", out, "--resume")
    assert "resuming: 4 of 4 runs are finished" in r.stderr

    edit_plugin(plugin_site)
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in out.rglob("*") if p.is_file()}
    r = invoke("run", config, "--out", out, "--resume")
    assert r.exit_code == 1
    assert r.stderr.strip() == (
        f"error: {out}: allocator 'least_loaded_rack' ({DIST} 0.1.0) changed since 2 finished "
        "runs; use --overwrite, or --rerun-changed to rerun only the runs whose code changed")
    assert "Traceback" not in r.output + r.stderr
    assert {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in out.rglob("*")
            if p.is_file()} == before

    kept = stamps(out, "first_fit")
    old = records(out)
    r = ok("run", config, "--out", out, "--rerun-changed")
    assert (f"rerunning 2 finished run(s) whose code changed: allocator 'least_loaded_rack' "
            f"({DIST} 0.1.0) changed since 2 finished runs") in r.stderr
    assert "resuming: 2 of 4 runs are finished" in r.stderr
    assert stamps(out, "first_fit") == kept  # the built-in's runs untouched
    new = records(out)
    assert set(new) == set(old)
    for run_id in new:
        if run_id.startswith("first_fit-"):
            assert new[run_id] == old[run_id]
        else:
            assert new[run_id]["code_id"] != old[run_id]["code_id"]
    summary = pd.read_parquet(out / "summary.parquet")
    assert dict(zip(summary["run_id"], summary["code_id"], strict=True)) == {
        k: v["code_id"] for k, v in new.items()}
    manifest = json.loads((out / "manifest.json").read_text())
    assert {m["run_id"]: m["code_id"] for m in manifest["runs"]} == {
        k: v["code_id"] for k, v in new.items()}
    assert manifest["code"]["plugins"][0]["source_hash"] == provenance.modules_hash((PLUGIN,))
    # and now the directory is of one code again
    r = ok("run", config, "--out", out, "--resume")
    assert "running the other 0" in r.stderr


def test_runs_without_a_fingerprint_count_as_changed(tmp_path):
    """Runs finished by a dcsim that recorded no fingerprint are never kept silently."""
    cfg = dict(CFG, allocators=["first_fit"], seeds=1)
    config = tmp_path / "exp.yaml"
    config.write_text(yaml.safe_dump(cfg, sort_keys=False))
    out = tmp_path / "out"
    ok("run", config, "--out", out)
    [path] = (out / "runs").glob("*.json")
    record = json.loads(path.read_text())
    del record["code"], record["code_id"]  # as an older dcsim wrote it
    path.write_text(json.dumps(record))
    r = invoke("run", config, "--out", out, "--resume")
    assert r.exit_code == 1 and r.stderr.strip() == (
        f"error: {out}: 1 finished run recorded no code fingerprint (made by a dcsim that did "
        "not record one); use --overwrite, or --rerun-changed to rerun only the runs whose "
        "code changed")
    ok("run", config, "--out", out, "--rerun-changed")
    assert "code" in json.loads(path.read_text())


def test_a_library_version_change_is_named(tmp_path, monkeypatch):
    cfg = dict(CFG, allocators=["first_fit"], seeds=1)
    config = tmp_path / "exp.yaml"
    config.write_text(yaml.safe_dump(cfg, sort_keys=False))
    out = tmp_path / "out"
    ok("run", config, "--out", out)
    real = provenance.libraries()
    monkeypatch.setattr(provenance, "libraries", lambda: {**real, "numpy": "99.0.0"})
    r = invoke("run", config, "--out", out, "--resume")
    assert r.exit_code == 1
    assert f"numpy changed since 1 finished run ({real['numpy']} -> 99.0.0)" in r.stderr


def test_rerun_changed_and_overwrite_exclude_each_other(tmp_path):
    r = invoke("run", tmp_path / "x.yaml", "--out", tmp_path / "o", "--rerun-changed",
               "--overwrite")
    assert r.exit_code == 2 and "exclude each other" in r.output + r.stderr


def test_dask_workers_report_their_dcsim_source():
    """What the Dask executor asks each worker: its dcsim source hash among the rest."""
    from dcsim.runner.dask_executor import worker_info

    info = worker_info([("first_fit", "allocator")])
    assert info["source_hash"] == provenance.dcsim_code()["source_hash"]
    assert info["missing"] == []


@pytest.mark.skipif(os.name != "posix", reason="fork")
def test_pool_workers_record_the_same_code(tmp_path):
    """Runs on a process pool record the code_id an in-process run records."""
    cfg = dict(CFG, allocators=["first_fit"])
    config = tmp_path / "exp.yaml"
    config.write_text(yaml.safe_dump(cfg, sort_keys=False))
    ok("run", config, "--out", tmp_path / "serial")
    ok("run", config, "--out", tmp_path / "pool", "--jobs", "2")
    serial, pool = records(tmp_path / "serial"), records(tmp_path / "pool")
    assert {k: v["code"] for k, v in serial.items()} == {k: v["code"] for k, v in pool.items()}


def test_dask_workers_record_the_same_code(tmp_path):
    """Runs a remote Dask worker writes and sends back record the code_id a serial run does
    (the records travel as files; a local cluster's workers write them like a pool's)."""
    distributed = pytest.importorskip("distributed")
    import logging

    import dask

    cfg = dict(CFG, allocators=["first_fit"])
    config = tmp_path / "exp.yaml"
    config.write_text(yaml.safe_dump(cfg, sort_keys=False))
    ok("run", config, "--out", tmp_path / "serial")
    with dask.config.set({"distributed.worker.multiprocessing-method": "fork"}), \
            distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                     dashboard_address=None, silence_logs=logging.ERROR) as c:
        ok("run", config, "--out", tmp_path / "dask", "--address", c.scheduler_address)
    serial, remote = records(tmp_path / "serial"), records(tmp_path / "dask")
    assert {k: v["code"] for k, v in serial.items()} == {k: v["code"] for k, v in remote.items()}
    summary = pd.read_parquet(tmp_path / "dask" / "summary.parquet")
    assert set(summary["code_id"]) == {v["code_id"] for v in serial.values()}
