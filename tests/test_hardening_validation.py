"""Issue #34, second round, items 6-10: inputs that were accepted though wrong, sidecars read
without checking, ``validate`` saying ok where ``run`` fails, Ctrl-C during start-up, and
misleading messages. Each case is one line naming the field, file or line, a non-zero exit
and no traceback (or the correct result)."""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner

from dcsim.cli import main


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


# ---------------------------------------------------------------- item 6
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


# ---------------------------------------------------------------- item 10 (traces)
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


# ---------------------------------------------------------------- item 7
def _sidecar(tmp_path: Path, name: str, change) -> Path:
    import json
    import shutil

    src = Path("dcsim/learn/checkpoints") / f"{name}.npz"
    dst = tmp_path / f"{name}.npz"
    shutil.copy(src, dst)
    meta = json.loads(src.with_suffix(".json").read_text())
    change(meta)
    dst.with_suffix(".json").write_text(json.dumps(meta))
    return dst


def _refused_checkpoint(load, path: Path, *needles):
    import pytest

    from dcsim.errors import ConfigError

    with pytest.raises(ConfigError) as e:
        load(path)
    msg = str(e.value)
    assert str(path.with_suffix(".json")) in msg or str(path) in msg, msg
    for n in needles:
        assert n in msg, msg
    assert len(msg) < 1000
    return msg


def test_shipped_checkpoints_all_load():
    from dcsim.allocators.multi.learned import checkpoint as nara
    from dcsim.reschedulers.vmr2l import checkpoint as vmr2l
    from dcsim.schedulers.deeprm import load_checkpoint as deeprm

    assert len(nara.shipped_checkpoints()) >= 3 and vmr2l.shipped_checkpoints()
    for p in nara.shipped_checkpoints().values():
        nara.load_checkpoint(p)
    for p in vmr2l.shipped_checkpoints().values():
        vmr2l.load_checkpoint(p)
    deeprm(Path("dcsim/learn/checkpoints/deeprm.npz"))


def test_nara_sidecar_fields_are_checked(tmp_path):
    from types import SimpleNamespace

    import pytest

    from dcsim.allocators.multi.learned.checkpoint import load_checkpoint as load
    from dcsim.errors import ConfigError

    name = "nara_alpha_uniform"
    _refused_checkpoint(load, _sidecar(tmp_path, name, lambda m: m.update(format_version=99)),
                        "format_version: 99 is not 1")
    _refused_checkpoint(load, _sidecar(tmp_path, name,
                                       lambda m: m["architecture"].update(activation="tanh")),
                        "architecture.activation: 'tanh' is not 'relu'")
    _refused_checkpoint(load, _sidecar(tmp_path, name,
                                       lambda m: m["features"].update(ratio_clip=5)),
                        "features.ratio_clip: 5 is not 10.0")
    _refused_checkpoint(load, _sidecar(tmp_path, name,
                                       lambda m: m["features"].update(resources=["gpu"])),
                        "features.resources: 1 resources give")
    _refused_checkpoint(load, _sidecar(tmp_path, name,
                                       lambda m: m["features"].update(version=7)),
                        "features.version: 7 is not one of")
    # resources of the right number but other names: refused against the topology
    ck = load(_sidecar(tmp_path, name, lambda m: m["features"].update(resources=["gpu", "mem"])))
    with pytest.raises(ConfigError, match=r"features.resources: the policy was trained on "
                                          r"\['gpu', 'mem'\], but topology 'a' has"):
        ck.check_topology(SimpleNamespace(name="a", resources=("cpu", "mem")))
    ck.check_topology(SimpleNamespace(name="a", resources=("gpu", "mem")))


def test_vmr2l_sidecar_fields_are_checked(tmp_path):
    from dcsim.reschedulers.vmr2l.checkpoint import load_checkpoint as load

    name = "vmr2l_production"
    _refused_checkpoint(load, _sidecar(tmp_path, name,
                                       lambda m: m["features"].update(version=7)),
                        "features.version: 7 is not 1")
    _refused_checkpoint(load, _sidecar(tmp_path, name,
                                       lambda m: m["features"].update(resources=["gpu"])),
                        "features.resources: ['gpu'] is not ['cpu', 'mem']")
    _refused_checkpoint(load, _sidecar(tmp_path, name,
                                       lambda m: m["architecture"].update(activation="relu")),
                        "architecture.activation: 'relu' is not 'gelu (erf)'")


