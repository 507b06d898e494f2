"""Queue mode end to end: config, plan, the run loop over job sets, results, errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from dcsim.errors import ConfigError
from dcsim.modes.queue.engine import run_queue
from dcsim.queue.env import QueueConfig, QueueEnv
from dcsim.queue.jobs import JobSet, deeprm_jobset
from dcsim.runner import load_experiment, run_experiment
from dcsim.schedulers.builtin import SCHEDULERS

ROOT = Path(__file__).resolve().parents[3]
SJF = next(c for c in SCHEDULERS if c.name == "sjf")

BASE = {
    "name": "q",
    "mode": "queue",
    "seed": 3,
    "seeds": 2,
    "workload": {"kind": "deeprm", "new_job_rate": 0.7, "jobsets": 4, "steps": 20},
    "schedulers": ["sjf", "packer", "random"],
}


def write(tmp_path: Path, data: dict, name: str = "q.yaml") -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump(data))
    return p


def test_run_queue_sums_job_sets_and_measures_utilisation():
    """Two hand-built sets: counts add up, slowdown averages all finished jobs, and
    utilisation is work done over capacity × steps of all sets."""
    a = JobSet(arrival=np.array([0, 0]), length=np.array([2, 4]),
               demand=np.array([[10.0, 5.0], [10.0, 5.0]]), resources=("cpu", "mem"), steps=1)
    b = JobSet(arrival=np.array([0]), length=np.array([3]), demand=np.array([[5.0, 5.0]]),
               resources=("cpu", "mem"), steps=1)
    rows = []
    out = run_queue(QueueConfig(capacity=10.0), [a, b], SJF(),
                    sink=lambda kind, cols: rows.append((kind, cols)))
    # set a: SJF starts the 2-step job at 0 (ends 2), the 4-step job at 2 (ends 6);
    # slowdowns 1 and 6/4. set b: one job, slowdown 1. Steps: 6 + 3.
    assert out["received"] == 3 and out["finished"] == 3 and out["dropped"] == 0
    assert out["mean_slowdown"] == pytest.approx((1 + 1.5 + 1) / 3)
    assert out["sim_time"] == 9
    assert out["util_cpu"] == pytest.approx((10 * 2 + 10 * 4 + 5 * 3) / (10 * 9))
    assert out["util_mem"] == pytest.approx((5 * 2 + 5 * 4 + 5 * 3) / (10 * 9))
    assert [k for k, _ in rows] == ["jobs", "timeseries", "jobs", "timeseries"]
    assert rows[2][1]["jobset"].tolist() == [1]
    assert rows[0][1]["start"].tolist() == [0.0, 2.0]
    # one timeseries row per step of each set: set a runs 6 steps, set b 3
    assert rows[1][1]["time"].tolist() == [0, 1, 2, 3, 4, 5]
    assert rows[1][1]["active"].tolist() == [1, 1, 1, 1, 1, 1]
    assert rows[1][1]["waiting"].tolist() == [1, 1, 0, 0, 0, 0]
    assert rows[3][1]["jobset"].tolist() == [1, 1, 1]


def test_run_queue_matches_the_environment_per_set():
    """The run's counts are the sums of the environment's own per-set summaries."""
    rng = np.random.default_rng(0)
    sets = [deeprm_jobset(rng, steps=30, new_job_rate=0.9) for _ in range(5)]
    cfg = QueueConfig(slots=3, backlog=2)
    out = run_queue(cfg, sets, SJF())
    env = QueueEnv(cfg)
    per = [env.run(SJF(), js) for js in sets]
    for key in ("finished", "dropped", "unfinished"):
        assert out[key] == sum(p[key] for p in per)
    assert out["dropped"] > 0  # the tiny backlog overflows at this rate


def test_cli_queue_experiment_writes_results(tmp_path):
    """`dcsim run` on a queue experiment: one summary row per scheduler × seed × rate, the
    DeepRM metrics, one request row per job with its job set."""
    data = dict(BASE, matrix={"workload.new_job_rate": [0.3, 0.9]})
    cfg = write(tmp_path, data)
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "dcsim", "run", str(cfg), "--out", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    s = pd.read_parquet(out / "summary.parquet")
    assert len(s) == 3 * 2 * 2
    assert {"mean_slowdown", "mean_completion_time", "dropped", "unfinished", "finished",
            "util_cpu", "util_mem", "new_job_rate"} <= set(s.columns)
    assert (s["received"] == s["finished"] + s["dropped"] + s["unfinished"]).all()
    req = pd.read_parquet(out / "jobs")
    assert {"jobset", "slowdown", "start", "end", "wait", "dropped"} <= set(req.columns)
    one = s[(s.allocator == "sjf") & (s.seed == 0) & (s.new_job_rate == 0.9)].iloc[0]
    jobs = req[(req.allocator == "sjf") & (req.seed == 0) & (req.new_job_rate == 0.9)]
    assert len(jobs) == one["received"]
    assert jobs["slowdown"].mean() == pytest.approx(one["mean_slowdown"])
    resolved = yaml.safe_load((out / "experiment.yaml").read_text())
    assert resolved["mode"] == "queue" and "allocators" not in resolved
    assert [x["name"] for x in resolved["schedulers"]] == ["sjf", "packer", "random"]
    assert resolved["topology"]["server"] == {"cpu": 10.0, "mem": 10.0}


def test_same_seed_same_rows(tmp_path):
    """Two runs of the same queue experiment give identical request rows."""
    exp = load_experiment(write(tmp_path, BASE))
    frames = []
    for name in ("a", "b"):
        out = run_experiment(exp, out=tmp_path / name)
        frames.append(pd.read_parquet(out / "jobs").sort_values(
            ["allocator", "seed", "jobset", "id"]).reset_index(drop=True))
    pd.testing.assert_frame_equal(frames[0], frames[1])
    # and the seeds really differ
    f = frames[0]
    assert not f[f.seed == 0]["arrival"].reset_index(drop=True).equals(
        f[f.seed == 1]["arrival"].reset_index(drop=True))


def test_schedulers_see_the_same_job_sets(tmp_path):
    """Common random numbers: every scheduler of a seed gets the same jobs."""
    out = run_experiment(load_experiment(write(tmp_path, BASE)), out=tmp_path / "o")
    req = pd.read_parquet(out / "jobs")
    cols = ["jobset", "id", "arrival", "duration", "cpu", "mem"]
    by = {a: g[g.seed == 0][cols].sort_values(["jobset", "id"]).reset_index(drop=True)
          for a, g in req.groupby("allocator", observed=True)}
    pd.testing.assert_frame_equal(by["sjf"], by["random"])


def test_capacity_comes_from_the_topology(tmp_path):
    """A topology of two 10/10 servers gives a 20/20 machine."""
    data = dict(BASE, topology={"kind": "flat", "servers": 2,
                                "server": {"cpu": 10, "mem": 10}})
    exp = load_experiment(write(tmp_path, data))
    from dcsim.model.topologies import build_topology
    from dcsim.modes.queue.mode import queue_config
    cfg = queue_config(exp.spec, build_topology(exp.spec.topology))
    assert cfg.capacity_for(2).tolist() == [20.0, 20.0] and cfg.slots == 10


@pytest.mark.parametrize("change, message", [
    ({"allocators": ["first_fit"]}, "allocators: not used in mode 'queue'"),
    ({"schedulers": []}, "schedulers: mode 'queue' needs at least one"),
    ({"schedulers": ["sfj"]}, "schedulers.0.name: unknown scheduler 'sfj'"),
    ({"schedulers": [{"name": "tetris_star", "options": {"knob": 2}}]},
     "schedulers.0.options.knob"),
    ({"workload": {"new_job_rate": 0.5}}, "workload.kind: queue mode needs a job source"),
    ({"workload": {"kind": "deeprm", "new_job_rate": 1.5}}, "workload.new_job_rate"),
    ({"workload": {"kind": "trace", "path": "nowhere.csv"}}, "workload.path: 'nowhere.csv'"),
    ({"queue": {"slots": 0}}, "queue.slots"),
])
def test_bad_queue_config_names_the_field(tmp_path, change, message):
    cfg = write(tmp_path, {**BASE, **change})
    with pytest.raises(ConfigError) as e:
        load_experiment(cfg)
    assert message in str(e.value) and str(cfg) in str(e.value)


def test_loss_mode_still_requires_allocators_and_topology(tmp_path):
    base = {"name": "x", "workload": {"requests": 1}}
    with pytest.raises(ConfigError, match="allocators: mode 'loss' needs at least one"):
        load_experiment(write(tmp_path, {**base, "topology": {"kind": "flat"}}))
    with pytest.raises(ConfigError, match="topology: Field required"):
        load_experiment(write(tmp_path, {**base, "allocators": ["first_fit"]}))
    with pytest.raises(ConfigError, match="schedulers: not used in mode 'loss'"):
        load_experiment(write(tmp_path, {**base, "topology": {"kind": "flat"},
                                         "allocators": ["first_fit"], "schedulers": ["sjf"]}))


def test_trace_driven_jobs_from_the_alibaba_slice(tmp_path):
    """kind: trace windows of the committed Alibaba slice: jobs exist, demands are whole
    slots within capacity, and different seeds draw different windows."""
    data = dict(BASE, workload={"kind": "trace", "path": str(ROOT / "traces/alibaba2018_slice.csv"),
                                "jobsets": 3, "steps": 30, "time_unit": 10},
                schedulers=["sjf"])
    out = run_experiment(load_experiment(write(tmp_path, data)), out=tmp_path / "o")
    req = pd.read_parquet(out / "jobs")
    assert len(req) > 0
    assert ((req["cpu"] >= 1) & (req["cpu"] <= 10) & (req["cpu"] % 1 == 0)).all()
    assert (req["arrival"] < 30).all()
    a, b = (req[req.seed == s].sort_values(["jobset", "id"])["duration"].to_numpy()
            for s in (0, 1))
    assert a.shape != b.shape or not np.array_equal(a, b)


def test_queue_mode_writes_a_timeseries_like_every_mode(tmp_path):
    """pd.read_parquet(out / "timeseries") works in queue mode too: one row per step of
    each job set, and the mean utilisation over the steps is the summary's."""
    import pandas as pd

    from tests.helpers.cli import ok

    exp = Path(__file__).parents[3] / "experiments" / "deeprm_load_sweep.yaml"
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


