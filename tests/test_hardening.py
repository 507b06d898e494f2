"""Hostile plugins and bad input (issue #16): what a plugin is given it cannot change, and
what it does to itself it cannot do to other runs."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import time
from pathlib import Path

import numpy as np
import pytest

from dcsim.allocators.single import FirstFitAllocator
from dcsim.modes.loss import Engine
from tests.helpers.sources import ListSource
from tests.helpers.trees import star_topology

QUICKSTART = Path(__file__).parents[1] / "experiments" / "quickstart.yaml"


def _write_demand(request):
    request.demand[:] = 0


def _divide_demand(request):
    d = request.demand
    d /= 2


def _shorten(request):
    request.duration = 0.0


def _drop_attr(request):
    request.attrs["N"] = 0


class Hostile(FirstFitAllocator):
    """First fit that first tries to change the request it was given."""

    name = "hostile_test"

    def __init__(self, action):
        super().__init__()
        self.action = action
        self.refused = 0

    def allocate(self, request, view):
        try:
            self.action(request)
        except (ValueError, TypeError, dataclasses.FrozenInstanceError):
            self.refused += 1
        return super().allocate(request, view)


@pytest.mark.parametrize("action", [_write_demand, _divide_demand, _shorten, _drop_attr])
def test_a_plugin_cannot_change_the_request_it_is_given(action):
    """Writing the demand (in place or through an alias), reassigning a field or editing
    the attributes raises, and the run's records are what the workload asked for."""
    topo = star_topology(n=2, cpu=8, mem=8)
    src = ListSource([1, 2, 3], [5, 5, 5], [[3, 1], [2, 2], [4, 1]], attrs={"N": [1, 2, 3]})
    alloc = Hostile(action)
    rows: dict[str, list] = {}

    def sink(kind, cols):
        if kind == "requests":
            for k, v in cols.items():
                rows.setdefault(k, []).extend(v.tolist() if isinstance(v, np.ndarray) else v)

    Engine(topo, src, alloc, np.random.default_rng(0), None, sink).run()
    assert alloc.refused == 3
    assert rows["cpu"] == [3, 2, 4] and rows["mem"] == [1, 2, 1]
    assert rows["N"] == [1, 2, 3]
    assert [e - s for s, e in zip(rows["arrival"], rows["end"], strict=True)] == [5, 5, 5]


def test_the_workload_keeps_its_own_arrays_writable():
    """Only the engine's view is read-only: the source's arrays are untouched."""
    topo = star_topology(n=1, cpu=8, mem=8)
    src = ListSource([1], [1], [[1, 1]], batch=1)
    Engine(topo, src, FirstFitAllocator(), np.random.default_rng(0)).run()
    assert src.demand.flags.writeable


# --------------------------------------------------------------------------- labels
def test_any_label_gives_readable_results(tmp_path):
    """Labels starting with ``.`` or ``_`` or holding ``/`` still give Parquet files a
    reader finds: every run's rows come back."""
    import pandas as pd

    from tests.helpers.cli import ok

    labels = [".x", "_y", "a/b", "..z", "é (1)"]
    allocs = "[" + ", ".join(f"{{name: first_fit, label: {json.dumps(lab)}}}"
                             for lab in labels) + "]"
    out = tmp_path / "o"
    ok("run", QUICKSTART, "--seeds", "1", "--out", str(out),
       "--set", "workload.requests=200", "--set", "warmup.requests=20",
       "--set", f"allocators={allocs}")
    req = pd.read_parquet(out / "requests")
    assert sorted(req["allocator"].astype(str).unique()) == sorted(labels)
    assert (req.groupby("allocator", observed=True).size() == 200).all()
    assert len(pd.read_parquet(out / "summary.parquet")) == len(labels)


