"""Every shipped experiment, reduced, gives the rows recorded in ``tests/data/golden``
(``tests/golden.py`` records them; issue #17: a refactor changes no result).

The quick ones run in the default suite, the rest with ``-m slow``. A difference names the
experiment, the table and the first differing column."""

from __future__ import annotations

import pandas as pd
import pytest

from tests import golden

#: reduced runs that take under ~1 s on the 2-core machine
QUICK = {"quickstart", "ahab_lookahead", "deeprm_load_sweep", "nara_clock_ablation",
         "nara_seed_spread", "vm_online_azure", "vmr2l_static", "fgd_default",
         "fgd_departures"}


def _param(name: str):
    marks = () if name in QUICK else (pytest.mark.slow,)
    return pytest.param(name, marks=marks, id=name)


def test_every_shipped_experiment_has_recorded_rows():
    names = golden.shipped()
    assert set(golden.REDUCE) == set(names), "add a REDUCE entry for each new experiment"
    for name in names:
        assert (golden.GOLDEN / f"{name}.summary.parquet").is_file(), (
            f"no rows recorded for {name}: python tests/golden.py {name}")


@pytest.mark.parametrize("name", [_param(n) for n in golden.shipped()])
def test_reduced_experiment_gives_the_recorded_rows(name, tmp_path):
    tables = golden.run_reduced(name, tmp_path)
    recorded = sorted(golden.GOLDEN.glob(f"{name}.*.parquet"))
    assert {p.name.split(".")[1] for p in recorded} == set(tables), name
    for p in recorded:
        kind = p.name.split(".")[1]
        want = pd.read_parquet(p)
        tables[kind].to_parquet(tmp_path / p.name, index=False)   # the same round trip
        got = pd.read_parquet(tmp_path / p.name)
        assert list(got.columns) == list(want.columns), f"{name} {kind}: columns differ"
        assert len(got) == len(want), f"{name} {kind}: {len(got)} rows, recorded {len(want)}"
        for c in want.columns:
            pd.testing.assert_series_equal(got[c], want[c], check_dtype=True,
                                           obj=f"{name} {kind} column {c!r}")
