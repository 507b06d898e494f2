"""KRAKEN: the minimum-footprint embedding of one virtual cluster, in time linear in hosts.

Why this is exact (the "centre of gravity" of the AHAB paper, made precise):

* Route every VM's traffic to a centre node c. A link then carries B per VM on its far side
  from c, so the *star cost* Σ_VM B·dist(host, c) bounds the hose footprint from above, with
  equality when c is the VMs' centre of gravity (every link's c-side holds ≥ N/2 VMs, so the
  far side holds min(m, N − m)). Minimising the star cost over all centres and placements
  therefore gives exactly the minimum hose footprint.
* For a fixed c, the capacity constraints — host slots ⌊free/S⌋ and, for each link, "VMs on
  its far side ≤ ⌊free bandwidth / B⌋" — form a laminar family, and every VM at the same
  distance costs the same. Filling the nearest distance class first is optimal (greedy on a
  laminar matroid; nearer classes are cheaper and use a subset of the constraints).

So for every node as centre (hosts, racks, pods, root) the algorithm computes in closed form
how many VMs each distance class takes, vectorised over all centres of a level; keeps the
cheapest feasible centre; and distributes each class's VMs to hosts in index order. The
footprint equals the tree DP optimum (``dcsim.model.vc.optimal_footprint``) on every instance;
the property test checks it. Ties between centres go to the lowest level, then lowest index.

Per-VM host links (``host_link: per_vm`` / ``per_vm_strict``, :mod:`dcsim.model.vc`): every
VM reserves B on its host link, so a host holds at most ⌊free bandwidth / B⌋ VMs and every
VM costs B there — exactly a centre above the hosts, whose star cost charges each VM its
host link. The links above are still hose links, so the same argument (on the tree cut
below the racks) makes the cheapest centre at level ≥ 1 exact. A host as centre is only
kept when it holds the whole VC (``per_vm``: that reserves nothing, cost 0); under
``per_vm_strict`` a host is never a centre (a VC on one host reserves N·B like any other).
"""

from __future__ import annotations

import numpy as np

from dcsim.allocators.vc_base import VCAllocator
from dcsim.allocators.vc_batch import powers_of_two
from dcsim.hookspecs import hookimpl
from dcsim.model.vc import UNLIMITED, TreeLevels, host_link_vms


def kraken_embed(levels: TreeLevels, free_cpu: np.ndarray, link_free: np.ndarray, n: int,
                 s: float, b: float, host_link: str = "hose") -> np.ndarray | None:
    """VM counts per host of a minimum-footprint embedding of VC (n, s, b), or None."""
    counts, ok = kraken_embed_batch(levels, free_cpu[None, :], link_free[None, :],
                                    np.array([n]), np.array([s], dtype=np.float64),
                                    np.array([b], dtype=np.float64), host_link)
    return counts[0] if ok[0] else None


class Kraken(VCAllocator):
    """Minimum-footprint embedding of each VC for the current state (no admission control)."""

    name = "kraken"
    description = "minimum-footprint VC embedding (centre of gravity, exact, linear in hosts)"

    def embed(self, free_cpu, link_free, n, s, b):
        return kraken_embed(self.levels, free_cpu, link_free, n, s, b, self.host_link)

    def embed_batch(self, free_cpu, link_free, n, s, b):
        return kraken_embed_batch(self.levels, free_cpu, link_free, n, s, b, self.host_link)

    def embed_sparse(self, free_cpu, link_free, n, s, b):
        """:meth:`embed_batch` as (ok, rows, hosts, VMs) triples (AHAB's lookahead)."""
        return kraken_embed_sparse(self.levels, free_cpu, link_free, n, s, b, self.host_link)


@hookimpl
def register_allocators(register):
    register(Kraken)


# ---------------------------------------------------------------------------- batched
_BIG = np.iinfo(np.int32).max  # the cost of an infeasible centre