PIPE_FORMAT = '''\
import pandas as pd

from dcsim import hookimpl
from dcsim.workload import TraceFormat


class Pipe(TraceFormat):
    name = "pipe_table"
    description = "the standard table, | separated"

    def read(self, src):
        return pd.read_csv(src, sep="|")


@hookimpl
def register_trace_formats(register):
    register(Pipe)
'''


def test_trace_jobs_read_through_any_registered_format(tmp_path):
    """``workload.format`` of queue mode's trace jobs is ``table`` or any registered trace
    format (a local plugin's here): the jobs are those of the same table read directly; an
    unknown format is refused before anything runs, listing the formats."""
    src = pd.read_csv(ROOT / "traces/alibaba2018_slice.csv")
    src.to_csv(tmp_path / "slice.psv", sep="|", index=False)
    (tmp_path / "pipe.py").write_text(PIPE_FORMAT)
    jobs = {"kind": "trace", "jobsets": 2, "steps": 30, "time_unit": 10}
    direct = dict(BASE, workload={**jobs, "path": str(ROOT / "traces/alibaba2018_slice.csv")},
                  schedulers=["sjf"])
    piped = dict(direct, plugins=["pipe.py"],
                 workload={**jobs, "path": "slice.psv", "format": "pipe_table"})
    from dcsim.runner.fingerprint import run_plugins

    piped_exp = load_experiment(write(tmp_path, piped))
    assert ("trace_format", "pipe_table") in run_plugins(piped_exp.runs[0])  # its code counts
    a = run_experiment(load_experiment(write(tmp_path, direct)), out=tmp_path / "a")
    b = run_experiment(piped_exp, out=tmp_path / "b")
    ja, jb = (pd.read_parquet(o / "jobs").sort_values(["seed", "jobset", "id"])
              .reset_index(drop=True) for o in (a, b))
    pd.testing.assert_frame_equal(ja.drop(columns=["decision_s"], errors="ignore"),
                                  jb.drop(columns=["decision_s"], errors="ignore"))
    with pytest.raises(ConfigError, match="workload.format: .*unknown trace format 'nope'; "
                                          "expected one of table, azure2017"):
        load_experiment(write(tmp_path, dict(direct, workload={**direct["workload"],
                                                               "format": "nope"})))