def test_long_sidecar_values_are_cut_in_messages(tmp_path):
    from dcsim.allocators.multi.learned.checkpoint import load_checkpoint as load

    _refused_checkpoint(load, _sidecar(tmp_path, "nara_alpha_uniform",
                                       lambda m: m["features"].update(version=[1] * 60_000)),
                        "more characters")
    msg = _refused_checkpoint(load, _sidecar(tmp_path, "nara_alpha_uniform",
                                             lambda m: m["architecture"].update(layers=60_000)),
                              "the arrays do not match the architecture", "missing")
    assert len(msg) < 600


# ---------------------------------------------------------------- item 8
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


# ---------------------------------------------------------------- item 9 (start-up)
def _interrupt(args, ready, env=None, timeout=60.0):
    """Start ``python -m dcsim ARGS``, wait until ``ready()``, send SIGINT; (rc, stderr)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    p = subprocess.Popen([sys.executable, "-m", "dcsim", *map(str, args)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, **(env or {})})
    try:
        end = time.monotonic() + timeout
        while not ready() and time.monotonic() < end and p.poll() is None:
            time.sleep(0.05)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=timeout)
    finally:
        p.kill()
    return p.returncode, err


def test_ctrl_c_during_startup_imports_is_one_line(tmp_path):
    """The ``dcsim`` program (:func:`dcsim.cli.program`, the console script's entry) on a
    slow disk: its first import of one of dcsim's own modules takes its time. Ctrl-C then
    is one line and status 130, not an import's traceback. ``import dcsim`` itself installs
    no handler."""
    import signal
    import subprocess
    import sys
    import time

    marker = tmp_path / "importing"
    script = tmp_path / "slow_disk.py"
    script.write_text(
        "import pathlib, signal, sys, time\n"
        "import dcsim.cli\n"
        "assert signal.getsignal(signal.SIGINT) is signal.default_int_handler\n"
        "class SlowDisk:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.startswith('dcsim.'):\n"
        f"            pathlib.Path({str(marker)!r}).touch()\n"
        "            time.sleep(30)\n"
        "sys.meta_path.insert(0, SlowDisk())\n"
        "sys.argv = ['dcsim', '--version']\n"
        "dcsim.cli.program()\n")
    p = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        end = time.monotonic() + 60
        while not marker.exists() and time.monotonic() < end and p.poll() is None:
            time.sleep(0.05)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
    finally:
        p.kill()
    assert marker.exists(), err
    assert (p.returncode, err.strip()) == (130, "interrupted"), err


def test_ctrl_c_during_a_command_is_one_line(tmp_path):
    import os

    fifo = tmp_path / "exp.yaml"
    os.mkfifo(fifo)
    held = []

    def reading():  # the command has opened the config: opening the writing end succeeds
        try:
            held.append(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            return False
        return True

    try:
        rc, err = _interrupt(["validate", fifo], reading)
    finally:
        for fd in held:
            os.close(fd)
    assert held
    assert (rc, err.strip()) == (130, "interrupted"), err


# ---------------------------------------------------------------- item 10 (the rest)
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


def test_a_name_registered_twice_by_one_package_says_so(monkeypatch):
    import types

    import pytest

    from dcsim import Allocator, hookimpl, plugins
    from dcsim.errors import PluginError

    class A(Allocator):
        name = "twice_test"

        def allocate(self, request, view):
            return 0

    class B(A):
        name = "twice_test"

    def module(*classes):
        mod = types.ModuleType("fake_twice")

        @hookimpl
        def register_allocators(register):
            for c in classes:
                register(c)

        mod.register_allocators = register_allocators
        return mod

    class EP:
        def __init__(self, name, mod):
            self.name, self._mod = name, mod
            self.dist = types.SimpleNamespace(name="dcsim-bad")

        def load(self):
            return self._mod

    for eps in ([EP("bad", module(A, B))], [EP("bad1", module(A)), EP("bad2", module(B))]):
        monkeypatch.setattr(plugins, "entry_points",
                            lambda group, eps=eps: eps if group == "dcsim" else [])
        plugins.reset()
        try:
            with pytest.raises(PluginError) as e:
                plugins.registered("allocator")
        finally:
            plugins.reset()
        assert "registered twice by the same package, 'dcsim-bad'" in str(e.value)
        assert "by 'dcsim-bad' and by 'dcsim-bad'" not in str(e.value)