class _Plan:
    """Index arrays, per tree and lowest centre level j0, that let every candidate centre
    of every level be scored by the same few gathers (:func:`kraken_embed_sparse`).

    Candidates are the nodes at levels j0..H, level by level in index order, so the first
    minimum of their costs is KRAKEN's tie-break (lowest level, then lowest index). The
    per-row values are gathered from ``CS`` (the levels' ``childsum`` side by side, then a
    zero column), ``SUP`` (the levels' ``sup``, then a zero column) and the link counts;
    a candidate's class k < its level reads the zero column, and a link below it is set
    to ``UNLIMITED`` (``link_below``).
    """

    def __init__(self, levels: TreeLevels, j0: int):
        self.j0, self.height = j0, H = j0, levels.height
        self.level, self.anc = lvl, anc = levels.centres(j0)
        at = np.cumsum([0] + [levels.size[k] for k in range(j0, H + 1)])
        off_cs = {k: int(at[k - j0]) for k in range(j0, H + 1)}
        zero_cs = int(at[-1])
        at = np.cumsum([0] + [levels.size[k] for k in range(j0, H)])
        off_sup = {k: int(at[k - j0]) for k in range(j0, H)}
        zero_sup = int(at[-1])
        topo = levels.topology
        #: bounds of free compute and bandwidth (the capacities), for :func:`_counts`
        self.cpu_top = float(topo.server_capacity.max(initial=0.0))
        self.link_top = float(topo.link_capacity.max(initial=0.0))
        self.cs_at = [np.where(k >= lvl, off_cs[k] + anc[k], zero_cs) for k in range(j0, H + 1)]
        self.sup_at = [None] + [np.where(k > lvl, off_sup[k - 1] + anc[k - 1], zero_sup)
                                for k in range(j0 + 1, H + 1)]
        self.link_at = [levels.uplink[m][np.maximum(anc[m], 0)] for m in range(j0, H)]
        self.link_below = [np.flatnonzero(m < lvl) for m in range(j0, H)]
        self.weight = [(2 * k - lvl).astype(np.int32) for k in range(j0, H + 1)]
        own_level = anc[lvl, np.arange(lvl.size)]  # the node's own index
        self.own = np.array([off_cs[int(k)] for k in lvl]) + own_level
        self.root = lvl == H
        self._buffers: dict[tuple[int, ...], np.ndarray] = {}

    def buffer(self, shape: tuple[int, ...]) -> np.ndarray:
        """A float64 scratch array of this shape, the same one on every call."""
        buf = self._buffers.get(shape)
        if buf is None:
            buf = self._buffers[shape] = np.empty(shape)
        return buf

    def take(self, cols: np.ndarray) -> _Plan:
        """The plan for the candidates ``cols`` only (a copy)."""
        out = object.__new__(_Plan)
        out.level, out.anc = self.level[cols], self.anc[:, cols]
        out.cs_at = [a[cols] for a in self.cs_at]
        out.sup_at = [None] + [a[cols] for a in self.sup_at[1:]]
        out.link_at = [a[cols] for a in self.link_at]
        out.link_below = [np.flatnonzero(m < out.level) for m in range(self.j0, self.height)]
        out.j0, out.height, out.cpu_top, out.link_top = (self.j0, self.height, self.cpu_top,
                                                         self.link_top)
        out._buffers = self._buffers
        out.weight = [w[cols] for w in self.weight]
        out.own, out.root = self.own[cols], self.root[cols]
        return out


def _plan(levels: TreeLevels, j0: int) -> _Plan:
    plans = levels.__dict__.setdefault("_kraken_plans", {})
    if j0 not in plans:
        plans[j0] = _Plan(levels, j0)
    return plans[j0]


def _counts(free: np.ndarray, size: np.ndarray, top: float, q: np.ndarray,
            cap: np.ndarray | None = None) -> np.ndarray:
    """:func:`dcsim.allocators.vc_batch.vm_counts` as int32: ⌊free / size + 1e-9⌋ per row,
    ``UNLIMITED`` where size[row] ≤ 0, at most ``cap`` (K, 1) if given. ``top`` bounds
    ``free`` (the capacity): below ``UNLIMITED`` quotients need no float cap. ``q`` is a
    float buffer of free's shape, reused between calls: fresh pages for a large temporary
    cost more than the arithmetic. Dividing by a power of two is multiplying by its exact
    reciprocal, which is cheaper."""
    pos = size > 0
    every = pos.all()
    sz = size if every else np.where(pos, size, 1.0)
    if powers_of_two(sz):
        np.multiply(free, (1.0 / sz)[:, None], out=q)
    else:
        np.divide(free, sz[:, None], out=q)
    q += 1e-9
    np.floor(q, out=q)
    if top / sz.min() + 1.0 >= UNLIMITED:  # a quotient may pass int32
        np.minimum(q, UNLIMITED, out=q)
    if not every:
        q[~pos] = UNLIMITED
    out = q.astype(np.int32)
    if cap is not None:
        np.minimum(out, cap, out=out)
    return out


