"""CSV tables round-trip floats exactly, whatever the pandas version (issue #36: with pandas
3.0's default parser, arrivals written to CSV came back one ulp off)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dcsim.csv_tables import READ_OPTIONS, _default_parser_is_exact, read_csv, write_csv
from dcsim.workload import TraceSource, write_table

AWKWARD = [0.1 + 0.2, 1 / 3, 2 / 3, 1e-300, 5e-324, 2.2250738585072014e-308, 1e300,
           1.7976931348623157e308, 2.0**53 + 2, 1e15 + 0.3, 86400.0 * 14 + 1 / 7,
           123456789.12345679, -15.361, 0.0, -0.0, 1.7000000000000002, 9.999999999999999e22]


def _bits(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float64).view(np.uint64)


def test_awkward_floats_come_back_bit_for_bit(tmp_path):
    df = pd.DataFrame({"x": AWKWARD, "i": np.arange(len(AWKWARD))})
    write_csv(df, tmp_path / "a.csv")
    back = read_csv(tmp_path / "a.csv")
    assert back["x"].dtype == np.float64 and back["i"].dtype == np.int64
    assert (_bits(back["x"]) == _bits(AWKWARD)).all()      # -0.0 included


def test_the_text_is_the_shortest_exact_form(tmp_path):
    write_csv(pd.DataFrame({"x": [0.1 + 0.2, 2.0, 1e-300, np.nan],
                            "f": np.array([0.1, 1, 2, 3], dtype=np.float32)}), tmp_path / "t.csv")
    lines = (tmp_path / "t.csv").read_text().splitlines()
    assert lines[1:] == ["0.30000000000000004,0.10000000149011612", "2.0,1.0", "1e-300,2.0",
                         ",3.0"]
    back = read_csv(tmp_path / "t.csv")
    assert back["f"].to_numpy()[0] == np.float64(np.float32(0.1))  # the float32's value
    assert np.isnan(back["x"].to_numpy()[3])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=50))
def test_any_double_round_trips(tmp_path_factory, values):
    path = tmp_path_factory.mktemp("rt") / "h.csv"
    write_csv(pd.DataFrame({"x": values}), path)
    assert (_bits(read_csv(path)["x"]) == _bits(values)).all()


def test_many_random_arrivals_and_a_chunked_trace_replay_exactly(tmp_path):
    """The shape of the failure: 17-digit cumulative times, a quarter of which pandas 3.0's
    default parser rounded one ulp off; replayed through TraceSource in chunks."""
    rng = np.random.default_rng(36)
    n = 50_000
    df = pd.DataFrame({"arrival": np.cumsum(rng.exponential(1e3, n)) + 1e9,
                       "duration": rng.random(n) / 3, "cpu": 1.0, "mem": 1 / 3})
    path = write_table(df, tmp_path / "arrivals.csv")
    back = read_csv(path)
    for c in df.columns:
        assert (_bits(back[c]) == _bits(df[c])).all(), c
    src = TraceSource(path, batch_size=7_000, start_at_zero=False)
    got = np.concatenate([b.arrival for b in src.batches(np.random.default_rng(0))])
    assert (_bits(got) == _bits(df["arrival"])).all()


def test_chunked_reads_keep_the_exact_parser(tmp_path):
    write_csv(pd.DataFrame({"x": AWKWARD}), tmp_path / "c.csv")
    with read_csv(tmp_path / "c.csv", chunksize=4) as reader:
        got = pd.concat(list(reader))["x"]
    assert (_bits(got) == _bits(AWKWARD)).all()


@pytest.mark.parametrize(("version", "exact"), [
    ("2.1.4", False), ("2.3.3", False), ("3.0.0", False), ("3.0.2", False),
    ("3.1.0", True), ("3.1.1", True), ("3.2.0.dev0+1234.gabcdef", True), ("4.0.0rc1", True),
])
def test_round_trip_is_asked_for_exactly_where_the_default_parser_is_not_exact(version, exact):
    assert _default_parser_is_exact(version) is exact


def test_this_pandas_gets_the_options_its_version_needs():
    assert READ_OPTIONS == ({} if _default_parser_is_exact(pd.__version__)
                            else {"float_precision": "round_trip"})


def test_every_csv_dcsim_reads_goes_through_the_exact_reader():
    """No module but dcsim.csv_tables calls pandas' read_csv or to_csv for data it reads
    back (the report's stats.csv is written for people and never read)."""
    root = Path(sys.modules["dcsim"].__file__).parent
    offenders = []
    for p in sorted(root.rglob("*.py")):
        if p.name == "csv_tables.py" or p.parts[-3:-1] == ("dcsim", "report"):
            continue
        for n, line in enumerate(p.read_text().splitlines(), 1):
            if re.search(r"\bpd\.read_csv\(|\.to_csv\(", line):
                offenders.append(f"{p.relative_to(root)}:{n}")
    assert not offenders, offenders
