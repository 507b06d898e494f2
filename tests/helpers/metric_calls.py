"""A metric plugin that records every hook call, and the invariants those calls keep (the
metric tests of every mode use them)."""

from __future__ import annotations

import math

import pytest

from dcsim.metrics import Column, Metric


class Recorder(Metric):
    """Every hook call, in order; a summary and a sample column."""

    name = "recorder"
    summary_columns = {"recorded_events": Column("int64", "hook calls")}
    timeseries_columns = {"recorded_so_far": Column("int64", "hook calls so far")}

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.calls: list[tuple] = []

    def on_start(self, run):
        self.calls.append(("start", run.mode, run.resources))
        self.view = run.view

    def on_arrival(self, now, request, placement):
        self.calls.append(("arrival", now, request.id, placement))

    def on_decision(self, now, request, placement):
        self.calls.append(("decision", now, request.id, placement))

    def on_departure(self, now, request, placement):
        self.calls.append(("departure", now, request.id, placement))

    def on_failure(self, now, kind, component):
        self.calls.append(("failure", now, kind, component))

    def on_repair(self, now, kind, component):
        self.calls.append(("repair", now, kind, component))

    def sample(self, now):
        return {"recorded_so_far": len(self.calls)}

    def summary(self):
        return {"recorded_events": len(self.calls)}


def check_order(calls, durations=None, all_depart=True):
    """The hook calls' invariants: time never goes back; every request arrives once, then
    is decided; each decision that placed it is followed by exactly one departure before
    it is decided again; with ``durations`` (no failures) it departs after its duration;
    with ``all_depart`` every placed request has departed by the end (a loss-mode run ends
    when the last one leaves; a vm_online or gpu run ends at a time, some still placed)."""
    assert calls[0][0] == "start"
    state: dict[int, str] = {}      # request id -> "arrived", "placed", "out"
    placed_at: dict[int, tuple[float, object]] = {}
    last = -math.inf
    for call in calls[1:]:
        kind, now = call[0], call[1]
        assert now >= last, call
        last = now
        if kind in ("failure", "repair"):
            continue
        rid, placement = call[2], call[3]
        if kind == "arrival":
            assert rid not in state and placement is None
            state[rid] = "arrived"
        elif kind == "decision":
            assert state.get(rid) in ("arrived", "out"), call   # arrived, or interrupted
            state[rid] = "out" if placement is None else "placed"
            if placement is not None:
                placed_at[rid] = (now, placement)
        else:
            assert state.get(rid) == "placed", call
            start, placement_then = placed_at[rid]
            assert placement is placement_then  # the same (read-only) object
            if durations is not None:
                assert now == pytest.approx(start + durations[rid])
            state[rid] = "out"
    if all_depart:
        assert all(s == "out" for s in state.values())  # every placed request departed
    return state
