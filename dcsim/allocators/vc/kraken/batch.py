"""KRAKEN in numpy for many requests at once: the minimum-footprint embedding of one VC
in each of K states (AHAB's lookahead), its plan per tree and the hose loads; the
module docstring of :mod:`dcsim.allocators.vc.kraken` says why it is exact."""

from __future__ import annotations

from weakref import WeakKeyDictionary

import numpy as np

from dcsim.allocators.vc.lookahead import powers_of_two
from dcsim.model.vc import UNLIMITED, TreeLevels, host_link_vms

_BIG = np.iinfo(np.int32).max  # the cost of an infeasible centre


class _Plan:
    """Index arrays, per tree and lowest centre level j0, that let every candidate centre
    of every level be scored by the same few gathers (:func:`kraken_embed_sparse`).

    Candidates are the nodes at levels j0..H, level by level in index order, so the first
    minimum of their costs is KRAKEN's tie-break (lowest level, then lowest index). The
    per-row values are gathered from ``CS`` (the levels' ``childsum`` side by side, then a
    zero column and an ``UNLIMITED`` one), ``SUP`` (the levels' ``sup``, then a zero
    column) and the link counts. A candidate's class k below its level reads the zero
    column, a link below it is set to ``UNLIMITED`` (``link_below``), and the root's own
    count reads the unlimited column (the root is always a candidate).
    """

    def __init__(self, levels: TreeLevels, j0: int):
        self.j0, self.height = j0, H = j0, levels.height
        self.level, self.anc = lvl, anc = levels.centres(j0)
        at = np.cumsum([0] + [levels.size[k] for k in range(j0, H + 1)])
        off_cs = {k: int(at[k - j0]) for k in range(j0, H + 1)}
        zero_cs, unlimited_cs = int(at[-1]), int(at[-1]) + 1
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
        self.weight_col = [w[:, None] for w in self.weight]
        own = anc[lvl, np.arange(lvl.size)]  # the node's own index
        self.own = np.array([off_cs[int(k)] for k in lvl]) + own
        self.own[lvl == H] = unlimited_cs
        self._buffers: dict[tuple[str, tuple[int, ...]], np.ndarray] = {}
        self._batch()
        cols = [levels.uplink_cols[k] for k in range(1, H)]
        #: the uplinks of every level above the hosts as one slice, if they are one
        self.upper = None
        if cols and all(isinstance(c, slice) for c in cols) and all(
                a.stop == b.start for a, b in zip(cols, cols[1:], strict=False)):
            self.upper = slice(cols[0].start, cols[-1].stop)

    def _batch(self) -> None:
        """The per-class index arrays side by side, for one gather of each kind."""
        C = self.level.size
        self.cs_all = np.concatenate(self.cs_at + [self.own])
        self.sup_all = np.concatenate(self.sup_at[1:] or [np.zeros(0, dtype=np.int64)])
        self.link_all = np.concatenate(self.link_at or [np.zeros(0, dtype=np.int64)])
        self.link_below_all = np.concatenate(
            [m * C + b for m, b in enumerate(self.link_below)] or [np.zeros(0, np.int64)])

    def buffer(self, shape: tuple[int, ...], name: str = "") -> np.ndarray:
        """A float64 scratch array of this shape, the same one on every call (per name)."""
        buf = self._buffers.get((name, shape))
        if buf is None:
            buf = self._buffers[name, shape] = np.empty(shape)
        return buf

    def take(self, cols: np.ndarray) -> _Plan:
        """The plan for the candidates ``cols`` only (sharing the buffers)."""
        out = object.__new__(_Plan)
        out.__dict__.update(self.__dict__)
        out.level, out.anc = self.level[cols], self.anc[:, cols]
        out.cs_at = [a[cols] for a in self.cs_at]
        out.sup_at = [None] + [a[cols] for a in self.sup_at[1:]]
        out.link_at = [a[cols] for a in self.link_at]
        out.link_below = [np.flatnonzero(m < out.level) for m in range(self.j0, self.height)]
        out.weight = [w[cols] for w in self.weight]
        out.weight_col = [w[:, None] for w in out.weight]
        out.own = self.own[cols]
        out._batch()
        return out


#: per TreeLevels (compared and hashed by identity), its plans by first level
_PLANS: WeakKeyDictionary[TreeLevels, dict[int, _Plan]] = WeakKeyDictionary()


