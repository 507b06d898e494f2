"""The dcsim command end to end: outputs, determinism, executors, sweeps and error paths."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from dcsim.cli import main
from tests.helpers.configs import small_experiment

SMALL = small_experiment("small", seed=7, seeds=2, requests=400,
                         warmup={"requests": 50},
                         allocators=["random", "first_fit",
                                     {"name": "best_fit", "options": {"score": "max"}}])

VOLATILE = ["wall_time_s", "mean_decision_s"]


def write(tmp_path: Path, cfg: dict, name: str = "exp.yaml") -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return p


def invoke(*args: str):
    return CliRunner().invoke(main, [str(a) for a in args])


def ok(*args: str):
    r = invoke(*args)
    assert r.exit_code == 0, r.output + (r.stderr or "")
    return r


def summary(out: Path) -> pd.DataFrame:
    return pd.read_parquet(out / "summary.parquet").drop(columns=VOLATILE)


def requests(out: Path) -> pd.DataFrame:
    df = pd.read_parquet(out / "requests").drop(columns=["decision_s"])
    df["allocator"] = df["allocator"].astype(str)
    df["seed"] = df["seed"].astype(int)
    return df.sort_values(["allocator", "seed", "id"]).reset_index(drop=True)


def test_run_writes_the_documented_layout(tmp_path):
    """summary, hive-partitioned requests/timeseries, resolved config and manifest."""
    out = tmp_path / "out"
    ok("run", write(tmp_path, SMALL), "--out", out)
    s = pd.read_parquet(out / "summary.parquet")
    assert len(s) == 6 and set(s["allocator"]) == {"random", "first_fit", "best_fit(score=max)"}
    for col in ["experiment", "seed", "received", "accepted", "acceptance_ratio", "util_cpu",
                "util_mem", "mean_concurrent", "wall_time_s"]:
        assert col in s.columns
    assert (s["received"] == 350).all()
    assert s["acceptance_ratio"].between(0, 1).all() and s["util_cpu"].between(0, 1).all()
    r = pd.read_parquet(out / "requests")
    assert len(r) == 6 * 400
    assert (out / "requests" / "allocator=first_fit" / "seed=1").is_dir()
    assert r.loc[r["accepted"], "n_servers"].eq(1).all()
    assert pd.read_parquet(out / "timeseries")["util_cpu"].between(0, 1).all()
    assert yaml.safe_load((out / "experiment.yaml").read_text())["name"] == "small"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["runs_finished"] == manifest["runs_planned"] == 6
    assert not list(out.rglob(".*tmp*")), "temporary files left behind"
    numba = importlib.util.find_spec("numba") is not None
    assert manifest["kernels"] == ("numba" if numba else "numpy")
    assert manifest["first_fit_scan_after_s"] == (0.36 if numba else None)
    assert (manifest["versions"]["numba"] is not None) == numba


def test_the_manifest_says_numpy_ran_the_lookahead(tmp_path, monkeypatch):
    monkeypatch.setenv("DCSIM_KERNELS", "numpy")
    out = tmp_path / "out"
    ok("run", write(tmp_path, SMALL), "--out", out, "--seeds", 1)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["kernels"] == "numpy" and manifest["first_fit_scan_after_s"] is None


def test_every_allocator_sees_the_same_requests(tmp_path):
    """Within a seed, the request stream does not depend on the allocator."""
    out = tmp_path / "out"
    ok("run", write(tmp_path, SMALL), "--out", out)
    r = requests(out)
    cols = ["id", "arrival", "duration", "cpu", "mem"]
    first = r[(r.allocator == "random") & (r.seed == 0)][cols].reset_index(drop=True)
    other = r[(r.allocator == "best_fit(score=max)") & (r.seed == 0)][cols].reset_index(drop=True)
    pd.testing.assert_frame_equal(first, other)
    seed1 = r[(r.allocator == "random") & (r.seed == 1)][cols].reset_index(drop=True)
    assert not first["arrival"].equals(seed1["arrival"])


def test_same_seed_same_rows_and_jobs_2_matches_serial(tmp_path):
    """Re-running, and running on a 2-process pool, reproduce summary and request rows."""
    cfg = write(tmp_path, SMALL)
    ok("run", cfg, "--out", tmp_path / "a")
    ok("run", cfg, "--out", tmp_path / "b")
    ok("run", cfg, "--out", tmp_path / "c", "--jobs", "2")
    for other in ("b", "c"):
        pd.testing.assert_frame_equal(summary(tmp_path / "a"), summary(tmp_path / other))
        pd.testing.assert_frame_equal(requests(tmp_path / "a"), requests(tmp_path / other))


def test_seeds_and_set_override_the_file(tmp_path):
    """--seeds and --set dotted.key=value change the resolved config."""
    out = tmp_path / "out"
    ok("run", write(tmp_path, SMALL), "--out", out, "--seeds", "1",
       "--set", "workload.requests=120", "--set", "allocators=[first_fit]")
    s = pd.read_parquet(out / "summary.parquet")
    assert len(s) == 1 and s["received"].iloc[0] == 70
    assert yaml.safe_load((out / "experiment.yaml").read_text())["seeds"] == 1


def test_matrix_sweeps_keys_and_adds_columns(tmp_path):
    """matrix: runs every combination and records each swept value in its own column."""
    cfg = dict(SMALL, seeds=1, allocators=["first_fit"],
               matrix={"workload.arrival.rate": [2, 8], "topology.hosts": [2, 4]})
    out = tmp_path / "out"
    ok("run", write(tmp_path, cfg), "--out", out)
    s = pd.read_parquet(out / "summary.parquet")
    assert sorted(zip(s["rate"], s["hosts"], strict=True)) == [(2, 2), (2, 4), (8, 2), (8, 4)]
    r = pd.read_parquet(out / "requests")
    assert set(r["rate"]) == {2, 8}


def test_rerun_resumes_and_refuses_a_changed_config(tmp_path):
    """Finished runs are kept on a re-run with --resume (a re-run without it is refused, so
    old rows are never reused silently); other configs need --overwrite or another --out."""
    cfg = write(tmp_path, SMALL)
    out = tmp_path / "out"
    ok("run", cfg, "--out", out)
    before = {p: p.stat().st_mtime_ns for p in (out / "requests").rglob("*.parquet")}
    r = invoke("run", cfg, "--out", out, "--seeds", "3")
    assert r.exit_code == 1 and "--resume" in r.stderr and "run the other 3" in r.stderr
    ok("run", cfg, "--out", out, "--seeds", "3", "--resume")
    after = {p: p.stat().st_mtime_ns for p in (out / "requests").rglob("*.parquet")}
    assert all(after[p] == t for p, t in before.items()) and len(after) == 9
    r = invoke("run", cfg, "--out", out, "--set", "workload.requests=100")
    assert r.exit_code == 1 and "--overwrite" in r.stderr
    ok("run", cfg, "--out", out, "--set", "workload.requests=100", "--overwrite")
    assert (pd.read_parquet(out / "summary.parquet")["received"] == 50).all()


def test_validate_reports_the_run_count(tmp_path):
    """validate checks without running and says how many runs the file expands to."""
    r = ok("validate", write(tmp_path, SMALL))
    assert "6 runs" in r.output


def test_plugins_lists_builtins():
    """dcsim plugins lists the built-in allocators and their package."""
    r = ok("plugins")
    assert "first_fit" in r.output and "[dcsim]" in r.output
    allocators, _, schedulers = r.output.partition("schedulers:")
    assert "first_fit" in allocators and "sjf" not in allocators
    assert "  sjf  [dcsim]" in schedulers and "knob: float = 0.5" in schedulers


def _error(tmp_path, cfg=None, *extra):
    path = write(tmp_path, cfg) if isinstance(cfg, dict) else cfg
    r = invoke("run", path, "--out", tmp_path / "err", *extra)
    assert r.exit_code == 1, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    assert "Traceback" not in r.output + r.stderr
    return lines[0]


def test_error_unknown_field(tmp_path):
    """A misspelt key names the field path."""
    msg = _error(tmp_path, dict(SMALL, warmpu={"requests": 3}))
    assert "warmpu" in msg and "exp.yaml" in msg


def test_error_bad_value(tmp_path):
    """A bad value names the nested field."""
    cfg = json.loads(json.dumps(SMALL))
    cfg["workload"]["arrival"]["rate"] = -1
    assert "workload.arrival.rate" in _error(tmp_path, cfg)


def test_error_bad_kernel_choice(tmp_path, monkeypatch):
    """A bad DCSIM_KERNELS (the lookahead kernels' switch) fails before any run."""
    monkeypatch.setenv("DCSIM_KERNELS", "fastest")
    msg = _error(tmp_path, dict(SMALL))
    assert "DCSIM_KERNELS='fastest'" in msg and "auto, numpy, numba" in msg
    assert not (tmp_path / "err").exists()


def test_error_unknown_allocator(tmp_path):
    """An unknown allocator lists the available ones."""
    msg = _error(tmp_path, dict(SMALL, allocators=["frist_fit"]))
    assert "unknown allocator 'frist_fit'" in msg and "first_fit" in msg


def test_error_bad_allocator_option(tmp_path):
    """A bad allocator option names allocators.N.options.key."""
    msg = _error(tmp_path, dict(SMALL, allocators=[{"name": "best_fit", "options": {"x": 1}}]))
    assert "allocators.0.options.x" in msg


def test_error_missing_trace_column(tmp_path):
    """A trace without a mapped column names the file and the column."""
    trace = tmp_path / "t.csv"
    pd.DataFrame({"arrival": [1.0, 2.0], "duration": [1.0, 1.0], "cpu": [1, 2]}).to_csv(
        trace, index=False)
    cfg = dict(SMALL, workload={"trace": {"path": str(trace), "columns": {"mem": "memory"}}})
    msg = _error(tmp_path, cfg)
    assert "t.csv" in msg and "memory" in msg


def test_error_unreadable_topology(tmp_path):
    """A topology file that does not exist or does not parse is named."""
    cfg = dict(SMALL, topology={"kind": "file", "path": str(tmp_path / "nope.json")})
    assert "nope.json" in _error(tmp_path, cfg)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    cfg = dict(SMALL, topology={"kind": "file", "path": str(bad)})
    assert "bad.json" in _error(tmp_path, cfg)


def test_error_yaml_syntax_names_the_line(tmp_path):
    """Broken YAML names the line."""
    p = tmp_path / "broken.yaml"
    p.write_text("name: x\nseeds: [1, 2\n")
    assert "line" in _error(tmp_path, p)


def test_error_missing_config_file(tmp_path):
    """A config path that does not exist is one line, not a traceback."""
    assert "nope.yaml" in _error(tmp_path, tmp_path / "nope.yaml")


def test_failed_run_leaves_no_partial_files(tmp_path, monkeypatch):
    """A run that crashes mid-way leaves neither its parquet files nor temporaries."""
    from dcsim.allocators.single import FirstFitAllocator

    calls = {"n": 0}
    orig = FirstFitAllocator.allocate

    def flaky(self, request, view):
        calls["n"] += 1
        if calls["n"] > 300:
            raise RuntimeError("allocator crashed")
        return orig(self, request, view)

    monkeypatch.setattr(FirstFitAllocator, "allocate", flaky)
    out = tmp_path / "out"
    cfg = dict(SMALL, seeds=1, allocators=["random", "first_fit"],
               metrics={"flush_rows": 10}, workload=dict(SMALL["workload"], batch_size=50))
    r = invoke("run", write(tmp_path, cfg), "--out", out)
    assert r.exit_code != 0
    assert not list((out / "requests").glob("allocator=first_fit/**/*.parquet"))
    assert not list(out.rglob(".*tmp*"))
    s = pd.read_parquet(out / "summary.parquet")
    assert list(s["allocator"]) == ["random"]  # the finished run is kept
    assert json.loads((out / "manifest.json").read_text())["runs_finished"] == 1


def test_import_trace_writes_a_replayable_table(tmp_path):
    """import-trace converts a raw trace into a standard table that a workload replays."""
    raw = Path(__file__).parent / "data" / "traces"
    src = next(raw.glob("*azure*2020*.csv"))
    out = tmp_path / "az.parquet"
    r = ok("import-trace", "azure2020", src, out)
    assert "requests ->" in r.output
    table = pd.read_parquet(out)
    assert {"id", "arrival", "duration", "cpu", "mem"} <= set(table.columns)
    assert table["arrival"].is_monotonic_increasing
    cfg = dict(SMALL, seeds=1, allocators=["first_fit"],
               workload={"trace": {"path": str(out), "scale": {"cpu": 8, "mem": 16}}})
    ok("run", write(tmp_path, cfg), "--out", tmp_path / "o")
    assert len(pd.read_parquet(tmp_path / "o" / "requests")) == len(table)


def test_import_trace_rejects_a_wrong_file(tmp_path):
    """A file that is not the named trace is one clear line, and no output is left."""
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    r = invoke("import-trace", "alibaba2018", bad, tmp_path / "x.csv")
    assert r.exit_code == 1 and "bad.csv" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not list(tmp_path.glob("*x*"))


def test_resolved_config_is_written_and_runs_again(tmp_path):
    """experiment.yaml has every default filled in and is itself a valid experiment."""
    out = tmp_path / "out"
    ok("run", write(tmp_path, SMALL), "--out", out)
    resolved = yaml.safe_load((out / "experiment.yaml").read_text())
    assert resolved["topology"]["oversubscription"] == {"rack": 1.0, "pod": 1.0}
    assert resolved["allocators"][2]["label"] == "best_fit(score=max)"
    ok("validate", out / "experiment.yaml")


def test_swept_key_never_overwrites_a_results_column(tmp_path):
    """Sweeping topology.server.cpu gives a column topology_server_cpu; cpu stays the demand."""
    cfg = dict(SMALL, seeds=1, allocators=["first_fit"],
               matrix={"topology.server.cpu": [8, 16]})
    out = tmp_path / "out"
    ok("run", write(tmp_path, cfg), "--out", out)
    r = pd.read_parquet(out / "requests")
    assert set(r["topology_server_cpu"]) == {8, 16}
    assert r["cpu"].between(1, 4).all()


def test_matrix_over_seeds_is_refused(tmp_path):
    """Replications are seeds:, not a sweep."""
    assert "matrix.seeds" in _error(tmp_path, dict(SMALL, matrix={"seeds": [1, 2]}))


def test_a_sweep_point_never_reuses_an_unswept_run(tmp_path):
    """Run ids hash the sweep values: adding a matrix does not silently reuse old rows."""
    out = tmp_path / "out"
    cfg = dict(SMALL, seeds=1, allocators=["first_fit"])
    ok("run", write(tmp_path, cfg), "--out", out)
    swept = dict(cfg, matrix={"workload.arrival.rate": [5, 6]})
    r = invoke("run", write(tmp_path, swept, "swept.yaml"), "--out", out)
    assert r.exit_code == 1 and "--overwrite" in r.stderr


def test_negative_seed_is_a_config_error(tmp_path):
    """seed must be >= 0."""
    assert "seed" in _error(tmp_path, dict(SMALL, seed=-1))


def test_unknown_allocator_names_the_file_and_field(tmp_path):
    """The unknown-allocator message says where in which file."""
    msg = _error(tmp_path, dict(SMALL, allocators=["first_fit", "nope"]))
    assert "exp.yaml: allocators.1.name: unknown allocator 'nope'" in msg


def test_topology_file_is_found_beside_the_experiment(tmp_path, monkeypatch):
    """A relative topology path resolves against the experiment file's folder."""
    import shutil

    exp_dir = tmp_path / "exp"
    exp_dir.mkdir()
    shutil.copy(Path(__file__).parent / "data" / "tiny.json", exp_dir / "tiny.json")
    cfg = dict(SMALL, seeds=1, allocators=["first_fit"],
               topology={"kind": "file", "path": "tiny.json"})
    monkeypatch.chdir(tmp_path)
    ok("run", write(exp_dir, cfg), "--out", tmp_path / "out")


def test_matrix_zips_comma_separated_keys(tmp_path):
    """A key 'a,b' sweeps a and b together: [[x1, y1], [x2, y2]] is two points, not four."""
    cfg = dict(SMALL, seeds=1, allocators=["first_fit"],
               matrix={"topology.server.cpu,workload.arrival.rate": [[8, 2], [16, 4]]})
    out = tmp_path / "out"
    ok("run", write(tmp_path, cfg), "--out", out)
    s = pd.read_parquet(out / "summary.parquet")
    assert sorted(zip(s["topology_server_cpu"], s["rate"], strict=True)) == [(8, 2), (16, 4)]
    bad = dict(cfg, matrix={"topology.server.cpu,workload.arrival.rate": [[8, 2], [16]]})
    assert "each value must be a list of 2" in _error(tmp_path, bad)


@pytest.mark.parametrize("jobs, sig", [("1", "SIGINT"), ("2", "SIGTERM")])
def test_interrupted_run_keeps_every_finished_run(tmp_path, jobs, sig):
    """Ctrl-C or SIGTERM mid-experiment: the summary lists exactly the runs committed on
    disk (also those that finished while the pool shut down) and no temporary file is left."""
    import signal
    import subprocess
    import sys
    import time

    cfg = dict(SMALL, seeds=4, workload=dict(SMALL["workload"], requests=15000))
    out = tmp_path / "out"
    p = subprocess.Popen(
        [sys.executable, "-m", "dcsim", "run", str(write(tmp_path, cfg)), "--out", str(out),
         "--jobs", jobs],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.time() + 60
    while time.time() < deadline and len(list((out / "runs").glob("*.json"))) < 1:
        time.sleep(0.1)
    p.send_signal(getattr(signal, sig))
    p.communicate(timeout=120)
    assert p.returncode != 0
    committed = {f.stem for f in (out / "runs").glob("*.json")}
    assert 1 <= len(committed) < 12
    assert set(pd.read_parquet(out / "summary.parquet")["run_id"]) == committed
    assert json.loads((out / "manifest.json").read_text())["runs_finished"] == len(committed)
    assert not list(out.rglob(".*tmp*"))


# ---------------------------------------------------------------------------- reschedule
def test_reschedule_prints_fr_and_writes_migrations(tmp_path):
    """`dcsim reschedule` on a synthetic mapping: FR falls, the summary line says so, and
    migrations.parquet has one row per migration reported."""
    import json

    from dcsim.vm.synthetic import synthetic_preset

    mapping = tmp_path / "m.json"
    mapping.write_text(json.dumps(synthetic_preset("small", 3)))
    out = tmp_path / "out"
    r = ok("reschedule", mapping, "--algorithm", "greedy", "--mnl", "5", "--out", out)
    line = r.output.strip().splitlines()[-1]
    before, after = (float(x) for x in re.findall(r"FR (\S+) -> (\S+) with", line)[0])
    n = int(re.search(r"with (\d+) migrations", line).group(1))
    assert after <= before and 0 <= n <= 5
    summary_json = json.loads((out / "summary.json").read_text())
    assert summary_json["migrations"] == n and summary_json["fr_after"] == pytest.approx(after,
                                                                                       abs=1e-4)
    assert len(pd.read_parquet(out / "migrations.parquet")) == n


def test_reschedule_errors_are_one_line(tmp_path):
    mapping = Path(__file__).parent / "data" / "vmr" / "tiny.json"
    for args, msg in [(["-a", "nope"], "unknown rescheduler 'nope'"),
                      (["-a", "mip", "--option", "time_limt=1"], "options.time_limt")]:
        r = invoke("reschedule", mapping, *args)
        assert r.exit_code == 1 and msg in r.stderr and "Traceback" not in r.output
    r = invoke("reschedule", Path(__file__).parent / "data" / "vmr" / "bad_cpu.json")
    assert r.exit_code == 1 and "bad_cpu.json" in r.stderr


def test_import_trace_offers_every_importer(tmp_path):
    """Every importer is a FORMAT of import-trace, so the CLI cannot lag behind the library;
    the Nara authors' tables convert too."""
    from dcsim.cli import import_trace_cmd
    from dcsim.workload.trace_import import trace_formats

    fmt = next(p for p in import_trace_cmd.params if p.name == "fmt")
    assert sorted(fmt.type.choices) == sorted(trace_formats())
    assert {"azure2017", "alibaba2018", "azure2020", "alibaba2018_containers",
            "azure2020_vmtypes"} <= set(fmt.type.choices)
    raw = Path(__file__).parent / "data" / "traces"
    for name, src, opts in [
            ("alibaba2018_containers", "alibaba2018_container_meta_head.csv", []),
            ("azure2020_vmtypes", "azure2020_vm_types_head.csv", ["--option", "machine_id=16"])]:
        out = tmp_path / f"{name}.csv"
        r = ok("import-trace", name, raw / src, out, *opts)
        assert "requests ->" in r.output
        assert {"cpu", "mem"} <= set(pd.read_csv(out).columns)
