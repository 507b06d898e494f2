"""AHAB: data-driven admission control around any virtual-cluster embedder (Zerwas et al. 2018).

For an arriving VC R, AHAB(A) (paper Algorithm 2):

1. rejects R if the embedder A finds no embedding;
2. accepts R if more than ``shortcut`` (50 %) of all compute is free;
3. otherwise simulates ``sequences`` sequences of ``lookahead`` future VCs on copies of the
   state, once with R embedded first and once without (Algorithm 3), each sequence's reward
   being Σ N·S of the VCs A could embed; it accepts iff the mean reward with R beats the
   mean without. No departures happen inside a lookahead.

Choices where the paper's pseudocode is literal but odd (``docs/reproductions.md``):

* Algorithm 3 never credits R's own N·S to the sequences that embed it, which makes accepting
  lose almost always. ``count_new: true`` (default) adds R's N·S to every with-R sequence;
  ``count_new: false`` is the literal pseudocode.
* Algorithm 2 calls RunSequences twice with ``numSeq`` each: 2 × sequences × lookahead
  embeddings per decision (600 with the paper's 20 × 15). ``paired: true`` reuses the same
  sampled futures for both halves (common random numbers, less noise); default false draws
  them independently as the paper does.
* Future VCs come from the experiment's workload distributions of N, S and B (the paper's
  "perfect knowledge"), or with ``distributions: empirical`` from the (N, S, B) of requests
  seen so far, resampled — the data-driven idea made literal. With no history yet, AHAB
  accepts whatever its embedder can place.

``host_link`` (every VC embedder's option, :mod:`dcsim.model.vc`) is passed on to the
embedder and used for AHAB's own reservations and the lookahead's; ``embed_options`` are
the embedder's other options (e.g. ``{zero_bandwidth: most_preferred}`` for ``vc_tetris``).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import Field

from dcsim.allocators.base import Choice
from dcsim.allocators.vc.embedder import (
    VCAllocator,
    embedder_label_extra,
    make_embedder,
    vc_size,
)
from dcsim.allocators.vc.lookahead import advance
from dcsim.errors import ConfigError
from dcsim.hookspecs import hookimpl
from dcsim.kernels import kernels_on
from dcsim.model import Request, StateView


class Ahab(VCAllocator):
    """Admission control by lookahead over sampled future VCs, around an embedder."""

    name = "ahab"
    description = "lookahead admission control around a VC embedder (AHAB, Zerwas et al. 2018)"

    class Options(VCAllocator.Options):
        embed: str = Field("kraken", description="registered VC embedder to wrap")
        embed_options: dict[str, Any] = Field(
            default_factory=dict, description="options of the embedder (not host_link)")
        sequences: int = Field(20, ge=0, description="sampled futures per side")
        lookahead: int = Field(15, ge=0, description="future VCs per sequence")
        shortcut: float | None = Field(
            0.5, ge=0, le=1, description="accept without lookahead above this free-CU share")
        distributions: Literal["workload", "empirical"] = "workload"
        count_new: bool = True
        paired: bool = False

    @classmethod
    def label_for(cls, options: Options) -> str:
        extra = ",empirical" if options.distributions == "empirical" else ""
        extra += ",paired" if options.paired else ""
        extra += embedder_label_extra(options)
        return f"ahab({options.embed}{extra})"

    def setup(self, view: StateView) -> None:
        super().setup(view)
        self.embedder = make_embedder(self.options.embed, self.label, view.topology, self.rng,
                                      self.options.embed_options, self.host_link)
        self.embedder.setup(view)
        self.total_cpu = float(view.capacity[:, self.cpu].sum())
        self.seen: list[tuple[int, float, float]] = []
        self.kernels = self._lookahead_on() and kernels_on()
        self.dists = None
        if self.options.distributions == "workload" and self._lookahead_on():
            attrs = view.workload.attrs if view.workload is not None else {}
            missing = [a for a in ("N", "S", "B") if a not in attrs]
            if missing:
                raise ConfigError(
                    f"allocator {self.label!r}: distributions: workload needs a synthetic "
                    f"workload with attrs N, S, B (missing {', '.join(missing)}); use "
                    "distributions: empirical with a trace"
                )
            self.dists = (attrs["N"], attrs["S"], attrs["B"])

    def _lookahead_on(self) -> bool:
        return self.options.sequences > 0 and self.options.lookahead > 0

    def embed(self, free_cpu, link_free, n, s, b):
        return self.embedder.embed(free_cpu, link_free, n, s, b)

    def allocate(self, request: Request, view: StateView) -> Choice:
        n, s, b = vc_size(request, self.label)
        self.seen.append((n, s, b))
        free_cpu = view.free[:, self.cpu]
        counts = self.embed(free_cpu, view.link_free, n, s, b)
        if counts is None:
            return None
        opt = self.options
        if not self._lookahead_on() or (
            opt.shortcut is not None and free_cpu.sum() > opt.shortcut * self.total_cpu
        ):
            return self.levels.placement(counts, request.demand / n, n, b, self.host_link)
        futures = self._sample_futures()
        if futures is None:
            return self.levels.placement(counts, request.demand / n, n, b, self.host_link)
        with_r, without = self._rollouts(free_cpu, view.link_free, futures, (counts, n, s, b))
        if with_r > without:
            return self.levels.placement(counts, request.demand / n, n, b, self.host_link)
        return None

    # ------------------------------------------------------------------ lookahead
    def _sample_futures(self):
        """Two (sequences, lookahead) arrays of (N, S, B): for with-R and without-R."""
        opt = self.options
        k = opt.sequences * opt.lookahead
        draws = 1 if opt.paired else 2
        if self.dists is not None:
            dn, ds, db = self.dists
            out = [
                (dn.sample(self.rng, k).astype(np.int64), ds.sample(self.rng, k),
                 db.sample(self.rng, k))
                for _ in range(draws)
            ]
        else:
            if len(self.seen) < 2:  # only R itself: nothing to learn from yet
                return None
            hist = np.asarray(self.seen[:-1], dtype=np.float64)
            out = []
            for _ in range(draws):
                rows = hist[self.rng.integers(0, len(hist), k)]
                out.append((rows[:, 0].astype(np.int64), rows[:, 1], rows[:, 2]))
        shaped = [tuple(a.reshape(opt.sequences, opt.lookahead) for a in o) for o in out]
        return (shaped[0], shaped[0]) if opt.paired else (shaped[0], shaped[1])

    def _rollouts(self, free_cpu, link_free, futures, first) -> tuple[float, float]:
        """Mean reward of the with-R and without-R sequences, all advanced together.

        Rows 0..q-1 are the with-R sequences (R embedded first), rows q..2q-1 the others;
        at each lookahead step one batched embed places that step's VC in every row, and
        only the hosts and links it uses are updated.
        """
        (n1, s1, b1), (n0, s0, b0) = futures
        q = n1.shape[0]
        ns = np.concatenate([n1, n0])
        ss = np.concatenate([s1, s0])
        bs = np.concatenate([b1, b0])
        cpu = np.repeat(free_cpu[None, :], 2 * q, axis=0)
        lf = np.repeat(link_free[None, :], 2 * q, axis=0)
        reward = np.zeros(2 * q)
        counts, n, s, b = first
        cpu[:q] -= counts * s
        lf[:q] -= self.levels.hose_loads(counts, n, b, self.host_link)
        if self.options.count_new:
            reward[:q] += n * s
        # what the embedder can check once for every state the lookahead reaches
        hints = self.embedder.lookahead_hints(free_cpu, link_free, ss, bs)
        advance(self.embedder, self.levels, cpu, lf, ns.T.copy(), ss.T.copy(), bs.T.copy(),
                reward, hints, self.kernels)
        return float(reward[:q].mean()), float(reward[q:].mean())


@hookimpl
def register_allocators(register):
    register(Ahab)