def kraken_embed_sparse(levels: TreeLevels, free_cpu: np.ndarray, link_free: np.ndarray,
                        n: np.ndarray, s: np.ndarray, b: np.ndarray, host_link: str = "hose"):
    """Embed K VCs, one per row of K independent states: the embeddings of
    :func:`kraken_embed` row by row (tested), as (row, host, VMs) triples.

    ``free_cpu`` (K, hosts), ``link_free`` (K, links), ``n``/``s``/``b`` (K,). Returns the
    feasibility mask (K,) and three arrays: the rows, hosts and VM counts (> 0) of the
    embeddings, in no particular order. For AHAB's lookahead, whose cost is the fixed cost
    of numpy calls on small arrays, so every centre of every level is scored at once and
    the VMs are handed down only to the subtrees that get some.
    """
    H = levels.height
    K = free_cpu.shape[0]
    n32 = n.astype(np.int32)
    nn = n32[:, None]
    plan = _plan(levels, 0 if host_link == "hose" else 1)
    slots = _counts(free_cpu, s, plan.cpu_top, plan.buffer(free_cpu.shape), nn)
    lcap = _counts(link_free, b, plan.link_top, plan.buffer(link_free.shape))
    cs = [slots]
    sup = [np.minimum(slots, lcap[:, levels.uplink_cols[0]])]
    for k in range(1, H + 1):
        cs.append(levels.child_sum(sup[k - 1], k - 1))
        if k < H:
            sup.append(np.minimum(cs[k], lcap[:, levels.uplink_cols[k]]))
    zero = np.zeros((K, 1), dtype=np.int32)
    half = (nn + 1) // 2
    if host_link == "hose":
        j0 = 0  # a host may be the centre; only those that can hold N/2 somewhere are tried
        hosts = np.flatnonzero((slots >= half).any(axis=0))
        plan = plan.take(np.concatenate([hosts, np.arange(levels.n_hosts, plan.level.size)]))
    else:
        j0 = 1  # per_vm: a host is a centre only for the whole VC (below)
    CS = np.concatenate(cs[j0:] + [zero], axis=1)
    SUP = np.concatenate(sup[j0:] + [zero], axis=1)
    C = plan.level.size
    # A centre of gravity below the root has >= N/2 of the VMs in its subtree: other
    # centres cannot be strictly cheaper, so only centres that can hold N/2 are kept
    # (``out``: the others, and those that cannot hold all N).
    cost = np.zeros((K, C), dtype=np.int32)
    out = CS[:, plan.own] < half
    out &= ~plan.root
    rest = np.repeat(nn, C, axis=1)
    res = [lcap[:, at] for at in plan.link_at]  # links m = j0.., unlimited below a centre
    for r, below in zip(res, plan.link_below, strict=True):
        if below.size:
            r[:, below] = UNLIMITED
    takes = []
    for i, k in enumerate(range(j0, H + 1)):
        avail = CS[:, plan.cs_at[i]]  # class k: VMs within the level-k ancestor's subtree
        if i:  # ... but not the level-(k - 1) ancestor's; the links on the way must fit
            avail -= SUP[:, plan.sup_at[i]]
            lim = res[0]
            for r in res[1:i]:
                lim = np.minimum(lim, r)
            np.minimum(avail, lim, out=avail)
        t = np.minimum(avail, rest, out=avail)
        rest -= t
        cost += t * plan.weight[i]
        if k < H:
            for r in res[:i]:
                r -= t
        takes.append(t)
    out |= rest != 0
    cost[out] = _BIG
    rows = np.arange(K)
    best = cost.argmin(axis=1)
    ok = cost[rows, best] < _BIG
    if host_link == "per_vm":  # a host holding the whole VC costs 0: the first one wins
        whole = slots >= nn
        one = whole.any(axis=1)
        if one.any():
            _, r, h, m = _hand_down(levels, ok & ~one, best, plan, takes, sup, j0)
            on = np.flatnonzero(one)
            return (ok | one, np.concatenate([r, on]),
                    np.concatenate([h, whole[on].argmax(axis=1)]),
                    np.concatenate([m, n32[on].astype(np.int64)]))
    return _hand_down(levels, ok, best, plan, takes, sup, j0)


