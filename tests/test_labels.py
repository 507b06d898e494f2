"""Any label gives readable results; a label that cannot name files is refused by
``dcsim validate``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

QUICKSTART = Path(__file__).parents[1] / "experiments" / "quickstart.yaml"


def test_any_label_gives_readable_results(tmp_path):
    """Labels starting with ``.`` or ``_`` or holding ``/`` still give Parquet files a
    reader finds: every run's rows come back."""
    import pandas as pd

    from tests.helpers.cli import ok

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
    from tests.helpers.cli import invoke

    r = invoke("validate", QUICKSTART, "--set",
               f"allocators=[first_fit, {{name: best_fit, label: {json.dumps(label)}}}]")
    assert r.exit_code == 1
    assert "allocators.1.label" in r.output and why in r.output
    assert "Traceback" not in r.output