def _plan(levels: TreeLevels, j0: int) -> _Plan:
    plans = _PLANS.get(levels)
    if plans is None:
        plans = _PLANS[levels] = {}
    if j0 not in plans:
        plans[j0] = _Plan(levels, j0)
    return plans[j0]


def plain_sizes(levels: TreeLevels, s: np.ndarray, b: np.ndarray) -> bool:
    """Whether every VM size in ``s`` and ``b`` is a positive power of two whose quotients
    stay below ``UNLIMITED``: :func:`kraken_embed_sparse` may then skip its per-call
    checks (AHAB's lookahead checks all its sampled VCs once)."""
    plan = _plan(levels, 1)
    return bool(s.size == 0 or (
        (s > 0).all() and (b > 0).all() and powers_of_two(s) and powers_of_two(b)
        and plan.cpu_top / s.min() + 1.0 < UNLIMITED
        and plan.link_top / b.min() + 1.0 < UNLIMITED))


def _counts(free: np.ndarray, size: np.ndarray, top: float, q: np.ndarray,
            cap: np.ndarray | None = None, plain: bool = False,
            whole: bool = False) -> np.ndarray:
    """:func:`dcsim.allocators.vc.lookahead.vm_counts` as int32: ⌊free / size + 1e-9⌋ per row,
    ``UNLIMITED`` where size[row] ≤ 0, at most ``cap`` (K, 1) if given. ``top`` bounds
    ``free`` (the capacity): below ``UNLIMITED`` quotients need no float cap. ``q`` is a
    float buffer of free's shape, reused between calls. Dividing by a power of two is
    multiplying by its exact reciprocal, which is cheaper; ``plain``: every size is one
    (:func:`plain_sizes`); ``whole``: besides, free is whole and every size ≥ 1, so
    free / size is a whole number plus at most 1 − 1/size and the ε changes no floor."""
    if plain:
        np.multiply(free, (1.0 / size)[:, None], out=q)
        if not whole:
            q += 1e-9
        np.floor(q, out=q)
    else:
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
                        n: np.ndarray, s: np.ndarray, b: np.ndarray, host_link: str = "hose",
                        plain: bool = False, integral: bool = False):
    """Embed K VCs, one per row of K independent states: the embeddings of
    :func:`kraken_embed` row by row (tested), as (row, host, VMs) triples.

    ``free_cpu`` (K, hosts), ``link_free`` (K, links), ``n``/``s``/``b`` (K,); ``plain``:
    the sizes passed :func:`plain_sizes`; ``integral``: the states are integral
    (:func:`~dcsim.allocators.vc.lookahead.integral_lookahead`: whole free CU and BU, sizes
    powers of two from 1), so no count needs the ε. Returns the feasibility mask (K,) and three
    arrays: the rows, hosts and VM counts (> 0) of the embeddings, in no particular order.
    Made for AHAB's lookahead, whose cost is the fixed cost of numpy calls on small
    arrays: every centre of every level is scored at once, and the VMs are handed down
    only to the subtrees that get some.
    """
    H = levels.height
    K = K0 = free_cpu.shape[0]
    nn = n.astype(np.int32)[:, None]
    plan = _plan(levels, 0 if host_link == "hose" else 1)
    up0 = levels.uplink_cols[0]
    kept = None  # the rows still scored, when some were dropped
    if plain and host_link == "per_vm_strict" and isinstance(up0, slice):
        # hosts are never centres: only min(slots, host link slots) is needed, and
        # ⌊min(x, y) + ε⌋ = min(⌊x + ε⌋, ⌊y + ε⌋), so the host level is one pass fewer each
        q = plan.buffer(free_cpu.shape)
        np.multiply(free_cpu, (1.0 / s)[:, None], out=q)
        q2 = np.multiply(link_free[:, up0], (1.0 / b)[:, None],
                         out=plan.buffer(free_cpu.shape, "host links"))
        np.minimum(q, q2, out=q)
        if not integral:
            q += 1e-9
        np.floor(q, out=q)
        slots = None
        sup0 = q.astype(np.int32)
        np.minimum(sup0, nn, out=sup0)
        kept = np.flatnonzero(sup0.sum(axis=1) >= n)  # else the hosts hold < N VMs in all
        if 4 * kept.size <= 3 * K:  # a quarter or more cannot embed (under load, most
            # futures' VCs): score only the others, worth the gathers then
            if kept.size == 0:
                empty = np.zeros(0, dtype=np.int64)
                return np.zeros(K0, dtype=bool), empty, empty, empty
            sup0, nn, link_free, b = sup0[kept], nn[kept], link_free[kept], b[kept]
            K = kept.size
        else:
            kept = None
        upper = plan.upper  # the links above the hosts, when they are one slice
        if upper is None:
            lcap = _counts(link_free, b, plan.link_top, plan.buffer(link_free.shape, "upper"),
                           None, True, integral)
        else:  # the host links' counts are never read
            lcap = np.empty(link_free.shape, dtype=np.int32)
            up = link_free[:, upper]
            lcap[:, upper] = _counts(up, b, plan.link_top, plan.buffer(up.shape, "upper"),
                                     None, True, integral)  # not q's buffer
        sup = [sup0]
    else:
        upper = None
        slots = _counts(free_cpu, s, plan.cpu_top, plan.buffer(free_cpu.shape), nn, plain)
        lcap = _counts(link_free, b, plan.link_top, plan.buffer(link_free.shape), None, plain)
        sup = [np.minimum(slots, lcap[:, up0])]
    cs = [slots]
    for k in range(1, H + 1):
        cs.append(levels.child_sum(sup[k - 1], k - 1))
        if k < H:
            sup.append(np.minimum(cs[k], lcap[:, levels.uplink_cols[k]]))
    half = (nn + 1) // 2
    if host_link == "hose":
        j0 = 0  # a host may be the centre; only those that can hold N/2 somewhere are tried
        hosts = np.flatnonzero((slots >= half).any(axis=0))
        plan = plan.take(np.concatenate([hosts, np.arange(levels.n_hosts, plan.level.size)]))
    else:
        j0 = 1  # per_vm: a host is a centre only for the whole VC (below)
    # Candidates × states from here on (node-major): gathering rows of a (nodes, K) array
    # is several times cheaper than gathering columns of a (K, nodes) one.
    edge = np.empty((2, K), dtype=np.int32)
    edge[0], edge[1] = 0, UNLIMITED
    CS = np.concatenate([c.T for c in cs[j0:]] + [edge])
    SUP = np.concatenate([x.T for x in sup[j0:]] + [edge[:1]])
    # A centre of gravity below the root has >= N/2 of the VMs in its subtree: other
    # centres cannot be strictly cheaper, so only centres that can hold N/2 are kept; the
    # others start UNLIMITED VMs short, so that none of them places all N. Every class's
    # values are gathered at once: (classes, C, K) and (links on the way, C, K) blocks.
    C = plan.level.size
    n_cls = H + 1 - j0
    got = np.take(CS, plan.cs_all, axis=0).reshape(n_cls + 1, C, K)  # classes, then own
    rest = np.where(got[n_cls] < half.T, UNLIMITED, nn.T)
    takes = got[:n_cls]  # becomes each class's VMs, in place
    if n_cls > 1:
        below = np.take(SUP, plan.sup_all, axis=0).reshape(n_cls - 1, C, K)
        if upper is not None:  # only the links above the hosts were counted
            links = lcap[:, upper].T
            at = plan.link_all - upper.start
        else:
            links, at = lcap.T, plan.link_all
        res = np.take(links, at, axis=0).reshape(n_cls - 1, C, K)  # links m = j0..H-1
        if plan.link_below_all.size:  # ... unlimited below a centre
            res.reshape(-1, K)[plan.link_below_all] = UNLIMITED
    cost = np.zeros(rest.shape, dtype=np.int32)
    for i, k in enumerate(range(j0, H + 1)):
        t = takes[i]  # class k: VMs within the level-k ancestor's subtree ...
        if i:  # ... but not the level-(k - 1) ancestor's; the links on the way must fit
            t -= below[i - 1]
            lim = res[0]
            for m in range(1, i):
                lim = np.minimum(lim, res[m])
            np.minimum(t, lim, out=t)
        np.minimum(t, rest, out=t)
        rest -= t
        cost += t * plan.weight_col[i]
        if k < H:
            for m in range(i):
                res[m] -= t
    cost[rest != 0] = _BIG
    rows = np.arange(K)
    best = cost.argmin(axis=0)
    ok = cost[best, rows] < _BIG
    cls = np.zeros((H + 1, K), dtype=np.int32)  # the best centre's VMs per class
    cls[j0:] = takes[:, best, rows]
    cls *= ok
    path = plan.anc[:, best]  # (H + 1, K): the centre's ancestors, -1 below it
    if host_link == "per_vm":  # a host holding the whole VC costs 0: the first one wins
        whole = slots >= nn
        one = whole.any(axis=1)
        if one.any():
            on = np.flatnonzero(one)
            ok |= one
            cls[:, on] = 0
            cls[0, on] = nn[on, 0]
            path[:, on] = -1
            path[0, on] = whole[on].argmax(axis=1)
            j0 = 0
    r, h, m = _hand_down(levels, cls, path, sup, j0)
    if not ok.all():  # a row without an embedding has no VMs, but below an overdrawn
        keep = ok[r]  # link (a negative sup) the hand-down would give it some
        r, h, m = r[keep], h[keep], m[keep]
    if kept is not None:  # back to the caller's rows
        every = np.zeros(K0, dtype=bool)
        every[kept] = ok
        return every, kept[r], h, m
    return ok, r, h, m


