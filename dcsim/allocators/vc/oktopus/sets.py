"""OKTOPUS's feasible VM counts for many requests at once: each node's set of feasible
counts as an interval when it is one and as a bitset otherwise (:class:`Sets`), summed
level by level up the tree and split back down (:func:`sum_level`, :func:`split_level`),
with exact small-set arithmetic in Python ints (:func:`_py_sum`, :func:`_py_split`)."""

from __future__ import annotations

import weakref

import numpy as np

from dcsim.allocators.vc.oktopus.bitsets import high_bit, hose_bits, popcount, sum_sets
from dcsim.model.vc import TreeLevels

_ONE = np.uint64(1)
_ALL = np.uint64(0xFFFF_FFFF_FFFF_FFFF)

ODD = 4096.0  # Sets.sizes: stands for a set that is not a non-empty interval {0..a}
_PY_MAX = 12  # _exact_sums, _exact_splits: up to this many groups, in Python ints


class Sets:
    """The feasible-count sets of one level's nodes for the rows, mostly without bits.

    Node i of row r holds {x ≤ cap : x ≤ c or x ≥ N − c}, with c (−1..N) the hose limit
    of its uplink (:func:`~dcsim.allocators.vc.lookahead.hose_limit`; None: N, no limit,
    where ``sizes`` are given) and cap < N (for the rows still unplaced) the top of
    {0..cap}, what its subtree holds, as floats; except the nodes in ``exact``
    ((rows, nodes, bits)): groups whose subtree holds an arbitrary set, given as bits.
    """

    def __init__(self, c: np.ndarray | None, cap: np.ndarray, n: np.ndarray, nf: np.ndarray,
                 exact=None, sizes: np.ndarray | None = None):
        self.c, self.cap, self.n, self.nf = c, cap, n, nf  # nf: n as a float column
        self.exact = exact
        self._sizes = sizes  # :meth:`sizes`, when the caller knows it (read only)
        self.inside = None
        if exact is not None:  # what each subtree holds, as bits (all: see cap)
            self.inside = np.full(cap.shape, _ALL)
            self.inside[exact[0], exact[1]] = exact[2]

    def sizes(self) -> np.ndarray:
        """(rows, nodes) floats: a where the set is {0..a}, else :data:`ODD`.

        With low = min(c, cap), the set is {0..low} ∪ {N − c..cap}: empty if low < 0, else
        {0..cap} if N − c ≤ low + 1, {0..low} if N − c > cap, two intervals otherwise.
        """
        if self._sizes is not None:
            return self._sizes
        c, cap = self.c, self.cap
        low = np.minimum(c, cap)
        gap = self.nf - c  # N − c
        upper = gap <= cap
        a = np.where(upper, cap, low)
        low += 1
        np.greater(gap, low, out=gap)  # a gap between the two parts ...
        odd = np.logical_and(gap, upper, out=upper)  # ... and the upper part not empty
        odd |= low < 1
        np.copyto(a, ODD, where=odd)
        if self.exact is not None:
            rr, gg, _ = self.exact
            a[rr, gg] = _bit_sizes(self.bits(rr, gg[:, None])[:, 0])
        return a

    def bits(self, rr: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """(groups, width) bit sets of the nodes ``cols`` (−1: padding, {0}) of rows rr."""
        idx = (rr[:, None], np.maximum(cols, 0))
        c = self.n[rr, None] if self.c is None else self.c[idx].astype(np.int64)
        sets = hose_bits(c, self.n[rr, None], self.cap[idx].astype(np.int64))
        if self.inside is not None:
            sets &= self.inside[idx]
        sets[cols < 0] = 1
        return sets


def _bit_sizes(sets: np.ndarray) -> np.ndarray:
    """:meth:`Sets.sizes` of bit sets: a non-empty {0..a} is ``(x + 1) & (x | 1) == 0``."""
    interval = ((sets + _ONE) & (sets | _ONE)) == 0
    return np.where(interval, popcount(sets) - 1.0, ODD)


class _Topology:
    """Per-topology constants of the batch embedder, computed once per :class:`TreeLevels`.

    ``uplink[k]``: the uplinks of level k, as a slice where they are contiguous (a view,
    not a gather). Per level k ≥ 1: ``kids[k]`` = ``levels.children[k]``, ``uniform[k]`` whether
    every group has the same number of children (then a (rows, level k − 1) array is a
    (rows, groups, width) one by a mere reshape), ``ones[k]`` and ``upper[k]`` (strictly
    upper triangular): sums over each group's children, and over each child's earlier
    siblings, as one matrix product.
    """

    def __init__(self, levels: TreeLevels):
        self.ones_hosts = np.ones(levels.n_hosts)
        self.uplink = []
        for up in levels.uplink:
            lo = int(up[0]) if up.size else 0
            contiguous = np.array_equal(up, np.arange(lo, lo + up.size))
            self.uplink.append(slice(lo, lo + up.size) if contiguous else up)
        self.kids: list = [None]
        self.uniform: list = [None]
        self.ones: list = [None]
        self.upper: list = [None]
        for k in range(1, levels.height + 1):
            kids = levels.children[k]
            w = kids.shape[1]
            self.kids.append(kids)
            self.uniform.append(np.array_equal(kids.ravel(), np.arange(kids.size)))
            self.ones.append(np.ones(w))
            self.upper.append(np.triu(np.ones((w, w)), 1))


_TOPOLOGIES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def sets_topology(levels: TreeLevels) -> _Topology:
    topo = _TOPOLOGIES.get(levels)
    if topo is None:
        topo = _TOPOLOGIES[levels] = _Topology(levels)
    return topo


def _grouped(x: np.ndarray, topo: _Topology, k: int) -> np.ndarray:
    """(rows, groups, width) view of level-(k−1) values x per level-k group; padding 0."""
    kids = topo.kids[k]
    if topo.uniform[k]:
        return x.reshape(x.shape[0], kids.shape[0], kids.shape[1])
    pad = np.zeros((x.shape[0], 1), dtype=x.dtype)
    return np.concatenate([x, pad], axis=1)[:, kids]  # kid −1: the padding column


def sum_level(sets: Sets, topo: _Topology, k: int, live: np.ndarray):
    """Every level-k group's Minkowski sum of its children's ``sets``.

    The children's sizes a (or :data:`ODD`) summed per group by one matrix product: a
    group holds {0..total} unless a mark shows (total ≥ ODD); those groups (of the rows in
    ``live``: the others already have their subtree) get the exact sum. Returns the
    totals, the children's a (rows, groups, width; for :func:`split_level`), the
    exactly summed groups as a mask (None: no group has a mark) and as (rows, groups,
    bit sets), or None for none.
    """
    a3 = _grouped(sets.sizes(), topo, k)
    r, g, w = a3.shape
    total = (a3.reshape(r * g, w) @ topo.ones[k]).reshape(r, g)
    if total.max(initial=0.0) < ODD:  # the common case: every group an interval
        return total, a3, None, None
    odd = total >= ODD
    odd &= live[:, None]
    rr, gg = np.nonzero(odd)
    if rr.size == 0:
        return total, a3, odd, None
    return total, a3, odd, (rr, gg, _exact_sums(sets.bits(rr, topo.kids[k][gg])))


def split_level(er: np.ndarray, eg: np.ndarray, ea: np.ndarray, sets: Sets,
                 a3: np.ndarray, odd: np.ndarray, topo: _Topology, j: int):
    """Amounts ``ea`` of level-j groups ``eg`` of rows ``er`` (entries, each (row, group)
    once, ``ea`` > 0) split among the groups' children, greedily: the children's entries
    (rows, level j − 1 nodes, amounts > 0).

    Under a parent whose children hold {0..a_c} (``a3``, from :func:`sum_level`), the
    greedy descent (each child the most it can take such that the rest stays feasible for
    the children after it) gives child c min(a_c, max(0, A − Σ a of its earlier
    siblings)): one matrix product over the entries. Parents in ``odd`` get the exact
    greedy (:func:`_exact_splits`). Amounts are floats (exact small integers); only the
    few groups that get VMs are touched, not every group of every row.
    """
    ac = a3[er, eg]
    take = ea[:, None] - ac @ topo.upper[j]
    np.maximum(take, 0.0, out=take)
    np.minimum(take, ac, out=take)
    kids = topo.kids[j][eg]
    o = None if odd is None else odd[er, eg]
    if o is not None and o.any():
        take[o] = _exact_splits(ea[o].astype(np.int64), sets.bits(er[o], kids[o]))
    keep = take > 0
    keep &= kids >= 0
    at = np.nonzero(keep)[0]
    return er[at], kids[keep], take[keep]


def _exact_sums(sets: np.ndarray) -> np.ndarray:
    """Exact Minkowski sums of each row of bit sets (groups, width): in Python ints for a
    few groups (cheaper than numpy calls), else :func:`_sum_all`."""
    if sets.shape[0] > _PY_MAX:
        return _sum_all(sets)
    out = []
    for row in sets.tolist():
        acc = row[0]
        for x in row[1:]:
            acc = _py_sum(acc, x)
        out.append(acc)
    return np.array(out, dtype=np.uint64)


def _exact_splits(amount: np.ndarray, sets: np.ndarray) -> np.ndarray:
    """The greedy split of each ``amount`` (groups,) among the children whose bit sets are
    the row of ``sets`` (groups, width): (groups, width) takes; Python ints for a few."""
    if sets.shape[0] > _PY_MAX:
        return _split_sets(amount, sets)
    rows = zip(amount.tolist(), sets.tolist(), strict=True)
    return np.array([_py_split(m, row) for m, row in rows], dtype=np.int64)


_MASK64 = (1 << 64) - 1


def _py_sum(a: int, b: int) -> int:
    """:func:`sum_sets` on two Python ints: for each run {lo..lo + m − 1} of b, a smeared
    over m shifts (by doubling: log m steps) and moved up by lo."""
    out = 0
    while b:
        lo = (b & -b).bit_length() - 1
        t = b >> lo
        m = (~t & (t + 1)).bit_length() - 1  # the run's length: t's lowest clear bit
        b = (t >> m) << (lo + m)
        smear, span = a, 1  # smear: a shifted by each of 0..span − 1
        while 2 * span <= m:
            smear |= smear << span
            span *= 2
        smear |= smear << (m - span)  # 0..span − 1 and m − span..m − 1: all of 0..m − 1
        out |= smear << lo
    return out & _MASK64


def _py_split(amount: int, sets: list[int]) -> list[int]:
    """:func:`_split_sets` for one group, in Python ints."""
    suffix = [1]  # suffix[j]: what children j+1.. can take together (built backwards)
    for x in reversed(sets[1:]):
        suffix.append(_py_sum(suffix[-1], x))
    suffix.reverse()
    takes = []
    for x, rest in zip(sets, suffix, strict=True):
        t = min(amount, x.bit_length() - 1)
        while not (x >> t & 1 and rest >> (amount - t) & 1):
            t -= 1  # the largest feasible take (one always exists)
        takes.append(t)
        amount -= t
    return takes


def _sum_all(sets: np.ndarray) -> np.ndarray:
    """Minkowski sum of the bit sets along the last axis: pairwise halving for small
    arrays (few numpy calls), one child at a time for large ones (fewer shifts)."""
    if sets[..., 0].size >= 256:
        acc = sets[..., 0]
        for j in range(1, sets.shape[-1]):
            acc = sum_sets(acc, sets[..., j])  # shifts by the child's (few) elements
        return acc
    while sets.shape[-1] > 1:
        if sets.shape[-1] % 2:
            pad = np.ones(sets.shape[:-1] + (1,), dtype=np.uint64)
            sets = np.concatenate([sets, pad], axis=-1)
        a, c = sets[..., 0::2], sets[..., 1::2]
        sets = sum_sets(np.maximum(a, c), np.minimum(a, c))
    return sets[..., 0]


def _split_sets(amount: np.ndarray, sets: np.ndarray) -> np.ndarray:
    """:func:`~.reference._split` on bit sets: each amount (groups,) to the group's children (sets:
    groups, width; padding {0}) in order, each the most it can take such that the rest
    stays feasible for the children after it. Returns (groups, width) takes."""
    # rsuffix[j]: bit 63 - z set iff children j+1.. together can take z (sums reflected)
    rsuffix = [np.full(amount.size, np.uint64(1) << np.uint64(63))]
    for j in range(sets.shape[1] - 1, 0, -1):
        rsuffix.append(sum_sets(rsuffix[-1], sets[:, j], right=True))
    rsuffix.reverse()
    rem = amount.astype(np.uint64)
    takes = np.empty(sets.shape, dtype=np.int64)
    for j in range(sets.shape[1]):
        # x with rem - x in suffix: bit 63 - rem + x of rsuffix, i.e. bit x after >>
        good = sets[:, j] & (rsuffix[j] >> (np.uint64(63) - rem))
        takes[:, j] = high_bit(good)  # the largest feasible x (one always exists)
        rem -= takes[:, j].astype(np.uint64)
    return takes
