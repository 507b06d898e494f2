"""Hostile plugins and bad input (issue #16): what a plugin is given it cannot change, and
what it does to itself it cannot do to other runs."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from dcsim.allocators.builtin import FirstFitAllocator
from dcsim.sim import Engine
from tests.conftest import ListSource, star_topology

QUICKSTART = Path(__file__).parents[1] / "experiments" / "quickstart.yaml"


def _write_demand(request):
    request.demand[:] = 0


def _divide_demand(request):
    d = request.demand
    d /= 2


def _shorten(request):
    request.duration = 0.0


def _drop_attr(request):
    request.attrs["N"] = 0


class Hostile(FirstFitAllocator):
    """First fit that first tries to change the request it was given."""

    name = "hostile_test"

    def __init__(self, action):
        super().__init__()
        self.action = action
        self.refused = 0

    def allocate(self, request, view):
        try:
            self.action(request)
        except (ValueError, TypeError, dataclasses.FrozenInstanceError):
            self.refused += 1
        return super().allocate(request, view)


@pytest.mark.parametrize("action", [_write_demand, _divide_demand, _shorten, _drop_attr])
def test_a_plugin_cannot_change_the_request_it_is_given(action):
    """Writing the demand (in place or through an alias), reassigning a field or editing
    the attributes raises, and the run's records are what the workload asked for."""
    topo = star_topology(n=2, cpu=8, mem=8)
    src = ListSource([1, 2, 3], [5, 5, 5], [[3, 1], [2, 2], [4, 1]], attrs={"N": [1, 2, 3]})
    alloc = Hostile(action)
    rows: dict[str, list] = {}

    def sink(kind, cols):
        if kind == "requests":
            for k, v in cols.items():
                rows.setdefault(k, []).extend(v.tolist() if isinstance(v, np.ndarray) else v)

    Engine(topo, src, alloc, np.random.default_rng(0), None, sink).run()
    assert alloc.refused == 3
    assert rows["cpu"] == [3, 2, 4] and rows["mem"] == [1, 2, 1]
    assert rows["N"] == [1, 2, 3]
    assert [e - s for s, e in zip(rows["arrival"], rows["end"], strict=True)] == [5, 5, 5]


def test_the_workload_keeps_its_own_arrays_writable():
    """Only the engine's view is read-only: the source's arrays are untouched."""
    topo = star_topology(n=1, cpu=8, mem=8)
    src = ListSource([1], [1], [[1, 1]], batch=1)
    Engine(topo, src, FirstFitAllocator(), np.random.default_rng(0)).run()
    assert src.demand.flags.writeable


# --------------------------------------------------------------------------- labels
def test_any_label_gives_readable_results(tmp_path):
    """Labels starting with ``.`` or ``_`` or holding ``/`` still give Parquet files a
    reader finds: every run's rows come back."""
    import pandas as pd

    from tests.cli_helpers import ok

    labels = [".x", "_y", "a/b", "..z", "é (1)"]
    allocs = "[" + ", ".join(f"{{name: first_fit, label: {json.dumps(lab)}}}"
                             for lab in labels) + "]"
    out = tmp_path / "o"
    ok("run", QUICKSTART, "--seeds", "1", "--out", str(out),
       "--set", "workload.requests=200", "--set", "warmup.requests=20",
       "--set", f"allocators={allocs}")
    req = pd.read_parquet(out / "requests")
    assert sorted(req["allocator"].astype(str).unique()) == sorted(labels)
    assert (req.groupby("allocator", observed=True).size() == 200).all()
    assert len(pd.read_parquet(out / "summary.parquet")) == len(labels)


@pytest.mark.parametrize(("label", "why"), [
    ("é" * 130, "too long for a file name: 780 characters"),
    ("a" * 201, "too long for a file name: 201 characters"),
    ("tab\there", "contains a control character"),
], ids=["non_ascii", "ascii", "control"])
def test_labels_that_cannot_name_files_are_refused_by_validate(label, why):
    from tests.cli_helpers import invoke

    r = invoke("validate", QUICKSTART, "--set",
               f"allocators=[first_fit, {{name: best_fit, label: {json.dumps(label)}}}]")
    assert r.exit_code == 1
    assert "allocators.1.label" in r.output and why in r.output
    assert "Traceback" not in r.output
