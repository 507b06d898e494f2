"""The engine on bad numbers from a workload: an inf duration or a NaN demand stops the run
naming the request and the column, and a measured window too short for floats gives no
time average instead of overflowed noise."""

from __future__ import annotations

import numpy as np
import pytest

from dcsim.allocators.single import FirstFitAllocator
from dcsim.modes.loss import Engine
from tests.helpers.sources import ListSource
from tests.helpers.trees import star_topology


@pytest.mark.parametrize(("column", "value"), [("duration", np.inf), ("demand", np.nan),
                                               ("arrival", np.nan), ("bandwidth", -1.0)])
def test_a_workload_yielding_a_bad_number_stops_the_run_naming_the_request(column, value):
    """A trace's inf duration or NaN demand ends the run with one message naming the
    request and the column, instead of writing poisoned metrics."""
    from dcsim.errors import DcsimError

    cols = {"arrival": [1.0, 2.0, 3.0], "duration": [1.0, 1.0, 1.0],
            "demand": [[1.0, 1.0]] * 3, "bandwidth": [0.0, 0.0, 0.0]}
    bad = np.array(cols[column], dtype=float)
    bad[1] = value
    cols[column] = bad
    src = ListSource(cols["arrival"], cols["duration"], cols["demand"], cols["bandwidth"])
    with pytest.raises(DcsimError, match=f"request 1 has {column} "):
        Engine(star_topology(n=1, cpu=8, mem=8), src, FirstFitAllocator(),
               np.random.default_rng(0)).run()


def test_a_window_too_short_for_floats_gives_no_time_average():
    """Arrivals 1e-300 apart: the measured window has no usable length, so the time
    averages are NaN instead of overflowed noise."""
    src = ListSource([1e-300, 2e-300, 3e-300], [1.0, 1.0, 1.0], [[1.0, 1.0]] * 3)
    s = Engine(star_topology(n=1, cpu=8, mem=8), src, FirstFitAllocator(),
               np.random.default_rng(0)).run()
    assert np.isnan(s["util_cpu"]) and np.isnan(s["mean_concurrent"])
    assert s["accepted"] == 3