@pytest.mark.parametrize(("label", "why"), [
    ("é" * 130, "too long for a file name: 780 characters"),
    ("a" * 201, "too long for a file name: 201 characters"),
    ("tab\there", "contains a control character"),
], ids=["non_ascii", "ascii", "control"])
def test_labels_that_cannot_name_files_are_refused_by_validate(label, why):
    from tests.helpers.cli import invoke

    r = invoke("validate", QUICKSTART, "--set",
               f"allocators=[first_fit, {{name: best_fit, label: {json.dumps(label)}}}]")
    assert r.exit_code == 1
    assert "allocators.1.label" in r.output and why in r.output
    assert "Traceback" not in r.output


# --------------------------------------------------------------------------- dying runs
def _patch_run(monkeypatch, action):
    """``action(plan)`` runs before every loss-mode run (pool workers are forked, so they
    see the patch)."""
    from dcsim.modes.loss.mode import LossMode

    real = LossMode.build

    def patched(self, spec, plan, *args):
        action(plan)
        return real(self, spec, plan, *args)

    monkeypatch.setattr(LossMode, "build", patched)


def _small(tmp_path: Path, seeds: int = 3) -> Path:
    import yaml

    cfg = yaml.safe_load(QUICKSTART.read_text())
    cfg.update(seeds=seeds, warmup={"requests": 20})
    cfg["workload"]["requests"] = 300
    f = tmp_path / "small.yaml"
    f.write_text(yaml.safe_dump(cfg))
    return f


def _failures(out: Path) -> list[dict]:
    f = out / "failures.jsonl"
    return [json.loads(x) for x in f.read_text().splitlines()] if f.exists() else []


def _committed(out: Path) -> set[str]:
    return {p.stem for p in (out / "runs").glob("*.json")}


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_plugin_calling_sys_exit_fails_only_its_run(tmp_path, monkeypatch, jobs):
    from tests.helpers.cli import invoke

    def exit_4(plan):
        if plan.label == "best_fit" and plan.seed == 1:
            raise SystemExit(4)

    _patch_run(monkeypatch, exit_4)
    out = tmp_path / "o"
    r = invoke("run", _small(tmp_path), "--out", out, "--jobs", jobs)
    assert r.exit_code == 1
    assert "error: 1 of 9 runs failed" in r.stderr and "SystemExit: 4" in r.stderr
    [f] = _failures(out)
    assert (f["allocator"], f["seed"], f["error"]) == ("best_fit", 1, "SystemExit")
    assert len(_committed(out)) == 8


def test_a_worker_that_dies_fails_only_its_own_run(tmp_path, monkeypatch):
    """os._exit in a plugin (what an OOM kill looks like) breaks the pool; the runs that
    were in it run again alone, so only the dying run fails and every other is kept. The
    failure log and runs/ agree; --resume runs only the dead run again."""
    from tests.helpers.cli import invoke, ok

    def die(plan):
        if plan.label == "random" and plan.seed == 0:
            os._exit(3)

    _patch_run(monkeypatch, die)
    out = tmp_path / "o"
    r = invoke("run", _small(tmp_path), "--out", out, "--jobs", "2")
    assert r.exit_code == 1 and "error: 1 of 9 runs failed" in r.stderr
    [f] = _failures(out)
    assert (f["allocator"], f["seed"], f["error"]) == ("random", 0, "WorkerDied")
    assert f["run_id"] not in _committed(out) and len(_committed(out)) == 8
    monkeypatch.undo()
    r = ok("run", _small(tmp_path), "--out", out, "--resume", "--jobs", "2")
    assert "running the other 1" in r.stderr
    assert len(_committed(out)) == 9 and not _failures(out)


def test_a_killed_worker_is_retried_and_the_failure_log_agrees_with_runs(tmp_path,
                                                                        monkeypatch):
    """A worker killed from outside once (kill -9) takes its pool down; its run and the
    others in the pool run again and succeed: no failure is reported for a committed run."""
    import signal

    from tests.helpers.cli import ok

    marker = tmp_path / "killed-once"

    def kill_once(plan):
        if plan.label == "first_fit" and plan.seed == 2 and not marker.exists():
            marker.write_text("x")
            os.kill(os.getpid(), signal.SIGKILL)

    _patch_run(monkeypatch, kill_once)
    out = tmp_path / "o"
    ok("run", _small(tmp_path), "--out", out, "--jobs", "2")
    assert marker.exists() and len(_committed(out)) == 9 and not _failures(out)


