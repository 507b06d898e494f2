"""What every virtual-cluster embedder shares: reading (N, S, B), the tree, the placement.

A VC request carries its size as workload attributes ``N`` (VMs), ``S`` (compute units per
VM) and ``B`` (bandwidth per VM); its ``demand`` is the total (cpu = N·S). An embedder works
on plain arrays (free cpu per host, free bandwidth per link) so that lookahead allocators
(AHAB) can run it on forked states; :meth:`VCAllocator.embed` returns VM counts per host or
None, and :meth:`allocate` turns them into a hose-model :class:`Placement`.

Every embedder has the option ``host_link`` (:data:`dcsim.model.vc.HOST_LINK_RULES`): what
a host link reserves for m VMs of the VC. The same rule decides feasibility inside the
embedder and the reservation of its placement (:meth:`TreeLevels.hose_loads`). Composing
allocators (``strawman``, ``ahab``) pass their own ``host_link`` and ``embed_options`` on
to the embedder they wrap.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, Literal

import numpy as np
from pydantic import Field

from dcsim.allocators.base import Allocator, Choice
from dcsim.errors import PluginError
from dcsim.model import Request, StateView, Topology
from dcsim.model.vc import HOST_LINK_RULES, TreeLevels


def vc_size(request: Request, who: str) -> tuple[int, float, float]:
    """(N, S, B) of a request, from its workload attributes."""
    try:
        a = request.attrs
        return int(a["N"]), float(a["S"]), float(a["B"])
    except KeyError:
        raise PluginError(
            f"allocator {who!r} embeds virtual clusters: the workload must give each request "
            "attrs N, S and B (see experiments/ahab_lambda12.yaml)"
        ) from None


HostLink = Literal[HOST_LINK_RULES]  # type: ignore[valid-type]


class VCAllocator(Allocator):
    """Base of tree embedders: subclasses implement :meth:`embed` on arrays."""

    class Options(Allocator.Options):
        host_link: HostLink = Field(
            "hose", description="host-link reservation for m VMs: hose min(m, N-m)*B; "
            "per_vm m*B (0 for a VC on one host); per_vm_strict m*B always")

    levels: TreeLevels

    @property
    def host_link(self) -> str:
        return self.options.host_link

    def setup(self, view: StateView) -> None:
        self.levels = TreeLevels(view.topology)
        self.cpu = view.topology.resource_index("cpu")

    @abstractmethod
    def embed(self, free_cpu: np.ndarray, link_free: np.ndarray, n: int, s: float,
              b: float) -> np.ndarray | None:
        """VM counts per host for VC (n, s, b) on this state, or None if it cannot embed."""

    def embed_batch(self, free_cpu: np.ndarray, link_free: np.ndarray, n: np.ndarray,
                    s: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Embed one VC per row of K states: (counts (K, hosts), feasible (K,)).

        Default: :meth:`embed` row by row. Vectorised embedders override it, and lookahead
        allocators call it to advance many sampled futures at once.
        """
        counts = np.zeros(free_cpu.shape, dtype=np.int64)
        ok = np.zeros(free_cpu.shape[0], dtype=bool)
        for i in range(free_cpu.shape[0]):
            c = self.embed(free_cpu[i], link_free[i], int(n[i]), float(s[i]), float(b[i]))
            if c is not None:
                counts[i] = c
                ok[i] = True
        return counts, ok

    def embed_sparse(self, free_cpu: np.ndarray, link_free: np.ndarray, n: np.ndarray,
                     s: np.ndarray, b: np.ndarray, **hints: Any
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`embed_batch` as (feasible (K,), rows, hosts, VMs): the hosts each
        feasible row uses, what a lookahead reserves (``hints``: :meth:`lookahead_hints`).

        Default: from :meth:`embed_batch`'s dense counts. Embedders whose batch code finds
        the hosts directly override it (KRAKEN, OKTOPUS, VC-TETRIS), skipping the dense
        (K, hosts) counts."""
        c, ok = self.embed_batch(free_cpu, link_free, n, s, b, **hints)
        r, h = np.nonzero(c)
        keep = ok[r]  # a row without an embedding reserves nothing
        if not keep.all():
            r, h = r[keep], h[keep]
        return ok, r, h, c[r, h]

    def embed_by_batch(self, free_cpu: np.ndarray, link_free: np.ndarray, n: int, s: float,
                       b: float) -> np.ndarray | None:
        """:meth:`embed` through the embedder's own :meth:`embed_batch` on one row, with the
        :meth:`lookahead_hints` that hold for that row.

        For embedders whose batch code is, row by row, their one-row algorithm
        (``tests/allocators/vc/test_batch.py``) and cheaper than it even for one row: their
        :meth:`embed` calls this, and the one-row function stays the reference.
        """
        cpu, lf = free_cpu[None, :], link_free[None, :]
        ss, bb = np.array([s], dtype=np.float64), np.array([b], dtype=np.float64)
        hints = self.lookahead_hints(cpu, lf, ss, bb)
        counts, ok = self.embed_batch(cpu, lf, np.array([n], dtype=np.int64), ss, bb, **hints)
        return counts[0] if ok[0] else None

    def lookahead_hints(self, free_cpu: np.ndarray, link_free: np.ndarray, s: np.ndarray,
                        b: np.ndarray) -> dict[str, Any]:
        """Keyword arguments for :meth:`embed_batch` that hold for every state a lookahead
        reaches from (free_cpu, link_free) by embedding VCs whose sizes are among s and b
        (checked once, where each call would check them). Default: none."""
        return {}

    def lookahead_kernel(self, hints: dict[str, Any]):
        """A compiled rollout of a whole lookahead (:mod:`dcsim.kernels`), or None
        (the default): ``run(cpu, lf, ns, ss, bs, gain, reward)`` embeds, step by step,
        VC (ns[j, r], ss[j, r], bs[j, r]) in state r (rows of ``cpu`` and ``lf``, updated
        in place) and adds ``gain[j, r]`` to ``reward[r]`` when it embeds, exactly as
        :func:`dcsim.allocators.vc.ahab.advance` does with this embedder's batch code under
        ``hints``, and returns True; or returns False, having changed nothing, for VCs it
        does not handle."""
        return None

    def allocate(self, request: Request, view: StateView) -> Choice:
        n, s, b = vc_size(request, self.label)
        counts = self.embed(view.free[:, self.cpu], view.link_free, n, s, b)
        if counts is None:
            return None
        return self.levels.placement(counts, request.demand / n, n, b, self.host_link)


def embedder_label_extra(options) -> str:
    """``,host_link=...`` and the ``embed_options`` of a composer's label (none if default)."""
    extra = "" if options.host_link == "hose" else f",host_link={options.host_link}"
    for k, v in sorted(options.embed_options.items()):
        extra += f",{k}={v}"
    return extra


def make_embedder(name: str, owner: str, topology: Topology | None = None,
                  rng: np.random.Generator | None = None,
                  options: dict[str, Any] | None = None,
                  host_link: str | None = None) -> VCAllocator:
    """The registered VC embedder ``name``, for composing allocators.

    ``owner`` names the composing allocator in errors (``ahab``'s ``embed: kraken``);
    ``topology`` and ``rng`` are passed to the embedder's constructor; ``options`` are the
    embedder's options (the composer's ``embed_options``, validated by the embedder) and
    ``host_link`` the composer's own rule, which the embedder must share (it may not be
    given in ``options`` too). Call its :meth:`~VCAllocator.setup` before embedding.
    """
    from dcsim.errors import ConfigError
    from dcsim.plugins import get_allocator_class

    try:
        cls = get_allocator_class(name)
    except PluginError as e:
        raise ConfigError(f"allocator {owner!r}: embed: {e}") from None
    if not issubclass(cls, VCAllocator):
        raise ConfigError(
            f"allocator {owner!r}: embed: {name!r} is not a virtual-cluster embedder"
        )
    raw = dict(options or {})
    if host_link is not None:
        if "host_link" in raw:
            raise ConfigError(f"allocator {owner!r}: embed_options: give host_link as "
                              f"{owner!r}'s own option, not the embedder's")
        raw["host_link"] = host_link
    opts = cls.parse_options(raw, where="embed_options")
    return cls(opts, rng=rng, topology=topology)
