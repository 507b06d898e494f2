"""FGD as the authors' Go code computes it (``fgd_score.go``, ``frag.go``), in plain Python:
an oracle for dcsim's vectorised, cached FGD (``tests/modes/gpu/test_gpu_reference.py``) and the
baseline of ``benchmarks/bench_gpu.py``.

For each pod, each feasible node and each device that fits, the node's fragmentation
before and after is summed over the typical pods one by one; the score is
``int(100 × sigmoid((before − after)/1000))``; a sharing pod keeps the first device with
the highest score; the node with the highest score wins, ties to the lowest rank of the
seeded node order (the authors' node names). Nothing here is shared with
``dcsim.gpu.frag`` or ``dcsim.gpu_allocators.fgd`` but the setup (the node order and the
typical pods, which the wrapped dcsim ``Fgd`` draws).
"""

from __future__ import annotations

import math

import numpy as np

from dcsim.gpu.cluster import MILLI


class Reference:
    """FGD the way the authors' Go code computes it (see the module docstring), recording
    its choices; plain Python lists, no numpy on the per-node path."""

    def __init__(self, inner):
        self.inner = inner       # a dcsim Fgd, whose setup gives the node order and typical pods
        self.choices: list = []

    @property
    def label(self):
        return "reference"

    def setup(self, view, context):
        self.inner.setup(view, context)
        t = context.typical
        self.typical = list(zip(t.cpu.tolist(), t.gpu_milli.tolist(), t.num_gpu.tolist(),
                                t.types, t.freq.tolist(), strict=True))
        self.models = view.models
        self.rank = self.inner.rank.tolist()

    def frag(self, cpu: int, gpus: list[int], model: str) -> float:
        total = sum(gpus)
        out = 0.0
        for tc, tm, tn, types, f in self.typical:
            if tm == 0 or (types and model not in types) or not model:
                out += f * total
                continue
            fits = sum(1 for g in gpus if g >= tm)
            if fits >= tn and cpu >= tc:
                out += f * sum(g for g in gpus if g < tm)
            else:
                out += f * total
        return out

    def allocate(self, pod, view):
        feasible = np.flatnonzero(view.feasible(pod)).tolist()
        if not feasible:
            self.choices.append(None)
            return None
        cpu_free = view.cpu_free.tolist()
        gfree = view.gpu_free
        codes = view.model_code.tolist()
        best = None
        for n in feasible:
            gpus = gfree[n, :view.gpu_count[n]].tolist()
            model = self.models[codes[n]] if codes[n] >= 0 else ""
            before = self.frag(cpu_free[n], gpus, model)
            if pod.num_gpu == 1 and pod.gpu_milli < MILLI:
                score, dev = -1, -1
                for d, g in enumerate(gpus):
                    if g >= pod.gpu_milli:
                        after_g = list(gpus)
                        after_g[d] -= pod.gpu_milli
                        s = int(100 / (1 + math.exp(-(before - self.frag(
                            cpu_free[n] - pod.cpu, after_g, model)) / 1000)))
                        if dev < 0 or s > score:
                            score, dev = s, d
                devs = (dev,)
            else:
                after_g = list(gpus)
                devs = tuple(d for d, g in enumerate(gpus) if g == MILLI)[:pod.num_gpu]
                for d in devs:
                    after_g[d] = 0
                score = int(100 / (1 + math.exp(-(before - self.frag(
                    cpu_free[n] - pod.cpu, after_g, model)) / 1000)))
                devs = devs if pod.num_gpu else ()
            key = (score, -self.rank[n])
            if best is None or key > best[0]:
                best = (key, n, devs)
        self.choices.append((best[1], best[2]))
        return best[1], best[2]
