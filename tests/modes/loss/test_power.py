"""Power models and energy accounting (issue #38): hand-worked energies, idle-off, failures,
a cross-check against the utilisation meter, bounds (hypothesis), config errors, results."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from dcsim.allocators.single import FirstFitAllocator, RandomAllocator
from dcsim.cli import main
from dcsim.errors import ConfigError
from dcsim.experiment_sections import parse_failures
from dcsim.model.topologies import build_topology
from dcsim.modes.loss import Engine, EngineConfig
from dcsim.modes.loss.failures import LossFailures
from dcsim.modes.loss.power import build_power
from dcsim.modes.loss.spec import PowerSpec
from dcsim.plugins import get_plugin_class, registered
from tests.helpers.sources import ListSource, random_source

LINEAR = {"model": "linear", "idle_w": 100, "peak_w": 200}
TABLE = {"model": "table", "points": [[0, 100], [0.5, 180], [1, 200]]}


def topo(n=2, cpu=10.0):
    return build_topology({"kind": "flat", "servers": n, "server": {"cpu": cpu, "mem": 10.0}})


def power(topology, base_dir=None, **spec):
    return build_power(PowerSpec.model_validate(spec), topology, base_dir)


def run(topology, source, spec, alloc=None, failures=None, config=None, seed=0):
    rows: dict[str, dict[str, list]] = {}

    def sink(kind, cols):
        for k, v in cols.items():
            rows.setdefault(kind, {}).setdefault(k, []).extend(
                v.tolist() if isinstance(v, np.ndarray) else v)

    eng = Engine(topology, source, alloc or FirstFitAllocator(), np.random.default_rng(seed),
                 config, sink=sink, failures=failures,
                 power=power(topology, **spec) if spec is not None else None)
    return eng, eng.run(), rows


def hand_source():
    """r0: t=0 for 10, cpu 5 (server 0 at 0.5); r1: t=4 for 2, cpu 10 (server 0 lacks it:
    server 1 at 1.0); r2: t=20, cpu 1 (server 0; the window ends at this last arrival)."""
    return ListSource([0.0, 4.0, 20.0], [10.0, 2.0, 1.0], [[5, 1], [10, 1], [1, 1]])


# -------------------------------------------------------------------------- the models
def test_builtin_models_are_registered_plugins():
    assert {"constant", "linear", "table"} <= set(registered("power_model"))
    linear = get_plugin_class("linear", "power_model")
    m = linear(linear.parse_options({"idle_w": 100, "peak_w": 250}))
    assert m.power(np.array([0.0, 0.2, 1.0])).tolist() == [100.0, 130.0, 250.0]
    table = get_plugin_class("table", "power_model")
    m = table(table.parse_options({"points": [[0, 50], [0.5, 150], [1, 160]]}))
    assert m.power(np.array([0.0, 0.25, 0.75, 1.0])).tolist() == [50.0, 100.0, 155.0, 160.0]
    dips = table.parse_options({"points": [[0, 100], [0.5, 90], [1, 200]],
                                "decreasing": "allow"})   # a measured curve that dips
    assert table(dips).power(np.array([0.5])).tolist() == [90.0]
    const = get_plugin_class("constant", "power_model")
    assert const(const.parse_options({"watts": 7})).power(np.zeros(3)).tolist() == [7.0] * 3


@pytest.mark.parametrize("section, message", [
    ({"server": {"model": "linear", "idle_w": 100}}, "power.server.peak_w: Field required"),
    ({"server": {"model": "linear", "idle_w": 300, "peak_w": 200}},
     "peak_w (200) is below idle_w (300)"),
    ({"server": {"model": "linear", "idle_w": -1, "peak_w": 200}}, "power.server.idle_w: "),
    ({"server": {"model": "linear", "idle_w": 1, "peak_w": 2, "x": 1}}, "power.server.x"),
    ({"server": {"model": "table", "points": [[0.1, 1], [1, 2]]}}, "must run from 0 to 1"),
    ({"server": {"model": "table", "points": [[0, 1], [0.5, 2], [0.5, 3], [1, 4]]}},
     "must increase (at 0.5)"),
    ({"server": {"model": "table", "points": [[0, 100], [0.5, 90], [1, 200]]}},
     "the watts fall as the load grows (100 W, then 90 W at utilisation 0.5)"),
    ({"server": {"model": "cubic"}}, "power.server.model: unknown power_model 'cubic'"),
    ({"server": {"idle_w": 1}}, "power.server: needs model"),
    ({"server": LINEAR, "resource": "gpu"}, "power.resource: 'gpu' is not a resource"),
    ({"server": LINEAR, "carbon": {}}, "power.carbon: give either intensity"),
    ({"server": LINEAR, "carbon": {"trace": "none.csv"}}, "power.carbon.trace: no such file"),
    ({"server": LINEAR, "idle_policy": "sleep"}, "power.idle_policy"),
    ({"server": LINEAR, "time_unit_s": 0}, "power.time_unit_s"),
])
def test_bad_power_sections_are_one_line_naming_the_field(tmp_path, section, message):
    r = CliRunner().invoke(main, ["validate", str(_exp(tmp_path, section))])
    assert r.exit_code not in (0, None), r.output
    assert "Traceback" not in r.output
    lines = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and message in lines[0], r.output


def test_power_is_refused_outside_loss_mode(tmp_path):
    cfg = {"name": "t", "mode": "queue", "workload": {"kind": "deeprm", "jobsets": 1},
           "schedulers": ["sjf"], "power": {"server": LINEAR}}
    path = tmp_path / "q.yaml"
    path.write_text(yaml.safe_dump(cfg))
    r = CliRunner().invoke(main, ["validate", str(path)])
    assert r.exit_code != 0, r.output
    assert "power: not used in mode 'queue' (only mode loss reads it)" in r.output, r.output


def _exp(tmp_path, section):
    cfg = {"name": "t", "topology": {"kind": "flat", "servers": 2},
           "workload": {"requests": 10, "arrival": {"process": "poisson", "rate": 1},
                        "duration": 1, "demand": {"cpu": 1, "mem": 1}},
           "allocators": ["first_fit"], "power": section}
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_bad_carbon_traces_name_the_field(tmp_path):
    (tmp_path / "c.csv").write_text("time,g\n0,1\n")
    with pytest.raises(ConfigError, match="power.carbon.trace: .* no column 'intensity'"):
        power(topo(), str(tmp_path), server=LINEAR, carbon={"trace": "c.csv"})
    (tmp_path / "d.csv").write_text("time,intensity\n5,1\n2,1\n")
    with pytest.raises(ConfigError, match="time must increase"):
        power(topo(), str(tmp_path), server=LINEAR, carbon={"trace": "d.csv"})
    (tmp_path / "e.csv").write_text("time,intensity\n0,-1\n")
    with pytest.raises(ConfigError, match="intensity non-negative"):
        power(topo(), str(tmp_path), server=LINEAR, carbon={"trace": "e.csv"})


def test_yaml_on_off_reads_as_the_policy():
    """YAML 1.1 reads a bare `off` as false: it still means idle_policy off."""
    assert PowerSpec.model_validate({"server": LINEAR, "idle_policy": False}).idle_policy == "off"
    assert PowerSpec.model_validate({"server": LINEAR, "idle_policy": True}).idle_policy == "on"


# -------------------------------------------------------------------------- hand-worked
@pytest.mark.parametrize("model, on, off", [
    # server 0: 0.5 for [0, 10], empty [10, 20]; server 1: empty [0, 4], 1.0 [4, 6], empty
    (LINEAR, (150 * 10 + 100 * 10) + (100 * 4 + 200 * 2 + 100 * 14), 150 * 10 + 200 * 2),
    (TABLE, (180 * 10 + 100 * 10) + (100 * 4 + 200 * 2 + 100 * 14), 180 * 10 + 200 * 2),
])
def test_known_utilisation_gives_the_models_energy_exactly(model, on, off):
    t = topo()
    _, s, _ = run(t, hand_source(), {"server": model})
    assert (s["window_start"], s["window_end"]) == (0.0, 20.0)
    assert s["energy_servers_j"] == on and s["energy_j"] == on
    assert s["energy_network_j"] == 0.0
    assert s["mean_power_w"] == on / 20
    assert s["power_ons"] == 0
    # idle-off: an empty server draws nothing; switch-ons at 0 (server 0), 4 (server 1)
    # and 20 (server 0 again, at the window's end)
    _, s, _ = run(t, hand_source(), {"server": model, "idle_policy": "off",
                                     "power_on_j": 7.0})
    assert s["power_ons"] == 3
    assert s["energy_servers_j"] == off + 3 * 7.0


def test_an_idle_off_cluster_with_nothing_placed_draws_nothing():
    src = ListSource([0.0, 5.0], [1.0, 1.0], [[11, 1], [11, 1]])  # fits nowhere
    _, s, _ = run(topo(), src, {"server": LINEAR, "idle_policy": "off"})
    assert s["accepted"] == 0 and s["energy_j"] == 0.0 and s["power_ons"] == 0
    _, s, _ = run(topo(), src, {"server": LINEAR})
    assert s["energy_j"] == 2 * 100 * 5  # idle-on: two servers idle for the window


def test_time_unit_and_constant_carbon():
    _, s, _ = run(topo(), hand_source(), {"server": LINEAR, "time_unit_s": 60,
                                          "carbon": {"intensity": 400}})
    e = 60 * ((150 * 10 + 100 * 10) + (100 * 4 + 200 * 2 + 100 * 14))
    assert s["energy_j"] == e
    assert s["mean_power_w"] == pytest.approx(e / (20 * 60), rel=1e-15)
    assert s["carbon_g"] == pytest.approx(e / 3.6e6 * 400, rel=1e-15)


def test_carbon_trace_weighs_each_interval_by_its_intensity(tmp_path):
    """Constant 200 W on each of 2 servers for [0, 20]: intensity 100 on [0, 5), 300 on
    [5, 12), 50 from 12: carbon = 400 W x (100x5 + 300x7 + 50x8) / 3.6e6."""
    pd.DataFrame({"time": [0.0, 5.0, 12.0], "intensity": [100.0, 300.0, 50.0]}).to_parquet(
        tmp_path / "i.parquet")
    _, s, _ = run(topo(), hand_source(), {"server": {"model": "constant", "watts": 200},
                                          "carbon": {"trace": str(tmp_path / "i.parquet")}})
    assert s["energy_j"] == 400 * 20
    assert s["carbon_g"] == pytest.approx(400 * (100 * 5 + 300 * 7 + 50 * 8) / 3.6e6,
                                          rel=1e-12)


def failure_run(tmp_path, spec):
    """hand_source with server 1 failing at 5 for 3 (r1 on it is dropped at 5)."""
    (tmp_path / "f.csv").write_text("time,kind,component,duration\n5,server,1,3\n")
    fspec = parse_failures({"trace": {"path": "f.csv"}})

    def failures(engine):
        return LossFailures(engine, fspec, np.random.default_rng(0), str(tmp_path))

    return run(topo(), hand_source(), spec, failures=failures)


def test_a_failed_server_draws_nothing(tmp_path):
    # server 1: idle [0, 4], full [4, 5], down [5, 8], idle [8, 20]
    _, s, _ = failure_run(tmp_path, {"server": LINEAR})
    assert s["n_failures"] == 1 and s["interrupted"] == 1
    assert s["energy_servers_j"] == (150 * 10 + 100 * 10) + (100 * 4 + 200 * 1 + 100 * 12)
    _, s, _ = failure_run(tmp_path, {"server": LINEAR, "idle_policy": "off"})
    assert s["energy_servers_j"] == 150 * 10 + 200 * 1


def test_a_failed_link_draws_nothing_at_its_ports(tmp_path):
    """AHAB's fig1 fat-tree: 7 switches, 14 links with 22 switch ends; a link failing for
    [2, 6) of a [0, 10] window takes its port_w away for 4."""
    t = build_topology({"kind": "fat_tree", "preset": "ahab_fig1"})
    n_sw = t.graph.number_of_nodes() - t.n_servers
    servers = set(t.servers)
    ports = sum((a not in servers) + (b not in servers) for a, b in t.links)
    a, b = t.links[0]
    link_ports = (a not in servers) + (b not in servers)
    src = ListSource([0.0, 10.0], [1.0, 1.0], [[1], [1]])
    spec = {"server": {"model": "constant", "watts": 0}, "switch": {"static_w": 50,
                                                                    "port_w": 2}}
    _, s, _ = run(t, src, spec)
    assert s["energy_network_j"] == (n_sw * 50 + ports * 2) * 10
    (tmp_path / "f.csv").write_text("time,kind,component,duration\n2,link,0,4\n")
    fspec = parse_failures({"trace": {"path": "f.csv"}})
    _, s, _ = run(t, src, spec, failures=lambda e: LossFailures(
        e, fspec, np.random.default_rng(0), str(tmp_path)))
    assert s["energy_network_j"] == (n_sw * 50 + ports * 2) * 10 - link_ports * 2 * 4


# -------------------------------------------------------------------------- cross-checks
@pytest.mark.parametrize("config", [None, EngineConfig(capacity="wait"),
                                    EngineConfig(warmup_requests=50, sample_every=7)])
def test_linear_energy_matches_the_utilisation_meter(config):
    """Idle-on linear: energy = T x (n idle + (peak - idle) x n x util_cpu), with util_cpu
    from the Meter's own integration; the fused path (None), the general path (wait) and a
    warm-up window."""
    t = topo(n=5)
    src = random_source(np.random.default_rng(3), 400, rate=2.0, hold=6.0, max_demand=5)
    _, s, rows = run(t, src, {"server": LINEAR}, alloc=RandomAllocator(
        rng=np.random.default_rng(1)), config=config)
    span = s["window_end"] - s["window_start"]
    expect = span * (5 * 100 + 100 * 5 * s["util_cpu"])
    assert s["energy_j"] == pytest.approx(expect, rel=1e-9)
    assert s["accepted"] < s["received"]  # the load rejects some: the cluster fills up
    ts = pd.DataFrame(rows["timeseries"])
    assert np.allclose(ts["power_w"], 5 * 100 + 100 * 5 * ts["util_cpu"])


def test_fused_and_general_paths_give_the_same_energy(tmp_path):
    """The same stream through the fused path, and through the general path (a failure
    trace whose only failure comes after the run)."""
    src = random_source(np.random.default_rng(5), 300, rate=2.0, hold=6.0, max_demand=5)
    spec = {"server": TABLE, "idle_policy": "off", "power_on_j": 3.0}
    _, fused, _ = run(topo(n=4), src, spec)
    (tmp_path / "f.csv").write_text("time,kind,component,duration\n1e9,server,0,1\n")
    fspec = parse_failures({"trace": {"path": "f.csv"}})
    eng, general, _ = run(topo(n=4), src, spec, failures=lambda e: LossFailures(
        e, fspec, np.random.default_rng(0), str(tmp_path)))
    assert not eng._fused
    for k in ("energy_j", "power_ons", "accepted", "util_cpu"):
        assert fused[k] == pytest.approx(general[k], rel=1e-12), k


def test_folding_in_chunks_changes_nothing(monkeypatch):
    """The log folded every 3 events gives the energies of one fold at the end."""
    import dcsim.modes.loss.power as p

    src = random_source(np.random.default_rng(8), 300, rate=2.0, hold=6.0)
    spec = {"server": TABLE, "idle_policy": "off", "power_on_j": 1.0}
    _, once, _ = run(topo(n=4), src, spec)
    monkeypatch.setattr(p, "FOLD_EVENTS", 3)
    _, chunked, _ = run(topo(n=4), src, spec)
    assert chunked["power_ons"] == once["power_ons"]
    assert chunked["energy_j"] == pytest.approx(once["energy_j"], rel=1e-12)


def test_no_power_section_writes_no_energy_column():
    _, s, rows = run(topo(), hand_source(), None)
    assert not any(k.startswith(("energy", "power", "mean_power", "carbon")) for k in s)
    assert "power_w" not in rows.get("timeseries", {})


# -------------------------------------------------------------------------- bounds
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 4), off=st.booleans(),
       watts=st.lists(st.floats(0, 500), min_size=2, max_size=6),
       table=st.booleans())
def test_each_servers_energy_lies_between_idle_and_peak(seed, n, off, watts, table):
    """Per server: 0 (idle-off) or idle x T <= energy <= peak x T, for monotone models."""
    watts = sorted(watts)
    if table:
        u = np.linspace(0, 1, len(watts)).tolist()
        server = {"model": "table", "points": [[a, w] for a, w in zip(u, watts, strict=True)]}
    else:
        server = {"model": "linear", "idle_w": watts[0], "peak_w": watts[-1]}
    rng = np.random.default_rng(seed)
    src = random_source(rng, int(rng.integers(2, 60)), rate=1.0, hold=4.0, max_demand=6)
    eng, s, _ = run(topo(n=n), src, {"server": server,
                                      "idle_policy": "off" if off else "on"},
                    alloc=RandomAllocator(rng=np.random.default_rng(seed)))
    span = s["window_end"] - s["window_start"]
    e = eng.power.server_energy(eng.env.now)
    tol = 1e-9 * (1 + watts[-1] * span)
    assert (e >= -tol).all()
    assert (e <= watts[-1] * span + tol).all()
    if not off:
        assert (e >= watts[0] * span - tol).all()
    assert s["energy_j"] == pytest.approx(float(e.sum()), rel=1e-12, abs=1e-9)
    assert math.isfinite(s["mean_power_w"]) or span == 0


# -------------------------------------------------------------------------- server types
def typed_topology(tmp_path, types=("a", "b")):
    """A topology file: two servers of cpu 10 (their `type`s given) under one switch."""
    import json

    nodes = [{"id": f"h{i}", "kind": "server", "cpu": 10, "mem": 10,
              **({"type": t} if t is not None else {})} for i, t in enumerate(types)]
    nodes.append({"id": "sw", "kind": "switch", "tier": 1})
    links = [{"source": f"h{i}", "target": "sw", "capacity": 10} for i in range(len(types))]
    (tmp_path / "t.json").write_text(json.dumps({"nodes": nodes, "links": links}))
    return build_topology({"kind": "file", "path": str(tmp_path / "t.json")})


def test_each_server_type_draws_its_own_model(tmp_path):
    """Server 0 (type a, linear 100-200): 0.5 for [0, 10], idle [10, 20]; server 1 (type
    b, constant 50) for the whole window; without b's model it falls back to
    power.server."""
    t = typed_topology(tmp_path)
    assert t.resources == ("cpu", "mem")  # the type is not a resource
    _, s, _ = run(t, hand_source(), {"types": {"a": LINEAR,
                                               "b": {"model": "constant", "watts": 50}}})
    assert s["energy_servers_j"] == (150 * 10 + 100 * 10) + 50 * 20
    _, s, _ = run(t, hand_source(), {"server": {"model": "constant", "watts": 70},
                                     "types": {"a": LINEAR}})
    assert s["energy_servers_j"] == (150 * 10 + 100 * 10) + 70 * 20


def test_server_types_without_a_model_or_servers_name_the_field(tmp_path):
    t = typed_topology(tmp_path, types=("a", None))
    with pytest.raises(ConfigError, match=r"power.server: server 'h1' has no power model"):
        power(t, types={"a": LINEAR})
    with pytest.raises(ConfigError, match=r"power.types.c: no server of the topology has"):
        power(t, server=LINEAR, types={"c": LINEAR})
    with pytest.raises(ConfigError, match=r"power.types.a.idle_w"):
        power(t, server=LINEAR, types={"a": {"model": "linear", "idle_w": -1, "peak_w": 1}})
    with pytest.raises(ValueError, match="needs server .* or types"):
        PowerSpec.model_validate({})


# -------------------------------------------------------------------------- results
def test_the_results_and_the_report_carry_the_energy(tmp_path):
    """Through the runner: the declared columns in the summary and the time series, and
    dcsim report's energy table by default (a headline metric), its power figure."""
    import importlib.util

    from dcsim.report import make_report

    cfg = {"name": "e", "seeds": 2,
           "topology": {"kind": "flat", "servers": 3, "server": {"cpu": 10, "mem": 10}},
           "workload": {"requests": 200, "arrival": {"process": "poisson", "rate": 1},
                        "duration": {"dist": "exponential", "mean": 5},
                        "demand": {"cpu": {"dist": "uniform_int", "low": 1, "high": 4},
                                   "mem": 1}},
           "metrics": {"sample_interval": 20},
           "allocators": ["random", "best_fit"],
           "power": {"server": LINEAR, "idle_policy": False, "carbon": {"intensity": 100}}}
    path = tmp_path / "e.yaml"
    path.write_text(yaml.safe_dump(cfg))
    r = CliRunner().invoke(main, ["run", str(path), "--out", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    s = pd.read_parquet(tmp_path / "out" / "summary.parquet")
    for c in ("energy_j", "energy_servers_j", "energy_network_j", "mean_power_w",
              "mean_power_servers_w", "mean_power_network_w", "power_ons", "carbon_g"):
        assert c in s.columns and s[c].notna().all(), c
    assert (s["energy_j"] > 0).all() and (s["power_ons"] > 0).all()
    assert np.allclose(s["carbon_g"], s["energy_j"] / 3.6e6 * 100)
    ts = pd.read_parquet(tmp_path / "out" / "timeseries")
    assert {"power_w", "power_servers_w", "power_network_w"} <= set(ts.columns)
    draw = importlib.util.find_spec("matplotlib") is not None
    rep = make_report(tmp_path / "out", draw=draw)
    assert "energy_j" in rep.metrics and "carbon_g" in rep.metrics
    assert any(t.startswith("energy_j (J)") for t, _ in rep.text_tables())
    if draw:
        assert (tmp_path / "out" / "report" / "figures" / "timeseries_power_w.png").exists()


# ---------------------------------------------------------------- the switch-on delay
def test_a_switch_on_delay_holds_the_request_longer_by_hand():
    """hand_source with idle-off servers that take 3 to start: r0 (server 0, off) leaves at
    13, not 10; r1 (server 1, off) at 9, not 6; r2 (server 0, off again since 13) at 24.
    Energy: server 0 at 0.5 over [0, 13], server 1 at 1.0 over [4, 9] (the window ends at
    20, r2's arrival), plus three switch-ons."""
    t = topo()
    _, s, rows = run(t, hand_source(), {"server": LINEAR, "idle_policy": "off",
                                        "power_on_j": 7.0, "power_on_delay": 3.0})
    assert rows["requests"]["end"] == [13.0, 9.0, 24.0]
    assert rows["requests"]["start"] == [0.0, 4.0, 20.0]
    assert s["power_ons"] == 3
    assert s["energy_servers_j"] == 150 * 13 + 200 * 5 + 3 * 7.0


def test_a_server_already_on_takes_a_request_without_delay():
    """r0 switches server 0 on at 0; r1 at 1 joins it (on, or starting): not delayed."""
    src = ListSource([0.0, 1.0, 30.0], [10.0, 2.0, 1.0], [[5, 1], [1, 1], [1, 1]])
    _, _, rows = run(topo(), src, {"server": LINEAR, "idle_policy": "off",
                                   "power_on_delay": 4.0})
    assert rows["requests"]["end"][:2] == [14.0, 3.0]


def test_a_zero_delay_changes_nothing():
    """power_on_delay 0 (the default) gives the rows of a run without the key (wall-clock
    decision times aside)."""
    src = random_source(np.random.default_rng(3), 300)
    spec = {"server": LINEAR, "idle_policy": "off"}
    _, s0, r0 = run(topo(8), src, spec)
    _, s1, r1 = run(topo(8), src, {**spec, "power_on_delay": 0.0})
    del r0["requests"]["decision_s"], r1["requests"]["decision_s"]
    assert r0["requests"] == r1["requests"] and s0["energy_j"] == s1["energy_j"]


def test_a_delay_needs_idle_servers_off(tmp_path):
    r = CliRunner().invoke(main, ["validate", str(_exp(tmp_path, {
        "server": LINEAR, "power_on_delay": 5}))])
    assert r.exit_code not in (0, None) and "Traceback" not in r.output
    lines = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and "power.power_on_delay" in lines[0], r.output
