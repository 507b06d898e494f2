"""Running an engine in a test: its summary and request rows; an allocator checked per choice."""

from __future__ import annotations

import numpy as np

from dcsim.modes.loss import Engine


def run(topo, source, alloc, config=None, seed=0):
    records = {}

    def sink(kind, cols):
        for k, v in cols.items():
            v = v.tolist() if isinstance(v, np.ndarray) else v
            records.setdefault(kind, {}).setdefault(k, []).extend(v)

    eng = Engine(topo, source, alloc, np.random.default_rng(seed), config, sink)
    summary = eng.run()
    return eng, summary, records.get("requests", {})


def checked(cls):
    """``cls`` checking, at every choice, that nothing is over-committed or over-released."""

    def choose(self, partial, view):
        cap = view.capacity
        assert (view.free >= -1e-9).all() and (view.free <= cap + 1e-9).all()
        assert (view.link_free >= -1e-9).all()
        assert (view.link_free <= view.link_capacity + 1e-9).all()
        return cls.choose(self, partial, view)

    return type(f"Checked{cls.__name__}", (cls,), {"choose": choose, "name": "checked"})
