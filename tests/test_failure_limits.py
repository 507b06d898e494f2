"""A ``failures:`` section cannot make a run go on without end:

* a ``ttf`` / ``ttr`` mean below the failure clock's resolution is refused by ``dcsim
  validate`` and ``dcsim run``, naming the field;
* ``component_failures`` rows reach the sink in batches of ``metrics.flush_rows``, so a run
  with many failures holds at most one batch, and its rows are those of one batch;
* a run whose failures outnumber its arrivals beyond the cap stops with an error naming the
  section and the rate.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from dcsim.cli import main
from dcsim.errors import DcsimError
from dcsim.experiment_sections import MIN_MEAN_TIME, parse_failures
from dcsim.modes.loss import Engine, EngineConfig
from dcsim.modes.loss.failures import LossFailures
from dcsim.sim.failures import FREE_ARRIVALS, MAX_EVENTS_PER_ARRIVAL, failure_rng
from tests.helpers.sources import random_source
from tests.helpers.trees import star_topology

FAILING = {
    "name": "failing",
    "seed": 1,
    "topology": {"kind": "flat", "servers": 8, "server": {"cpu": 16, "mem": 64}},
    "workload": {
        "requests": 200,
        "arrival": {"process": "tick"},
        "demand": {"cpu": {"dist": "uniform_int", "low": 1, "high": 8},
                   "mem": {"dist": "uniform_int", "low": 1, "high": 16}},
        "duration": {"dist": "uniform_int", "low": 1, "high": 30},
    },
    "failures": {"servers": {"ttf": {"dist": "exponential", "mean": 200},
                             "ttr": {"dist": "exponential", "mean": 10}}},
    "allocators": ["first_fit"],
}


def write(tmp_path: Path, cfg: dict) -> Path:
    p = tmp_path / "exp.yaml"
    p.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return p


def with_failures(**servers) -> dict:
    cfg = json.loads(json.dumps(FAILING))
    cfg["failures"]["servers"].update(servers)
    return cfg


# ------------------------------------------------------------------------------ resolution
@pytest.mark.parametrize("command", ["validate", "run"])
@pytest.mark.parametrize("field, value", [
    ("ttf", {"dist": "exponential", "mean": 1e-300}),
    ("ttr", 1e-300),
    ("ttf", {"dist": "uniform", "low": 0, "high": 1e-7}),
])
def test_a_failure_time_below_the_resolution_is_refused(tmp_path, command, field, value):
    path = write(tmp_path, with_failures(**{field: value}))
    args = [command, str(path)] + (["--out", str(tmp_path / "out")] if command == "run"
                                   else [])
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 1, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("error: ") and f"failures.servers.{field}: mean " in lines[0]
    assert f"is below the resolution of failure times, {MIN_MEAN_TIME:g} time units" \
        in lines[0]
    assert "Traceback" not in r.output + r.stderr
    assert not (tmp_path / "out").exists()


def test_the_resolution_itself_is_accepted():
    parse_failures({"servers": {"ttf": MIN_MEAN_TIME, "ttr": MIN_MEAN_TIME}})
    parse_failures({"links": {"tiers": {"core": {"ttf": 5, "ttr": MIN_MEAN_TIME}}}})


def test_a_tier_below_the_resolution_names_its_field():
    from dcsim.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^failures\.links\.tiers\.core\.ttr: mean 1e-09 "):
        parse_failures({"links": {"tiers": {"core": {"ttf": 5, "ttr": 1e-9}}}})


# ------------------------------------------------------------------------------ streamed rows
class Batches:
    """A sink that records each component_failures batch's size."""

    def __init__(self):
        self.sizes: list[int] = []
        self.rows: dict[str, list] = {}

    def __call__(self, table, columns):
        if table != "component_failures":
            return
        sizes = {len(v) for v in columns.values()}
        assert len(sizes) == 1
        self.sizes.append(sizes.pop())
        for k, v in columns.items():
            self.rows.setdefault(k, []).extend(list(v))


def run_loss(flush_rows: int, failures: dict, n: int = 400, seed: int = 3):
    spec = parse_failures(failures)
    sink = Batches()
    eng = Engine(star_topology(8), random_source(np.random.default_rng(seed), n, rate=4.0),
                 _first_up(), np.random.default_rng(seed), EngineConfig(flush_rows=flush_rows),
                 sink=sink, failures=lambda e: LossFailures(e, spec, failure_rng(seed, 0)))
    return eng, eng.run(), sink


def _first_up():
    from dcsim.allocators.base import Allocator

    class FirstUp(Allocator):
        name = "first_up"

        def allocate(self, request, view):
            fit = np.flatnonzero(view.fits(request.demand))
            return int(fit[0]) if fit.size else None

    return FirstUp()


FREQUENT = {"on_failure": "reallocate",
            "servers": {"ttf": {"dist": "exponential", "mean": 0.5},
                        "ttr": {"dist": "exponential", "mean": 0.2}}}