def _hand_down(levels: TreeLevels, cls: np.ndarray, path: np.ndarray, sup: list[np.ndarray],
               j0: int):
    """The VMs of each row's centre handed down the tree: (rows, hosts, VMs) of the hosts
    that get some. ``cls`` (H + 1, K): the VMs of each class (0 for a row without an
    embedding); ``path`` (H + 1, K): the centre's ancestor at each level (-1 below it, and
    at every level below ``j0``).

    At each level a node's VMs go to its children in index order, each up to its ``sup``
    (what its subtree can take through its uplink), except that the child on the path to
    the centre takes its own class instead. Above the racks every node's amount is kept
    (small arrays); the racks' VMs go only to the hosts of racks that get some."""
    H = levels.height
    on_path = [None] * H  # per level: flat indices of the centre's ancestor, and its rows
    for lvl in range(j0, H):  # the child on the path takes its own class, not its parent's
        pr = (path[lvl] >= 0).nonzero()[0]
        flat = pr * levels.size[lvl]
        flat += path[lvl][pr]
        on_path[lvl] = flat, pr
        sup[lvl].ravel()[flat] = 0
    amount = cls[H][:, None]  # the root's
    for lvl in range(H - 1, 0, -1):
        cap = sup[lvl]
        share = np.add.accumulate(cap, axis=1, dtype=cap.dtype)
        share -= cap  # before each child: its earlier siblings' room
        if levels.size[lvl + 1] > 1:
            share -= share[:, levels.first_child[lvl]]
            amount = amount[:, levels.parent[lvl]]
        np.subtract(amount, share, out=share)
        np.maximum(share, 0, out=share)
        np.minimum(share, cap, out=share)
        if on_path[lvl] is not None:
            flat, pr = on_path[lvl]
            share.ravel()[flat] += cls[lvl][pr]
        amount = share
    flat = amount.ravel().nonzero()[0]  # the level-1 groups (racks) with VMs, then their hosts
    er, eg = np.divmod(flat, amount.shape[1])
    ea = amount.ravel()[flat]
    ch = levels.children[1][eg]  # (E, W), padded with -1 unless regular
    cap = sup[0][er[:, None], ch]
    if levels.arity[0] is None:
        cap[ch < 0] = 0
    share = np.add.accumulate(cap, axis=1, dtype=cap.dtype)
    share -= cap
    np.subtract(ea[:, None], share, out=share)
    np.maximum(share, 0, out=share)
    np.minimum(share, cap, out=share)
    i = np.flatnonzero(share)  # cheaper than a 2-d nonzero
    r, h, m = er[i // share.shape[1]], ch.ravel()[i], share.ravel()[i]
    if j0 == 0:  # hosts as centres
        pr = np.flatnonzero((path[0] >= 0) & (cls[0] > 0))
        if pr.size:
            r = np.concatenate([r, pr])
            h = np.concatenate([h, path[0][pr]])
            m = np.concatenate([m, cls[0][pr]])
    return r, h, m.astype(np.int64)


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