def _hand_down(levels: TreeLevels, ok: np.ndarray, best: np.ndarray, plan: _Plan,
               takes: list[np.ndarray], sup: list[np.ndarray], j0: int):
    """The VMs of each row's best centre handed down the tree, level by level, as
    (row, node, VMs) triples of the subtrees that get some: (ok, rows, hosts, VMs).

    At each level a node's VMs go to its children in index order, each up to its ``sup``
    (what its subtree can take through its uplink), except that the child on the path to
    the centre takes its own class instead (the VMs within it, counted separately)."""
    H = levels.height
    rows = np.arange(ok.size)
    lb = plan.level[best]
    # the best centre's class-k VMs (0 below the centre's level or without a centre)
    cls = np.zeros((H + 1, ok.size), dtype=np.int32)
    for i, k in enumerate(range(j0, H + 1)):
        cls[k] = np.where(ok, takes[i][rows, best], 0)
    path = np.where(ok, plan.anc[:, best], -1)  # (H + 1, K): -1 below the centre
    for lvl in range(H):  # the child on the path takes its own class, not its parent's
        pr = np.flatnonzero(path[lvl] >= 0)
        sup[lvl][pr, path[lvl][pr]] = 0
    er = np.flatnonzero(cls[H])
    eg = np.zeros(er.size, dtype=np.int64)
    ea = cls[H][er]
    for lvl in range(H - 1, -1, -1):
        ch = levels.children[lvl + 1][eg]  # (E, W), padded with -1 unless regular
        cap = sup[lvl][er[:, None], ch]
        if levels.arity[lvl] is None:
            cap[ch < 0] = 0
        share = np.cumsum(cap, axis=1)
        share -= cap  # before each child
        np.subtract(ea[:, None], share, out=share)
        np.maximum(share, 0, out=share)
        np.minimum(share, cap, out=share)
        i, w = np.nonzero(share)
        pr = np.flatnonzero((lvl >= lb) & (cls[lvl] > 0))
        er = np.concatenate([er[i], pr])
        eg = np.concatenate([ch[i, w], path[lvl][pr]])
        ea = np.concatenate([share[i, w], cls[lvl][pr]])
    return ok, er, eg, ea.astype(np.int64)


def kraken_embed_batch(levels: TreeLevels, free_cpu: np.ndarray, link_free: np.ndarray,
                       n: np.ndarray, s: np.ndarray, b: np.ndarray, host_link: str = "hose"):
    """Embed K VCs, one per row of K independent states: VM counts (K, hosts) and a
    feasibility mask (K,), the embeddings of :func:`kraken_embed` row by row (tested);
    :func:`kraken_embed_sparse` as dense counts."""
    ok, r, h, m = kraken_embed_sparse(levels, free_cpu, link_free, n, s, b, host_link)
    counts = np.zeros((free_cpu.shape[0], levels.n_hosts), dtype=np.int64)
    counts[r, h] = m
    return counts, ok


def hose_loads_batch(levels: TreeLevels, counts: np.ndarray, n: np.ndarray,
                     b: np.ndarray, host_link: str = "hose") -> np.ndarray:
    """:meth:`TreeLevels.hose_loads` for K rows at once: (K, links)."""
    out = np.zeros((counts.shape[0], levels.topology.n_links))
    m = counts
    nn, bb = n[:, None], b[:, None]
    out[:, levels.uplink[0]] = host_link_vms(m, nn, host_link) * bb
    for k in range(1, levels.height):
        m = np.add.reduceat(m, levels.starts[k - 1], axis=1)
        out[:, levels.uplink[k]] = np.minimum(m, nn - m) * bb
    return out
