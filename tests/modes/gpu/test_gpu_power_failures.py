"""GPU clusters with a power draw (``gpu.power``) and node failures (``failures:`` with
``gpu.arrivals``): the draw of each node worked by hand under both GPU and both CPU
behaviours and the idle policy; the kept draw against recomputation on random streams with
failures (hypothesis); a node that is down (nothing free, no placement, no pod); the engine's
drop and reallocate on a replayed failure, reasoned by hand; every allocator keeping the
cluster valid under failures; the same seed giving the same rows; and the configurations a
GPU run refuses, each with one message naming the field."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dcsim.cli import main
from dcsim.errors import ConfigError, StateError
from dcsim.experiment_sections import parse_failures
from dcsim.gpu import MILLI, GpuCluster, GpuPod
from dcsim.gpu.power import DeviceWatts, GpuPower, SocketWatts
from dcsim.modes.gpu.engine import run_gpu
from dcsim.modes.gpu.spec import check_gpu, parse_gpu
from dcsim.plugins import get_plugin_class, registered
from tests.helpers.gpu import gpu_nodes

DATA = str(Path(__file__).resolve().parents[2] / "data" / "gpu")
GPUS = {"A": DeviceWatts(10, 70), "default": DeviceWatts(30, 300)}
CPUS = {"none": SocketWatts(15, 120, 16), "default": SocketWatts(20, 200, 8)}


def power(cluster, **kw) -> GpuPower:
    return GpuPower(cluster, GPUS, CPUS, **kw)


# -- the draw by hand -----------------------------------------------------------------------------
def two_nodes():
    # n0: 4 A GPUs, 32 vCPU = 16 cores = 2 sockets of 8 (default CPU); n1: CPU-only, 16 cores
    c = GpuCluster(gpu_nodes([(4, "A", 32000), (0, "", 32000)]))
    c.reserve(GpuPod(0, 3000, 0, 1, 100), 0, (1,))       # 0.1 of device 1, 1.5 cores
    c.reserve(GpuPod(1, 2000, 0, 2, MILLI), 0, (2, 3))   # devices 2, 3 whole, 1 core
    return c


def test_any_share_and_socket_draw_by_hand():
    c = two_nodes()
    p = power(c)
    g, cpu = p.draw(c)
    # n0: device 0 free (10 W), 1, 2, 3 in use (70 W each) -> 220 W; n1: no GPU
    assert g.tolist() == [220.0, 0.0]
    # n0: 5000 milli-cpu used -> 27000 free = 13 whole cores free of 16 -> 3 in use, in one
    # socket of 8: 200 + 20; n1 (CPU-only: 16 cores per socket) idle: 15
    assert cpu.tolist() == [220.0, 15.0]
    assert p.totals() == (220.0, 235.0)


def test_linear_draw_by_hand():
    c = two_nodes()
    g, cpu = power(c, gpu_draw="linear", cpu_draw="linear").draw(c)
    # GPUs: 4 × 10 + (70 − 10) × (0.1 + 1 + 1) = 166; CPU: 2 sockets × (20 + 180 × 5/32)
    assert g[0] == pytest.approx(166.0)
    assert cpu[0] == pytest.approx(2 * (20 + 180 * 5000 / 32000))
    assert cpu[1] == pytest.approx(15.0)


def test_idle_off_and_down_nodes_draw_nothing():
    c = two_nodes()
    g, cpu = power(c, idle_policy="off").draw(c)
    assert (g[1], cpu[1]) == (0.0, 0.0) and g[0] == 220.0    # n1 hosts nothing: off
    c.set_down(1, True)
    g, cpu = power(c).draw(c)
    assert (g[1], cpu[1]) == (0.0, 0.0)


def test_a_model_the_tables_lack_is_named():
    c = GpuCluster(gpu_nodes([(2, "B", 8000)]))
    with pytest.raises(KeyError, match="gpu.power.gpus: no entry for 'B'"):
        GpuPower(c, {"A": DeviceWatts(1, 2)}, CPUS)
    with pytest.raises(ValueError, match="gpu_draw"):
        power(c, gpu_draw="max")


# -- a node that is down ------------------------------------------------------------------------
def test_a_down_node_has_nothing_free_and_takes_no_pod():
    c = GpuCluster(gpu_nodes([(2, "A", 8000), (2, "A", 8000)]))
    p = c.reserve(GpuPod(0, 1000, 0, 1, 500), 0, (0,))
    with pytest.raises(StateError, match="still holds 1 pod"):
        c.set_down(0, True)
    c.release(p)
    c.set_down(0, True)
    with pytest.raises(StateError, match="already down"):
        c.set_down(0, True)
    assert c.gpu_free[0].sum() == 0 and c.cpu_free[0] == 0 and c.max_free[0] == 0
    assert c.used_gpu_milli() == 0 and c.down_gpu_milli() == 2 * MILLI
    assert c.feasible(GpuPod(1, 0, 0, 0, 0)).tolist() == [False, True]   # even a 0-cpu pod
    assert c.reason(GpuPod(1, 0, 0, 0, 0), 0, ()) == "node 0 is down"
    c.check()
    c.cpu_free[0] = 5
    with pytest.raises(StateError, match="down holds pods or has something free"):
        c.check()
    c.cpu_free[0] = 0
    c.set_down(0, False)
    assert (c.gpu_free == c.gpu_cap).all() and (c.cpu_free == c.cpu_cap).all()
    c.check()


# -- the kept draw on random streams with failures (hypothesis) ----------------------------------
ops = st.lists(st.tuples(st.sampled_from(["place", "place", "place", "leave", "fail",
                                          "repair"]),
                         st.integers(0, 3), st.integers(1, 999), st.integers(0, 3),
                         st.integers(0, 6000)), min_size=1, max_size=40)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=ops, gpu_draw=st.sampled_from(["any_share", "linear"]),
       cpu_draw=st.sampled_from(["socket", "linear"]), idle=st.sampled_from(["on", "off"]))
def test_kept_draw_equals_recomputing_and_down_nodes_stay_empty(ops, gpu_draw, cpu_draw, idle):
    c = GpuCluster(gpu_nodes([(4, "A", 16000), (2, "B", 32000), (0, "", 8000), (8, "A", 64000)]))
    p = power(c, gpu_draw=gpu_draw, cpu_draw=cpu_draw, idle_policy=idle)
    live = []
    for i, (op, node, milli, k, cpu) in enumerate(ops):
        if op == "place":
            pod = GpuPod(i, cpu, 0, 1, milli) if k == 0 else GpuPod(i, cpu, 0, k, MILLI)
            free = np.flatnonzero(c.gpu_free[node] >= pod.gpu_milli)[:pod.num_gpu]
            if c.reason(pod, node, tuple(free)) is None:
                live.append(c.reserve(pod, node, tuple(int(d) for d in free)))
        elif op == "leave" and live:
            q = live.pop(k % len(live))
            c.release(q)
            node = q.node
        elif op == "fail" and not c.down[node]:
            for q in [q for q in live if q.node == node]:   # the engine evicts first
                c.release(q)
                live.remove(q)
            c.set_down(node, True)
        elif op == "repair" and c.down[node]:
            c.set_down(node, False)
        p.update(c, [node])
        g, w = p.draw(c)
        assert np.allclose(p.gpu_w, g) and np.allclose(p.cpu_w, w)
        assert (g >= 0).all() and (w >= 0).all()
        assert (g[c.down] == 0).all() and (w[c.down] == 0).all()
        c.check()
        assert all(not c.down[q.node] for q in live)


# -- the engine under a replayed failure, by hand --------------------------------------------------
def failure_trace(tmp_path, rows) -> str:
    path = tmp_path / "failures.csv"
    path.write_text("time,kind,component,duration\n"
                    + "".join(f"{t},server,{n},{d}\n" for t, n, d in rows))
    return str(path)


def two_node_lists(tmp_path):
    (tmp_path / "nodes.csv").write_text("sn,cpu_milli,memory_mib,gpu,model\n"
                                        "n0,32000,65536,2,A\nn1,32000,65536,2,A\n")
    (tmp_path / "pods.csv").write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
                                       "p0,1000,1024,1,1000\n")
    return {"nodes": {"path": "nodes.csv"}, "pods": {"path": "pods.csv"}, "inflate": None,
            "check_invariants": True}


T_FAIL = 50.0


def run_two(tmp_path, on_failure: str, **arrivals):
    """One-GPU pods at an offered load of 0.8 × 4 GPUs on 2 nodes of 2 GPUs; node 0 fails
    at t = T_FAIL for longer than the run."""
    spec = two_node_lists(tmp_path)
    spec["arrivals"] = {"pods": 60, "load": 0.8, "mean_holding": 10.0, "warmup": 0.0,
                        **arrivals}
    spec["power"] = {"gpus": {"A": {"idle_w": 10, "peak_w": 100}},
                     "cpus": {"default": {"idle_w": 0, "peak_w": 0, "cores": 8}}}
    fails = parse_failures({"trace": {"path": failure_trace(tmp_path, [(T_FAIL, 0, 1e6)])},
                            "on_failure": on_failure})
    cls = get_plugin_class("best_fit", "gpu_allocator")
    tables: dict[str, dict] = {}
    out = run_gpu(spec, cls(cls.parse_options({}), rng=np.random.default_rng(0)),
                  np.random.default_rng(3), lambda t, c: tables.setdefault(t, c), tmp_path,
                  failures=fails, failure_rng=np.random.default_rng(1))
    return out, tables


@pytest.mark.parametrize("on_failure", ["drop", "reallocate"])
def test_a_failed_node_loses_or_moves_its_pods(tmp_path, on_failure):
    out, t = run_two(tmp_path, on_failure)
    pods, fail = t["pods"], t["component_failures"]
    assert fail["event"] == ["fail"] and fail["component"] == [0] and fail["time"] == [T_FAIL]
    arrival = np.array(pods["arrival"])
    end = arrival + np.array(pods["duration"])
    assert arrival[0] < T_FAIL < arrival[-1]

    def present(node):   # the pods on ``node`` when it fails (their node at arrival)
        return [i for i in range(len(arrival))
                if pods["node"][i] == node and arrival[i] < T_FAIL < end[i]]
    on0, on1 = present(0), present(1)
    assert on0, "the seed leaves node 0 empty at the failure; the test would prove nothing"
    assert fail["interrupted"] == [len(on0)] == [out["interrupted"]]
    assert [i for i, k in enumerate(pods["interruptions"]) if k] == on0
    # after the failure nothing lands on node 0, and at most its 2 GPUs of 4 are in use
    after = [i for i in range(len(arrival)) if arrival[i] > T_FAIL and pods["accepted"][i]]
    assert after and all(pods["node"][i] == 1 for i in after)
    assert fail["avail_gpu"] == [0.5] and 0.5 < out["avail_gpu"] < 1.0
    ts = t["timeseries"]
    late = [j for j, x in enumerate(ts["time"]) if x > T_FAIL]
    assert all(ts["alloc_gpu_share"][j] <= 0.5 for j in late)
    # a down node draws nothing: node 1's 2 GPUs, 10 W idle, 100 W in use
    assert all(20 <= ts["power_gpu_w"][j] <= 200 for j in late)
    # node 1 takes as many as it has free GPUs (one-GPU pods), in arrival order
    moved = min(len(on0), 2 - len(on1)) if on_failure == "reallocate" else 0
    assert out["reallocated"] == fail["reallocated"][0] == moved
    dropped = on0[moved:]
    left = sum(min(end[i], out["sim_time"]) - T_FAIL for i in dropped)
    assert out["lost_pod_time"] == pytest.approx(left)
    assert out["lost_gpu_time"] == pytest.approx(left)   # each pod 1 GPU


@pytest.mark.parametrize("on_failure", ["drop", "reallocate"])
def test_a_gpu_allocator_hears_of_departures_failures_and_repairs(on_failure):
    """GPU allocators get the allocators' optional hooks: ``released`` for every pod that
    leaves (at its departure, or interrupted by a failure before it may be placed again),
    ``failed`` and ``repaired`` per node event, in the order of the failure table."""
    spec = {"nodes": {"path": "nodes.csv"}, "pods": {"path": "pods.csv"}, "inflate": None,
            "check_invariants": True,
            "arrivals": {"pods": 300, "load": 1.2, "mean_holding": 100, "warmup": 0.2}}
    fails = parse_failures({"servers": {"ttf": {"dist": "exponential", "mean": 300},
                                        "ttr": 40}, "on_failure": on_failure})
    base = get_plugin_class("best_fit", "gpu_allocator")

    class Listening(base):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            self.heard = []

        def released(self, pod, placement, view):
            assert placement.pod is pod and view.gpu_free.shape[0] > placement.node
            self.heard.append(("released", pod.id))

        def failed(self, kind, index, view):
            self.heard.append(("fail", index))

        def repaired(self, kind, index, view):
            self.heard.append(("repair", index))

    alloc = Listening(base.parse_options({}), rng=np.random.default_rng(2))
    tables: dict[str, dict] = {}
    out = run_gpu(spec, alloc, np.random.default_rng(4), lambda t, c: tables.setdefault(t, c),
                  DATA, failures=fails, failure_rng=np.random.default_rng(9))
    f = tables["component_failures"]
    assert out["n_failures"] > 0 and out["interrupted"] > 0
    events = list(zip(f["event"], f["component"], strict=True))
    assert [h for h in alloc.heard if h[0] != "released"] == events
    released = Counter(pid for what, pid in alloc.heard if what == "released")
    pods = tables["pods"]
    n = len(pods["accepted"])
    # a pod is released each time it leaves a node: once per interruption at least
    assert all(released[i] >= pods["interruptions"][i] for i in range(n))
    assert all(pods["accepted"][i] for i in released)
    ended = [pods["accepted"][i] and not pods["interruptions"][i]
             and pods["arrival"][i] + pods["duration"][i] <= out["sim_time"] for i in range(n)]
    # an uninterrupted pod is released once, at its departure, if it left before the end
    assert all(released[i] == int(ended[i]) for i in range(n) if not pods["interruptions"][i])
    if on_failure == "drop":  # a dropped pod leaves once, when it is interrupted
        assert sum(released.values()) == sum(pods["interruptions"]) + sum(ended)


@pytest.mark.parametrize("name", sorted(registered("gpu_allocator")))
@pytest.mark.parametrize("on_failure", ["drop", "reallocate"])
def test_every_allocator_keeps_the_cluster_valid_under_failures(name, on_failure):
    spec = {"nodes": {"path": "nodes.csv"}, "pods": {"path": "pods.csv"}, "inflate": None,
            "check_invariants": True,
            "arrivals": {"pods": 600, "load": 1.2, "mean_holding": 100, "warmup": 0.2},
            "power": {"gpus": {"default": {"idle_w": 30, "peak_w": 300}},
                      "cpus": {"default": {"idle_w": 20, "peak_w": 185, "cores": 16}}}}
    fails = parse_failures({"servers": {"ttf": {"dist": "exponential", "mean": 300},
                                        "ttr": 40}, "on_failure": on_failure})
    cls = get_plugin_class(name, "gpu_allocator")
    tables: dict[str, dict] = {}
    out = run_gpu(spec, cls(cls.parse_options({}), rng=np.random.default_rng(2)),
                  np.random.default_rng(4), lambda t, c: tables.setdefault(t, c), DATA,
                  failures=fails, failure_rng=np.random.default_rng(9))
    assert out["n_failures"] > 0 and out["interrupted"] > 0
    if on_failure == "drop":
        assert out["reallocated"] == 0
    f = tables["component_failures"]
    # each failure is followed by its node's repair before the node fails again
    state: dict[int, str] = {}
    for ev, comp in zip(f["event"], f["component"], strict=True):
        assert state.get(comp, "repair") != ev
        state[comp] = ev
    assert 0 < out["avail_gpu"] < 1 and math.isfinite(out["energy_j"])


def test_same_seed_same_rows_with_failures_and_power():
    def once():
        spec = {"nodes": {"path": "nodes.csv"}, "pods": {"path": "pods.csv"},
                "inflate": None, "arrivals": {"pods": 400, "load": 1.1, "mean_holding": 50},
                "power": {"gpus": {"default": {"idle_w": 30, "peak_w": 300}},
                          "cpus": {"default": {"idle_w": 20, "peak_w": 185, "cores": 16}}}}
        fails = parse_failures({"servers": {"ttf": {"dist": "exponential", "mean": 200},
                                            "ttr": 30}, "on_failure": "reallocate"})
        cls = get_plugin_class("fgd", "gpu_allocator")
        tables: dict[str, dict] = {}
        out = run_gpu(spec, cls(cls.parse_options({}), rng=np.random.default_rng(2)),
                      np.random.default_rng(4), lambda t, c: tables.setdefault(t, c), DATA,
                      failures=fails, failure_rng=np.random.default_rng(9))
        out.pop("mean_decision_s")
        tables["pods"].pop("decision_s")
        return out, tables
    assert once() == once()


# -- what a GPU run refuses --------------------------------------------------------------------
def test_failures_need_arrivals_and_no_links(tmp_path):
    spec = {"nodes": {"path": "nodes.csv"}, "pods": {"path": "pods.csv"}}
    cls = get_plugin_class("fgd", "gpu_allocator")
    a = cls(cls.parse_options({}), rng=np.random.default_rng(0))
    fails = parse_failures({"servers": {"ttf": 100, "ttr": 10}})
    with pytest.raises(ConfigError, match="only in a run with gpu.arrivals"):
        run_gpu(spec, a, np.random.default_rng(0), None, DATA, failures=fails,
                failure_rng=np.random.default_rng(0))
    spec.update(inflate=None, arrivals={"pods": 50})
    links = parse_failures({"links": {"ttf": 100, "ttr": 10}})
    with pytest.raises(ConfigError, match="failures.links: this run has no links"):
        run_gpu(spec, a, np.random.default_rng(0), None, DATA, failures=links,
                failure_rng=np.random.default_rng(0))


@pytest.mark.parametrize("power, match", [
    ({"gpus": {"A": {"idle_w": 1, "peak_w": 2}}, "cpus": {"default": {
        "idle_w": 1, "peak_w": 2, "cores": 8}}}, r"gpu.power.gpus: no entry for 'G2'"),
    ({"gpus": {"default": {"idle_w": 5, "peak_w": 2}}, "cpus": {}}, "peak_w .* below idle_w"),
    ({"gpus": {}, "cpus": {"default": {"idle_w": 1, "peak_w": 2, "cores": 0}}},
     r"cores"),
    ({"gpus": {}, "cpus": {}, "gpu_draw": "max"}, "gpu_draw"),
])
def test_bad_power_sections_name_the_field(power, match):
    with pytest.raises(ConfigError, match=match):
        check_gpu({"nodes": {"path": "nodes.csv"}, "pods": {"path": "pods.csv"},
                   "power": power}, DATA)


def test_parse_keeps_the_power_defaults():
    s = parse_gpu({"nodes": {"path": "n"}, "pods": {"path": "p"},
                   "power": {"gpus": {}, "cpus": {}}})
    assert (s.power.gpu_draw, s.power.cpu_draw, s.power.idle_policy, s.power.time_unit_s) \
        == ("any_share", "socket", "on", 1.0)


def test_a_bare_yaml_on_off_is_the_idle_policy():
    s = parse_gpu(yaml.safe_load("nodes: {path: n}\npods: {path: p}\n"
                                 "power: {gpus: {}, cpus: {}, idle_policy: off}"))
    assert s.power.idle_policy == "off"


# -- through the CLI ----------------------------------------------------------------------------
POWER = {"gpus": {"default": {"idle_w": 30, "peak_w": 300}},
         "cpus": {"default": {"idle_w": 20, "peak_w": 185, "cores": 16}}}


def cli_experiment(tmp_path, gpu_extra=None, **top):
    data_dir = Path(DATA).resolve()
    data = {"name": "gpu_pf", "mode": "gpu", "seed": 3, "seeds": 2,
            "gpu": {"nodes": {"path": str(data_dir / "nodes.csv")},
                    "pods": {"path": str(data_dir / "pods.csv")}, "inflate": None,
                    "arrivals": {"pods": 300, "load": 1.2, "mean_holding": 60},
                    "power": POWER, **(gpu_extra or {})},
            "failures": {"on_failure": "reallocate",
                         "servers": {"ttf": {"dist": "exponential", "mean": 300},
                                     "ttr": 30}},
            "gpu_allocators": ["best_fit", "fgd"], **top}
    path = tmp_path / "gpu_pf.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_cli_run_writes_failures_and_power_tables(tmp_path):
    exp = cli_experiment(tmp_path)
    r = cli("run", exp, "--out", tmp_path / "out")
    assert r.exit_code == 0, r.output
    out = tmp_path / "out"
    summary = pd.read_parquet(out / "summary.parquet")
    assert len(summary) == 4
    for col in ("n_failures", "interrupted", "reallocated", "lost_pod_time",
                "lost_gpu_time", "avail_gpu", "avail_cpu", "mean_power_w", "energy_j",
                "energy_gpu_j", "energy_cpu_j"):
        assert col in summary.columns and summary[col].notna().all(), col
    assert (summary["n_failures"] > 0).all()
    assert np.allclose(summary["energy_j"], summary["energy_gpu_j"] + summary["energy_cpu_j"])
    assert np.allclose(summary["energy_j"], summary["mean_power_w"]
                       * (summary["window_end"] - summary["window_start"]))
    fails = pd.read_parquet(out / "component_failures")
    assert set(fails["event"]) == {"fail", "repair"} and set(fails["kind"]) == {"server"}
    measured = fails[fails["measured"] & (fails["event"] == "fail")]
    per_run = measured.groupby(["allocator", "seed"], observed=True).size()
    got = summary.set_index(["allocator", "seed"])["n_failures"]
    assert {(str(a), int(s)): int(n) for (a, s), n in per_run.items()} == \
        {(str(a), int(s)): int(n) for (a, s), n in got.items()}
    pods = pd.read_parquet(out / "pods")
    assert pods["interruptions"].sum() >= summary["interrupted"].sum()
    ts = pd.read_parquet(out / "timeseries")
    assert {"power_w", "avail_gpu"} <= set(ts.columns)
    assert (ts["power_w"] >= 0).all() and ((ts["avail_gpu"] > 0) & (ts["avail_gpu"] <= 1)).all()


def test_cli_one_pass_power_curve(tmp_path):
    exp = cli_experiment(tmp_path, {"arrivals": None, "inflate": {"target": 1.3}},
                         failures=None)
    r = cli("run", exp, "--out", tmp_path / "out", "--seeds", 1)
    assert r.exit_code == 0, r.output
    s = pd.read_parquet(tmp_path / "out" / "summary.parquet")
    ts = pd.read_parquet(tmp_path / "out" / "timeseries")
    assert "energy_j" not in s.columns and (s["power_w"] > 0).all()
    for (a, _), g in ts.groupby(["allocator", "seed"], observed=True):
        g = g.sort_values("arrived_pct")
        # one-pass: nothing leaves, so the draw never falls; the summary is the last row
        assert (np.diff(g["power_w"].to_numpy()) >= -1e-9).all()
        assert s.loc[s["allocator"] == a, "power_w"].item() == pytest.approx(
            g["power_w"].iloc[-1])


@pytest.mark.parametrize("change, message", [
    ({"gpu_extra": {"arrivals": None, "inflate": {"target": 1.3}}},
     "failures: mode gpu fails nodes only in a run with gpu.arrivals"),
    ({"power": {"server": {"model": "linear", "idle_w": 1, "peak_w": 2}}},
     "power: mode gpu takes its power model under gpu.power"),
    ({"gpu_extra": {"power": {"gpus": {"T4": {"idle_w": 1, "peak_w": 2}},
                              "cpus": POWER["cpus"]}}},
     "gpu.power.gpus: no entry for 'G2'"),
    ({"failures": {"links": {"ttf": 10, "ttr": 1}}}, "failures.links: this run has no links"),
])
def test_cli_refuses_with_one_line(tmp_path, change, message):
    exp = cli_experiment(tmp_path, **change)
    for command in ("validate", "run"):
        args = [command, exp] + (["--out", tmp_path / "o"] if command == "run" else [])
        r = cli(*args)
        assert r.exit_code != 0
        assert message in r.output and "Traceback" not in r.output, r.output
    assert not (tmp_path / "o" / "summary.parquet").exists()