def test_a_run_reported_failed_but_committed_is_not_a_failure(tmp_path):
    """Whatever an executor reports, runs/ is the truth: a run whose files were committed
    is neither in failures.jsonl nor counted as failed."""
    from dcsim.runner.execute import run_experiment
    from dcsim.runner.executors import Executor, Outcome, attempt, failure_record
    from dcsim.runner.plan import load_experiment

    class LostResult(Executor):
        def run(self, exp, plans, out):
            for i, plan in enumerate(plans):
                status, payload = attempt(plan, out)
                assert status == "ok"
                yield (Outcome(plan, error=failure_record(plan, RuntimeError("lost")))
                       if i == 0 else Outcome(plan, row=payload))

    exp = load_experiment(_small(tmp_path, seeds=1))
    out = run_experiment(exp, tmp_path / "o", executor=LostResult())
    assert len(_committed(out)) == 3 and not _failures(out)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["runs_failed"] == 0 and manifest["runs_finished"] == 3


# --------------------------------------------------------------------------- bad numbers
@pytest.mark.parametrize(("setting", "says"), [
    ("workload.arrival.rate=.inf", "workload.arrival.rate: Input should be a finite number"),
    ("workload.arrival.rate=1e308", "workload.arrival.rate: 1e+308 is outside [1e-100, "
                                    "1e+100]"),
    ("workload.demand.cpu=.nan", "workload.demand.cpu.constant.value: Input should be a "
                                 "finite number"),
    ("workload.duration.mean=.inf", "workload.duration.mean: Input should be a finite number"),
    ("seed=true", "seed: expected a number, not true"),
    ("topology.pods=true", "pods: expected a number, not true"),
    ("warmup.requests=6000", "warmup.requests: 6000 is not below workload.requests (5000)"),
], ids=["inf_rate", "huge_rate", "nan_demand", "inf_mean", "bool_seed", "bool_int",
        "warmup_past_the_end"])
def test_numbers_that_would_poison_results_are_refused(setting, says):
    from tests.helpers.cli import invoke

    r = invoke("validate", QUICKSTART, "--set", setting)
    assert r.exit_code == 1, r.output
    assert says in r.output and "Traceback" not in r.output
    assert len(r.output.strip().splitlines()) == 1


@pytest.mark.parametrize("jobs", ["0", "-2"])
def test_jobs_below_one_is_refused(jobs, tmp_path):
    from tests.helpers.cli import invoke

    r = invoke("run", QUICKSTART, "--jobs", jobs, "--out", tmp_path / "o")
    assert r.exit_code == 2 and "--jobs" in r.output and not (tmp_path / "o").exists()


@pytest.mark.parametrize(("column", "value"), [("duration", np.inf), ("demand", np.nan),
                                               ("arrival", np.nan), ("bandwidth", -1.0)])
def test_a_workload_yielding_a_bad_number_stops_the_run_naming_the_request(column, value):
    """A trace's inf duration or NaN demand ends the run with one message naming the
    request and the column, instead of writing poisoned metrics."""
    from dcsim.errors import DcsimError

    cols = {"arrival": [1.0, 2.0, 3.0], "duration": [1.0, 1.0, 1.0],
            "demand": [[1.0, 1.0]] * 3, "bandwidth": [0.0, 0.0, 0.0]}
    bad = np.array(cols[column], dtype=float)
    bad[1] = value
    cols[column] = bad
    src = ListSource(cols["arrival"], cols["duration"], cols["demand"], cols["bandwidth"])
    with pytest.raises(DcsimError, match=f"request 1 has {column} "):
        Engine(star_topology(n=1, cpu=8, mem=8), src, FirstFitAllocator(),
               np.random.default_rng(0)).run()


