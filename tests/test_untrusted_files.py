"""Files dcsim did not write, read as a user would be handed them (issue #47, item 7): a
Parquet trace whose pandas metadata is corrupt replays like a clean one; a manifest or a run
record nested 200,000 deep, and a summary whose ``allocator`` column is empty, are one line
naming the file, never a traceback. So are YAML alias bombs and configs that are not UTF-8,
and a checkpoint whose sizes or sidecar fields are out of bounds (the shipped ones all
load)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from tests.helpers.cli import invoke, ok
from tests.helpers.configs import small_experiment

CFG = small_experiment("untrusted", seed=3, seeds=2, requests=200,
                       allocators=["random", "first_fit"])
DEEP = "[" * 200_000 + "]" * 200_000


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("untrusted")
    exp = tmp / "exp.yaml"
    exp.write_text(yaml.safe_dump(CFG, sort_keys=False))
    ok("run", exp, "--out", tmp / "ref")
    return tmp / "ref"


def copy(src: Path, tmp_path: Path) -> Path:
    out = tmp_path / "out"
    shutil.copytree(src, out)
    return out


def one_line(r, *pieces):
    assert r.exit_code == 1 and "Traceback" not in r.output, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.output
    for p in pieces:
        assert p in lines[0], lines[0]


def test_a_trace_with_corrupt_pandas_metadata_replays_like_a_clean_one(tmp_path):
    table = pa.table({"arrival": [0.0, 0.5, 1.0, 2.0], "duration": [1.0, 2.0, 1.0, 3.0],
                      "cpu": [1.0, 2.0, 1.0, 3.0], "mem": [1.0, 1.0, 2.0, 2.0]})
    pq.write_table(table, tmp_path / "clean.parquet")
    meta = {**(table.schema.metadata or {}), b"pandas": b"{not json"}
    pq.write_table(table.replace_schema_metadata(meta), tmp_path / "corrupt.parquet")
    outs = []
    for name in ("clean", "corrupt"):
        cfg = {**CFG, "name": "trace", "workload": {"trace": {"path": f"{name}.parquet"}}}
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
        ok("run", tmp_path / f"{name}.yaml", "--out", tmp_path / name)
        outs.append(tmp_path / name)
    clean, corrupt = (pd.read_parquet(o / "requests").drop(columns="run_id", errors="ignore")
                      .sort_values(["allocator", "seed", "id"]).reset_index(drop=True)
                      for o in outs)
    assert len(clean) == 2 * 2 * 4
    pd.testing.assert_frame_equal(clean.drop(columns=["decision_s"], errors="ignore"),
                                  corrupt.drop(columns=["decision_s"], errors="ignore"))


def test_a_manifest_nested_deep_is_one_line(finished, tmp_path):
    out = copy(finished, tmp_path)
    (out / "manifest.json").write_text(DEEP)
    one_line(invoke("report", out), "manifest.json: unreadable (maximum recursion depth")


def test_a_run_record_nested_deep_is_one_line(finished, tmp_path):
    out = copy(finished, tmp_path)
    rec = sorted((out / "runs").glob("*.json"))[0]
    rec.write_text(DEEP)
    one_line(invoke("report", out), f"{rec.name}: unreadable (maximum recursion depth")


def test_a_summary_with_an_empty_allocator_column_is_one_line(finished, tmp_path):
    out = copy(finished, tmp_path)
    s = pd.read_parquet(out / "summary.parquet")
    s["allocator"] = None
    s.to_parquet(out / "summary.parquet")
    one_line(invoke("report", out), "summary.parquet: column 'allocator' is empty in 4 of "
                                    "its 4 rows")


QUICKSTART = Path(__file__).parents[1] / "experiments" / "quickstart.yaml"


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


def _nara_copy(tmp_path: Path, name: str, **arch) -> Path:
    src = Path(__file__).parents[1] / "dcsim" / "learn" / "checkpoints" / "nara_alpha_uniform"
    meta = json.loads(src.with_suffix(".json").read_text())
    meta["architecture"].update(arch)
    (tmp_path / f"{name}.npz").write_bytes(src.with_suffix(".npz").read_bytes())
    (tmp_path / f"{name}.json").write_text(json.dumps(meta))
    return tmp_path / f"{name}.npz"


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
