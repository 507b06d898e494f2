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