def test_a_window_too_short_for_floats_gives_no_time_average():
    """Arrivals 1e-300 apart: the measured window has no usable length, so the time
    averages are NaN instead of overflowed noise."""
    src = ListSource([1e-300, 2e-300, 3e-300], [1.0, 1.0, 1.0], [[1.0, 1.0]] * 3)
    s = Engine(star_topology(n=1, cpu=8, mem=8), src, FirstFitAllocator(),
               np.random.default_rng(0)).run()
    assert np.isnan(s["util_cpu"]) and np.isnan(s["mean_concurrent"])
    assert s["accepted"] == 3


# --------------------------------------------------------------------------- YAML
def _bomb(levels: int = 8) -> str:
    lines = ["name: bomb", "seed: 1",
             "topology: {kind: flat, servers: 2, server: {cpu: 4, mem: 4}}",
             "a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    lines += ["workload: {requests: 10, arrival: {process: poisson, rate: 1}, demand: {cpu: 1},"
              f" duration: 1, trace: {{path: x.csv, options: *a{levels}}}}}",
              "allocators: [first_fit]"]
    return "\n".join(lines) + "\n"


def test_a_yaml_alias_bomb_is_refused_at_once(tmp_path):
    """A ~750-byte file whose aliases expand to 10^9 values: one line, no expansion."""
    from tests.helpers.cli import invoke

    f = tmp_path / "bomb.yaml"
    f.write_text(_bomb())
    assert f.stat().st_size < 1000
    r = invoke("validate", f)
    assert r.exit_code == 1
    assert "aliases (*name) expand to more than 200,000 values" in r.output


def test_shared_aliases_of_ordinary_size_still_work():
    """experiments/nara_table1.yaml shares its workloads through aliases."""
    from dcsim.runner.plan import load_experiment

    load_experiment(Path(__file__).parents[1] / "experiments" / "nara_table1.yaml")


def test_a_training_config_bomb_is_refused_too(tmp_path):
    from dcsim.errors import ConfigError
    from dcsim.learn.config import read_train_config

    f = tmp_path / "t.yaml"
    f.write_text(_bomb())
    with pytest.raises(ConfigError, match="expand to more than"):
        read_train_config(f, dict)


def test_a_config_that_is_not_utf8_and_an_empty_set_key_are_one_line(tmp_path):
    from tests.helpers.cli import invoke

    f = tmp_path / "latin1.yaml"
    f.write_bytes("name: caf\xe9\n".encode("latin-1"))
    r = invoke("validate", f)
    assert r.exit_code == 1 and "not UTF-8 text (byte 9" in r.output
    r = invoke("validate", QUICKSTART, "--set", "=5")
    assert r.exit_code == 1 and "the key before = is empty" in r.output


# --------------------------------------------------------------------------- sizes
def _nara_copy(tmp_path: Path, name: str, **arch) -> Path:
    src = Path(__file__).parents[1] / "dcsim" / "learn" / "checkpoints" / "nara_alpha_uniform"
    meta = json.loads(src.with_suffix(".json").read_text())
    meta["architecture"].update(arch)
    (tmp_path / f"{name}.npz").write_bytes(src.with_suffix(".npz").read_bytes())
    (tmp_path / f"{name}.json").write_text(json.dumps(meta))
    return tmp_path / f"{name}.npz"


@pytest.mark.parametrize(("arch", "says"), [
    ({"layers": 10**9}, "architecture.layers: 1000000000 is outside [0, 65536]"),
    ({"embed": 17}, "array 'gnn.0.weight' has shape (16, 11), expected (17, 11)"),
], ids=["huge", "mismatch"])
def test_validate_reads_a_checkpoint_and_bounds_its_sizes(tmp_path, arch, says):
    """A sidecar asking for 10^9 layers is refused before anything is allocated, and one
    that disagrees with its arrays is caught by `dcsim validate`, not at run time."""
    from tests.helpers.cli import invoke

    ck = _nara_copy(tmp_path, "policy", **arch)
    exp = Path(__file__).parents[1] / "experiments" / "nara_table1.yaml"
    r = invoke("validate", exp, "--set", f"allocators=[{{name: nara, options: {{checkpoint: "
                                         f"{ck}}}}}]")
    assert r.exit_code == 1 and says in r.output
    assert "allocators.0.options.checkpoint" in r.output


def test_too_many_parameters_are_refused(tmp_path):
    from dcsim.checkpoints import read_arrays
    from dcsim.errors import ConfigError

    with pytest.raises(ConfigError, match="asks for 100,000,000 parameters"):
        read_arrays(tmp_path / "x.npz", {"w": (10_000, 10_000)})


def test_a_topology_too_large_to_build_is_refused():
    from tests.helpers.cli import invoke

    r = invoke("validate", QUICKSTART, "--set",
               "topology={kind: flat, servers: 1000000000000, server: {cpu: 4, mem: 4}}")
    assert r.exit_code == 1 and "1,000,000,000,000 servers" in r.output


# --------------------------------------------------------------------------- first hour
def test_the_readme_first_command_runs_twice_and_shows_the_numbers(tmp_path):
    """README's first command with --resume: a second invocation keeps every run and exits
    0; both end with the headline table and the wall time; off a terminal every finished
    run prints a progress line with an ETA."""
    from tests.helpers.cli import ok

    out = tmp_path / "small"
    args = ("run", QUICKSTART, "--seeds", "2", "--set", "workload.requests=300",
            "--set", "warmup.requests=30", "--out", out, "--resume")
    first = ok(*args)
    progress = [x for x in first.stderr.splitlines() if x.startswith("[")]
    assert progress[0].startswith("[1/6] runs done,") and "ETA" in progress[0]
    assert progress[-1].startswith("[6/6] runs done,") and "ETA" not in progress[-1]
    second = ok(*args)
    assert "resuming: 6 of 6 runs are finished" in second.stderr
    assert not [x for x in second.stderr.splitlines() if x.startswith("[")]
    for r in (first, second):
        assert f"6 runs -> {out} in " in r.stdout
        table = r.stdout.split("mean ± 95 % interval over seeds:\n")[1].splitlines()
        assert table[0].split()[:3] == ["allocator", "acceptance_ratio", "util_cpu"]
        assert [x.split()[0] for x in table[2:5]] == ["random", "first_fit", "best_fit"]
        assert all(x.split()[-1] == "2" for x in table[2:5])  # seeds


def test_queue_mode_writes_a_timeseries_like_every_mode(tmp_path):
    """pd.read_parquet(out / "timeseries") works in queue mode too: one row per step of
    each job set, and the mean utilisation over the steps is the summary's."""
    import pandas as pd

    from tests.helpers.cli import ok

    exp = Path(__file__).parents[1] / "experiments" / "deeprm_load_sweep.yaml"
    out = tmp_path / "q"
    ok("run", exp, "--seeds", "1", "--set", "workload.jobsets=3", "--set",
       "matrix={workload.new_job_rate: [0.5]}", "--set", "schedulers=[sjf, random]",
       "--out", out)
    ts = pd.read_parquet(out / "timeseries")
    summary = pd.read_parquet(out / "summary.parquet").set_index("allocator")
    assert {"jobset", "time", "received", "accepted", "active", "waiting", "util_cpu",
            "util_mem"} <= set(ts.columns)
    for name, g in ts.groupby("allocator", observed=True):
        assert sorted(g["jobset"].unique()) == [0, 1, 2]
        assert (g.groupby("jobset")["time"].min() == 0).all()
        assert g["util_cpu"].between(0, 1).all() and (g["active"] >= 0).all()
        assert g["util_cpu"].mean() == pytest.approx(summary.loc[name, "util_cpu"], abs=1e-9)


def test_ctrl_c_says_what_was_kept_and_how_to_go_on(tmp_path):
    """SIGINT to the whole process group (a terminal's Ctrl-C) during --jobs 2: exit 130
    with one line naming the runs kept and the --resume command; no worker traceback."""
    import signal
    import subprocess
    import sys
    import time

    import yaml

    cfg = yaml.safe_load(QUICKSTART.read_text())
    cfg.update(seeds=4)
    cfg["workload"]["requests"] = 60000
    f = tmp_path / "big.yaml"
    f.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "o"
    p = subprocess.Popen([sys.executable, "-m", "dcsim", "run", str(f), "--out", str(out),
                          "--jobs", "2"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, start_new_session=True,
                         # as from a terminal, even when this test runs in the background
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 90
    while time.time() < deadline and not list((out / "runs").glob("*.json")):
        time.sleep(0.1)
    os.killpg(p.pid, signal.SIGINT)
    text, _ = p.communicate(timeout=120)
    assert p.returncode == 130, text
    kept = len(list((out / "runs").glob("*.json")))
    assert f"interrupted: {kept} of 12 runs are finished and kept in {out}" in text
    assert f"--out {out} --jobs 2 --resume` runs the other {12 - kept}" in text
    assert "Traceback" not in text and "Exception ignored" not in text


# --------------------------------------------------------------------------- one line
def _host(hid: str, status: str = "ACTIVE") -> dict:
    numa = [{"node": j, "total_cpu": 8, "free_cpu": 8, "memory_huge_total_mb": 1024,
             "memory_huge_free_mb": 1024} for j in (0, 1)]
    return {"node_id": hid, "status": status, "numa": numa}


@pytest.mark.parametrize(("doc", "says"), [
    ({"cluster_list": []}, "cluster_list: no host to reschedule on"),
    ({"cluster_list": [{"host_info": [_host("h1", "DISABLED")], "vm_instance": []}]},
     "no host to reschedule on (1 skipped as not in service)"),
    ({"cluster_list": [{"host_info": [_host("h1")], "vm_instance": []}]},
     "no VM to reschedule"),
], ids=["no_clusters", "all_disabled", "no_vms"])
def test_reschedule_on_an_empty_mapping_is_one_line(tmp_path, doc, says):
    from tests.helpers.cli import invoke

    f = tmp_path / "m.json"
    f.write_text(json.dumps(doc))
    r = invoke("reschedule", f)
    assert r.exit_code == 1 and says in r.output and "Traceback" not in r.output


def test_an_out_that_cannot_be_a_directory_is_one_line(tmp_path):
    from tests.helpers.cli import invoke

    blocker = tmp_path / "file"
    blocker.write_text("x")
    r = invoke("run", QUICKSTART, "--out", blocker / "sub", "--set", "workload.requests=50",
               "--set", "warmup.requests=5")
    assert r.exit_code == 1
    assert r.output.strip() == f"error: {blocker / 'sub'}: Not a directory"


def test_a_full_disk_is_one_line_naming_the_file(tmp_path, monkeypatch):
    """A write that fails for lack of space (an OSError with no file name) is reported as
    one line naming the file being written; nothing torn or temporary is left behind."""
    import errno

    from tests.helpers.cli import invoke

    def full(_fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    out = tmp_path / "out"
    r = invoke("run", QUICKSTART, "--out", out, "--set", "workload.requests=50",
               "--set", "warmup.requests=5")
    assert r.exit_code == 1
    assert re.fullmatch(rf"error: {re.escape(str(out))}/[\w.]+: No space left on device",
                        r.output.strip()), r.output
    assert not [p for p in out.rglob("*") if ".tmp" in p.name or p.name.startswith(".tmp")]


def test_naming_path_keeps_a_file_name_already_given(tmp_path):
    from dcsim.errors import naming_path

    with pytest.raises(OSError) as e, naming_path(tmp_path / "x"):
        raise OSError(28, "No space left on device")
    assert e.value.filename == str(tmp_path / "x") and e.value.errno == 28
    with pytest.raises(FileNotFoundError) as e, naming_path(tmp_path / "x"):
        open(tmp_path / "missing" / "y")
    assert e.value.filename == str(tmp_path / "missing" / "y")


def _tiny(**change) -> dict:
    doc = json.loads((Path(__file__).parent / "data" / "tiny.json").read_text())
    for k, v in change.items():
        v(doc) if callable(v) else doc.__setitem__(k, v)
    return doc


@pytest.mark.parametrize(("doc", "says"), [
    (_tiny(directed=True), "directed: true: dcsim's links are undirected"),
    (_tiny(x=lambda d: d["links"].append({"source": "h0", "target": "ghost", "capacity": 1})),
     "link #6: target 'ghost' is not a node"),
    (_tiny(x=lambda d: d["links"].append({"source": "tor0", "target": "h1", "capacity": 5})),
     "link #6: a second link between 'tor0' and 'h1'"),
    (_tiny(x=lambda d: d["nodes"].append({"id": "h2", "kind": "switch", "tier": 1})),
     "node #7: id 'h2' is used twice"),
], ids=["directed", "dangling", "parallel", "duplicate"])
def test_topology_files_are_not_silently_fixed(tmp_path, doc, says):
    from dcsim.errors import ConfigError
    from dcsim.model.topology_io import load_topology

    f = tmp_path / "t.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match=re.escape(says)):
        load_topology(f)


def test_a_wrong_allocator_mapping_names_its_own_field():
    """`options: 5` is reported as options, not as "allocators.0: should be a string"."""
    from tests.helpers.cli import invoke

    r = invoke("validate", QUICKSTART, "--set", "allocators=[{name: best_fit, options: 5}]")
    assert r.exit_code == 1
    assert "allocators.0.options: Input should be a valid dictionary" in r.output


def test_an_interrupt_stops_a_hung_plugin(tmp_path, monkeypatch):
    """A plugin that ignores signals and never returns does not keep `dcsim run --jobs 2`
    alive after SIGINT to the parent alone: its worker is killed after a grace period."""
    import signal
    import threading

    from tests.helpers.cli import invoke

    def hang(plan):
        if plan.label == "random":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            while True:
                time.sleep(0.05)

    _patch_run(monkeypatch, hang)
    out = tmp_path / "o"
    # a process a shell started in the background inherits SIGINT ignored: give this one
    # Python's handler, as dcsim has on a terminal
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Timer(3.0, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        t0 = time.monotonic()
        r = invoke("run", _small(tmp_path), "--out", out, "--jobs", "2")
    finally:
        signal.signal(signal.SIGINT, previous)
    assert r.exit_code == 130 and "interrupted:" in r.stderr
    assert time.monotonic() - t0 < 30  # without the kill: about a minute


def test_the_eta_counts_down_between_runs_and_ignores_resumed_ones():
    """The ETA comes from this invocation's runs and keeps moving between them (it stood
    still for 20 s on a terminal when run costs differed)."""
    from dcsim.runner.progress import ProgressLine

    now = [0.0]
    out = io.StringIO()
    bar = ProgressLine(total=10, before=2, stream=out, tty=False, clock=lambda: now[0])
    bar.update(1)
    bar.update(1)  # two runs kept by --resume: reported at once, no estimate
    assert out.getvalue() == "" and bar.status().endswith("ETA --")
    now[0] = 10.0
    bar.update(1)  # 1 run in 10 s, 7 left: the end is projected at 80 s
    assert out.getvalue() == "[3/10] runs done, 10.0 s elapsed, ETA 1 min 10 s\n"
    now[0] = 40.0
    assert bar.status() == "[3/10] runs done, 40.0 s elapsed, ETA 40.0 s"
    now[0] = 100.0
    assert bar.status().endswith("ETA 0.0 s")  # late: never negative
    now[0] = 110.0
    for _ in range(7):
        bar.update(1)
    assert out.getvalue().splitlines()[-1] == "[10/10] runs done, 1 min 50 s elapsed"


def test_on_a_terminal_the_line_is_redrawn_in_place():
    from dcsim.runner.progress import ProgressLine

    out = io.StringIO()
    with ProgressLine(total=2, before=0, stream=out, tty=True) as bar:
        bar.update(1)
        bar.update(1)
    text = out.getvalue()
    assert text.startswith("\r[0/2] runs done,") and text.endswith("\n")
    assert "\r[2/2] runs done," in text and "\n" not in text[:-1]
