"""Bad input is one line naming the field, file or line, a non-zero exit and no traceback
(or the correct result): numbers that would poison results, requests larger than the
cluster, traces and mappings that are malformed, output paths that cannot be written,
``validate`` failing where ``run`` would, and topology files that are not silently fixed."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from dcsim.cli import main

QUICKSTART = Path(__file__).parents[1] / "experiments" / "quickstart.yaml"


def _host(hid: str, status: str = "ACTIVE") -> dict:
    numa = [{"node": j, "total_cpu": 8, "free_cpu": 8, "memory_huge_total_mb": 1024,
             "memory_huge_free_mb": 1024} for j in (0, 1)]
    return {"node_id": hid, "status": status, "numa": numa}


def _tiny(**change) -> dict:
    doc = json.loads((Path(__file__).parent / "data" / "tiny.json").read_text())
    for k, v in change.items():
        v(doc) if callable(v) else doc.__setitem__(k, v)
    return doc


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


def test_a_topology_too_large_to_build_is_refused():
    from tests.helpers.cli import invoke

    r = invoke("validate", QUICKSTART, "--set",
               "topology={kind: flat, servers: 1000000000000, server: {cpu: 4, mem: 4}}")
    assert r.exit_code == 1 and "1,000,000,000,000 servers" in r.output


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


def cli(*args, env=None):
    return CliRunner().invoke(main, [str(a) for a in args], env=env)


def refused(r, *needles):
    """``r`` failed with one ``error:`` line holding every needle, and no traceback."""
    out = r.output  # stdout and stderr, interleaved
    assert r.exit_code not in (0, None), out
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert "Traceback" not in out, out
    lines = [ln for ln in out.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, out
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def experiment(tmp_path: Path, workload: dict, **extra) -> Path:
    cfg = {"name": "t", "seed": 1,
           "topology": {"kind": "flat", "servers": 4, "server": {"cpu": 16, "mem": 64}},
           "workload": workload, "allocators": ["first_fit"], **extra}
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def trace(tmp_path: Path, text: str | bytes, name="t.csv") -> dict:
    p = tmp_path / name
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text)
    return {"trace": {"path": name}}


HEADER = "arrival,duration,cpu,mem\n"


def test_header_only_trace_is_refused(tmp_path):
    exp = experiment(tmp_path, trace(tmp_path, HEADER))
    for cmd in ("validate", "run"):
        refused(cli(cmd, exp, *(["--out", tmp_path / "o"] if cmd == "run" else [])),
                "workload.trace.path: t.csv has no requests")


def test_request_above_the_whole_cluster_is_refused_unless_opted_in(tmp_path):
    rows = HEADER + "0,1,4,8\n1,1,4,8\n2,1,500,8\n3,1,900,8\n"
    exp = experiment(tmp_path, trace(tmp_path, rows))
    refused(cli("validate", exp), "workload.trace:", "2 of 4 requests",
            "row 3, cpu 500 > 64", "largest server has cpu 16", "oversized: reject")
    w = trace(tmp_path, rows)
    w["trace"]["oversized"] = "reject"
    exp = experiment(tmp_path, w)
    r = cli("run", exp, "--out", tmp_path / "o", "--seeds", "1")
    assert r.exit_code == 0, r.output
    import pandas as pd

    s = pd.read_parquet(tmp_path / "o" / "summary.parquet")
    assert (int(s["received"].iloc[0]), int(s["accepted"].iloc[0])) == (4, 2)


def test_request_spanning_servers_within_the_cluster_is_accepted(tmp_path):
    # above one server (16 cpu) but within the cluster (64): a multi-server allocator's
    exp = experiment(tmp_path, trace(tmp_path, HEADER + "0,1,40,8\n"))
    assert cli("validate", exp).exit_code == 0


def test_synthetic_demand_above_the_cluster_is_refused(tmp_path):
    w = {"requests": 10, "arrival": {"process": "poisson", "rate": 1},
         "duration": {"dist": "constant", "value": 1},
         "demand": {"cpu": {"dist": "uniform_int", "low": 1, "high": 1000}}}
    refused(cli("validate", experiment(tmp_path, w)), "workload.demand.cpu:",
            "up to 1000", "cpu (64", "largest server has 16")
    w["demand"]["cpu"]["max"] = 16
    assert cli("validate", experiment(tmp_path, w)).exit_code == 0


def test_shipped_experiments_stay_valid():
    for f in sorted(Path("experiments").glob("*.yaml")):
        if "train" in f.name:  # training configs, not experiments
            continue
        r = cli("validate", f)
        assert r.exit_code == 0, (f, r.output)


def test_inf_arrival_names_the_row(tmp_path):
    exp = experiment(tmp_path, trace(tmp_path, HEADER + "0,1,1,1\ninf,1,1,1\n"))
    refused(cli("validate", exp), "row 2", "'arrival' is not a finite number (inf)")


def test_non_utf8_trace_names_file_line_and_byte(tmp_path):
    body = (HEADER + "0,1,1,1\n").encode() + b"1,1,1,1\n2,1,\xe9,1\n"
    exp = experiment(tmp_path, trace(tmp_path, body))
    refused(cli("validate", exp), "t.csv: not UTF-8 text (line 4, byte", "iconv")


def test_import_trace_refuses_empty_files(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    for fmt in ("alibaba2018", "azure2020", "alibaba2018_containers", "azure2020_vmtypes"):
        refused(cli("import-trace", fmt, empty, tmp_path / "o.csv"),
                f"empty.csv: the file is empty (0 bytes); nothing to import as {fmt}")
    header = tmp_path / "h.csv"
    header.write_text("vmId,vmTypeId,priority,starttime,endtime,core,memory\n")
    refused(cli("import-trace", "azure2020", header, tmp_path / "o.csv"),
            "h.csv: no requests to import as azure2020 (0 rows read)")
    assert not (tmp_path / "o.csv").exists()


def test_import_trace_option_of_the_wrong_type_names_the_option(tmp_path):
    src = tmp_path / "batch_task.csv"
    src.write_text("t1,1,j1,1,Terminated,0,10,100,0.5\n")
    refused(cli("import-trace", "alibaba2018", src, tmp_path / "o.csv", "--option",
                "expand_instances=maybe"),
            "option expand_instances: expected true or false, got 'maybe'")
    refused(cli("import-trace", "alibaba2018", src, tmp_path / "o.csv", "--option",
                "statuses=5"), "option statuses: expected a list of names", "got 5")
    r = cli("import-trace", "alibaba2018", src, tmp_path / "o.csv", "--option",
            "expand_instances=true")
    assert r.exit_code == 0, r.output


def test_malformed_vm_mapping_fails_in_validate_as_in_run(tmp_path):
    (tmp_path / "bad.json").write_text('{"hosts": 5}')
    trace_csv = Path("traces/azure2017_dev_slice.csv").resolve()
    for mode, extra in (("reschedule", {"vm": {"mapping": {"path": "bad.json"}, "mnl": 5},
                                        "reschedulers": ["greedy"]}),
                        ("vm_online", {"vm": {"mapping": {"path": "bad.json"},
                                              "workload": {"trace": {"path": str(trace_csv)}}},
                                       "placers": ["best_fit"]})):
        cfg = tmp_path / f"{mode}.yaml"
        cfg.write_text(yaml.safe_dump({"name": "v", "mode": mode, **extra}))
        a = refused(cli("validate", cfg), "bad.json: missing 'cluster_list'")
        b = refused(cli("run", cfg, "--out", tmp_path / mode))
        assert a == b


def test_bad_kernel_choice_fails_in_validate_as_in_run(tmp_path):
    env = {"DCSIM_KERNELS": "bogus"}
    a = refused(cli("validate", "experiments/quickstart.yaml", env=env),
                "DCSIM_KERNELS='bogus': expected one of")
    b = refused(cli("run", "experiments/quickstart.yaml", "--out", tmp_path / "q", env=env))
    assert a == b


def test_set_with_an_empty_key_part_says_so():
    for item in (".=1", "a..b=1", "workload.=3"):
        refused(cli("validate", "experiments/quickstart.yaml", "--set", item),
                f"--set {item!r}: the key", "is malformed (an empty name between dots)")


def test_duplicate_topology_resources_are_refused_naming_the_field(tmp_path):
    import json

    (tmp_path / "topo.json").write_text(json.dumps({
        "directed": False, "multigraph": False, "graph": {},
        "nodes": [{"id": "s0", "kind": "server", "cpu": 4, "mem": 4},
                  {"id": "t0", "kind": "switch", "tier": 1}],
        "links": [{"source": "s0", "target": "t0", "capacity": 10}]}))
    cfg = {"name": "d", "topology": {"kind": "file", "path": "topo.json",
                                     "resources": ["cpu", "cpu"]},
           "workload": {"requests": 5, "arrival": {"process": "poisson", "rate": 1},
                        "duration": {"dist": "constant", "value": 1},
                        "demand": {"cpu": {"dist": "constant", "value": 1}}},
           "allocators": ["first_fit"]}
    path = tmp_path / "d.yaml"
    path.write_text(yaml.safe_dump(cfg))
    refused(cli("validate", path),
            "topology.resources: 'cpu' listed more than once; resource names must be distinct")
    cfg["topology"]["resources"] = ["cpu"]
    path.write_text(yaml.safe_dump(cfg))
    assert cli("validate", path).exit_code == 0