def test_failure_rows_are_flushed_in_batches_and_equal_unbatched_ones():
    eng, summary, sink = run_loss(50, FREQUENT)
    process = eng._failures.process
    total = sum(sink.sizes)
    assert total > 500 and len(sink.sizes) > 10
    assert all(s == 50 for s in sink.sizes[:-1]) and 0 < sink.sizes[-1] <= 50
    assert process.batches == len(sink.sizes) - 1  # the engine's final flush: the rest
    assert len(process.rows["time"]) <= 50  # what it still holds: at most one batch
    # the same rows and summary as when they are held to the end in one batch
    _eng, whole_summary, whole = run_loss(10**9, FREQUENT)
    assert whole.sizes == [total]
    assert whole.rows == sink.rows
    assert {k: v for k, v in whole_summary.items() if k != "mean_decision_s"} == \
        {k: v for k, v in summary.items() if k != "mean_decision_s"}


def test_the_buffer_never_holds_more_than_a_batch(monkeypatch):
    from dcsim.sim import failure_stream

    held = []
    real = failure_stream.StreamedFailureProcess._apply

    def watch(self, kind, comp, event):
        real(self, kind, comp, event)
        held.append(len(self.rows["time"]))

    monkeypatch.setattr(failure_stream.StreamedFailureProcess, "_apply", watch)
    _eng, _summary, sink = run_loss(32, FREQUENT)
    assert len(held) == sum(sink.sizes) and max(held) < 32


def test_failure_rows_reach_the_results_in_batches(tmp_path):
    import pyarrow.parquet as pq

    cfg = with_failures(ttf={"dist": "exponential", "mean": 0.5},
                        ttr={"dist": "exponential", "mean": 0.2})
    cfg["metrics"] = {"flush_rows": 64}
    r = CliRunner().invoke(main, ["run", str(write(tmp_path, cfg)), "--out",
                                  str(tmp_path / "out")])
    assert r.exit_code == 0, r.output + r.stderr
    (f,) = (tmp_path / "out" / "component_failures").rglob("*.parquet")
    meta = pq.ParquetFile(f).metadata
    assert meta.num_rows > 64 * 4
    assert meta.num_row_groups >= meta.num_rows // 64


# ------------------------------------------------------------------------------ the rate cap
SWAMPING = {"servers": {"ttf": {"dist": "exponential", "mean": 1e-4},
                        "ttr": {"dist": "exponential", "mean": 1e-4}}}


def test_failures_that_swamp_the_arrivals_stop_the_run():
    with pytest.raises(DcsimError) as info:
        run_loss(10**9, SWAMPING)
    msg = str(info.value)
    assert msg.startswith("failures: ") and "failure and repair events for" in msg
    assert f"more than {MAX_EVENTS_PER_ARRIVAL:,} per request arrival" in msg
    assert "the fastest are failures.servers (8 of them, mean ttf 0.0001, mean ttr 0.0001)" \
        in msg


def test_the_cap_allows_a_first_ten_arrivals_worth_and_then_grows_with_them():
    from dcsim.sim.failures import Components, FailureSchedule

    spec = parse_failures(SWAMPING)
    arrivals = [0]
    sched = FailureSchedule(spec, Components(4), np.random.default_rng(0))
    sched.limit(lambda: arrivals[0])
    for _ in range(MAX_EVENTS_PER_ARRIVAL * FREE_ARRIVALS):
        sched.pop()
    arrivals[0] = 5  # five more arrivals' worth
    for _ in range(MAX_EVENTS_PER_ARRIVAL * 5):
        sched.pop()
    with pytest.raises(DcsimError, match="15,001 failure and repair events for 5 request "):
        sched.pop()


def test_the_cap_stops_a_failure_storm_at_one_instant():
    # mean 1e-6 passes, but nearly every draw is 0: the clock would stand still
    storm = {"servers": {"ttf": {"dist": "discrete", "values": [0, 1], "probs": [0.999999,
                                                                                 1e-6]},
                         "ttr": {"dist": "discrete", "values": [0, 1], "probs": [0.999999,
                                                                                 1e-6]}}}
    with pytest.raises(DcsimError, match="per request arrival"):
        run_loss(64, storm)


def test_a_swamped_run_fails_with_the_message_in_the_failure_log(tmp_path):
    cfg = with_failures(ttf={"dist": "exponential", "mean": 1e-4},
                        ttr={"dist": "exponential", "mean": 1e-4})
    r = CliRunner().invoke(main, ["run", str(write(tmp_path, cfg)), "--out",
                                  str(tmp_path / "out")])
    assert r.exit_code == 1
    assert "Traceback" not in r.output + r.stderr
    (record,) = [json.loads(ln) for ln in
                 (tmp_path / "out" / "failures.jsonl").read_text().splitlines()]
    assert record["error"] == "DcsimError"
    assert record["message"].startswith("failures: ") and "per request arrival" in \
        record["message"] and "failures.servers" in record["message"]


def test_vm_online_failures_are_capped_too(tmp_path):
    from tests.helpers.failures import run_vm

    rows = [(i, i * 0.5, 3, 2, 10) for i in range(20)]
    with pytest.raises(DcsimError, match="more than 1,000 per VM arrival"):
        run_vm(tmp_path, rows, SWAMPING, until=20.0)
