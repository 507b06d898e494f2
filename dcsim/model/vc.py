"""Virtual clusters on trees: level structure, the hose model, and an exact reference optimum.

A virtual cluster (VC) is N VMs of S compute units each, every VM connected to a virtual
switch at B bandwidth units (Oktopus's hose model). On a tree, a link with m of the N VMs
below it must carry ``min(m, N - m) * B``; the *footprint* of an embedding is the sum of
these reservations over all links (AHAB paper, Sec. II).

Host links. Every embedder takes the option ``host_link`` (:data:`HOST_LINK_RULES`), the
one rule for what a host's uplink reserves when it holds m of the N VMs, used both for the
reservation (:meth:`TreeLevels.hose_loads`) and by every feasibility check:

* ``hose`` (default): ``min(m, N - m) * B``, like every other link;
* ``per_vm``: ``m * B``, each VM reserving B on its host link (AHAB paper Algorithm 1
  line 9, "Reserve S, B on host(vm)"), except that a VC entirely on one host reserves
  nothing (the paper's text, Sec. III-B: "no bandwidth reservation is needed");
* ``per_vm_strict``: ``m * B`` always, a VC on one host included (Algorithm 1 read
  literally, which conflicts with that sentence).

Links above the hosts always reserve the hose amount.

:class:`TreeLevels` turns a balanced tree topology (every server at the same depth, as the
AHAB fat-tree) into per-level numpy arrays, so that embedders work level by level with a
handful of vectorised operations instead of walking the tree.
KRAKEN's exact tree dynamic program (Fuerst et al. 2016), slow and obvious, is the oracle
its tests compare against; it lives with the other test references in ``tests/naive.py``.
"""

from __future__ import annotations

import numpy as np

from dcsim.errors import ConfigError
from dcsim.model.paths import PathService
from dcsim.model.placement import Placement
from dcsim.model.topology import Topology

#: Stand-in for "no limit" in VM counts (a VC has at most a few hundred VMs).
UNLIMITED = 1 << 30

#: Values of the ``host_link`` option of every VC embedder (see the module docstring).
HOST_LINK_RULES = ("hose", "per_vm", "per_vm_strict")


def host_link_vms(m, n, rule: str = "hose"):
    """VMs' worth of bandwidth (to multiply by B) that a host link with m of the VC's n VMs
    reserves under ``rule`` (:data:`HOST_LINK_RULES`); elementwise on arrays."""
    if rule == "hose":
        return np.minimum(m, n - m)
    if rule == "per_vm":
        return np.where(m < n, m, 0)  # the whole VC on this host: nothing to reserve
    return m


class TreeLevels:
    """A balanced tree as levels: 0 = hosts, 1 = their parent switches, ..., H = the root.

    ``group[k][h]`` is the level-k group (subtree) of host h; ``uplink[k][g]`` the link from
    level-k group g to its parent; ``parent[k][g]`` the level-(k+1) group above g.
    ``children[k]`` (k ≥ 1; ``children[0]`` is None) lists the level-(k-1) children of each
    level-k group and ``hosts_of[k]`` the hosts of each level-k group, both as
    :func:`padded_members` matrices (index order, padded with -1).
    """

    def __init__(self, topology: Topology):
        ps = PathService(topology)
        if not ps.is_tree or topology.n_links == 0:
            raise ConfigError(f"topology {topology.name!r}: virtual clusters need a tree")
        anc = ps.server_ancestors
        if (anc < 0).any():
            raise ConfigError(
                f"topology {topology.name!r}: virtual clusters need every server at the same "
                "depth (a balanced tree such as fat_tree)"
            )
        self.topology = topology
        self.height = H = ps.height
        n = topology.n_servers
        self.n_hosts = n
        groups = [np.arange(n, dtype=np.int64)]
        for k in range(1, H + 1):
            _, inv = np.unique(ps.server_ancestor_nodes[:, k - 1], return_inverse=True)
            groups.append(inv.astype(np.int64))
        self.group = groups
        #: (H + 1, hosts): ``group`` as one matrix, row k the level-k group of every host
        self.group_table = np.stack(groups)
        self.size = [int(g.max()) + 1 for g in groups]  # groups per level
        self.uplink: list[np.ndarray] = []
        self.parent: list[np.ndarray] = []
        for k in range(H):
            up = np.empty(self.size[k], dtype=np.int64)
            up[groups[k]] = anc[:, k]
            par = np.empty(self.size[k], dtype=np.int64)
            par[groups[k]] = groups[k + 1]
            self.uplink.append(up)
            self.parent.append(par)
        # ancestor of each level-j group at each level k >= j
        self.up = [[None] * (H + 1) for _ in range(H + 1)]
        for j in range(H + 1):
            cur = np.arange(self.size[j], dtype=np.int64)
            for k in range(j, H + 1):
                self.up[j][k] = cur
                if k < H:
                    cur = self.parent[k][cur]
        for k in range(H):
            if np.any(np.diff(self.parent[k]) < 0):
                raise ConfigError(f"topology {topology.name!r}: servers must be listed subtree "
                                  "by subtree (as the fat_tree builder does)")
        #: per level, the index of the first sibling of each group (for in-order filling)
        self.first_child = [np.searchsorted(p, p) for p in self.parent]
        #: per level k < H, where each level-(k+1) group's children start among level k
        #: (children are contiguous, so sums over children are one ``np.add.reduceat``)
        self.starts = [np.searchsorted(self.parent[k], np.arange(self.size[k + 1]))
                       for k in range(H)]
        #: per level k, where each level-k group's hosts start (hosts of a group are
        #: contiguous, so a sum over them is one ``np.add.reduceat``)
        self.host_starts = [np.searchsorted(g, np.arange(size))
                            for g, size in zip(groups, self.size, strict=True)]
        self.link_level = np.full(topology.n_links, -1, dtype=np.int64)
        for k in range(H):
            self.link_level[self.uplink[k]] = k
        self._anc_flat = anc.ravel()
        self.children: list[np.ndarray | None] = [None] + [
            padded_members(self.parent[k - 1], self.size[k]) for k in range(1, H + 1)
        ]
        self.hosts_of = [padded_members(groups[k], self.size[k]) for k in range(H + 1)]
        #: per level k < H, the level's uplinks as columns of a (K, links) array: a slice
        #: (a view, no copy) when they are consecutive links in group order, else indices
        self.uplink_cols = [_as_slice(u) for u in self.uplink]
        #: per level k < H, the children every level-(k+1) group has when all have the same
        #: number (sums over children are then adds of strided views), else None
        self.arity: list[int | None] = []
        for k in range(H):
            a, rem = divmod(self.size[k], self.size[k + 1])
            regular = rem == 0 and np.array_equal(self.starts[k],
                                                  np.arange(self.size[k + 1]) * a)
            self.arity.append(a if regular else None)
        self._centres: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def child_sum(self, x: np.ndarray, k: int) -> np.ndarray:
        """Row-wise sums of integer counts x (K, size[k]), or whole-number floats, over the
        children of each level-(k+1) group: (K, size[k+1]), x's dtype.

        The same values as ``np.add.reduceat(x, starts[k], axis=1)`` (integers: any order
        of addition is exact), several times faster on regular trees: numpy reduces a short
        inner axis slowly, so a few children are added as strided views instead.
        """
        a = self.arity[k]
        if self.size[k + 1] == 1:
            return x.sum(axis=1, keepdims=True, dtype=x.dtype)
        if a is None or a > 16:
            return np.add.reduceat(x, self.starts[k], axis=1, dtype=x.dtype)
        v = x.reshape(x.shape[0], self.size[k + 1], a)
        out = v[:, :, 0].copy()
        for i in range(1, a):
            out += v[:, :, i]
        return out

    def centres(self, lowest: int) -> tuple[np.ndarray, np.ndarray]:
        """Every node at levels ``lowest``..H, level by level in index order: each one's
        level (C,) and its ancestors (H + 1, C) (row k: its level-k ancestor, itself at its
        own level, -1 below it). Cached."""
        if lowest not in self._centres:
            H = self.height
            level = np.concatenate([np.full(self.size[j], j, dtype=np.int64)
                                    for j in range(lowest, H + 1)])
            anc = np.full((H + 1, level.size), -1, dtype=np.int64)
            at = 0
            for j in range(lowest, H + 1):
                for k in range(j, H + 1):
                    anc[k, at:at + self.size[j]] = self.up[j][k]
                at += self.size[j]
            self._centres[lowest] = (level, anc)
        return self._centres[lowest]

    def hose_loads(self, counts: np.ndarray, n: int, b: float,
                   host_link: str = "hose") -> np.ndarray:
        """Bandwidth each link must reserve when host h holds ``counts[h]`` of n VMs: the
        hose amount, host links by the ``host_link`` rule (module docstring)."""
        out = np.zeros(self.topology.n_links)
        m = counts
        out[self.uplink[0]] = host_link_vms(m, n, host_link) * b
        for k in range(1, self.height):
            m = np.add.reduceat(m, self.starts[k - 1])
            out[self.uplink[k]] = np.minimum(m, n - m) * b
        return out

    def placement(self, counts: np.ndarray, per_vm: np.ndarray, n: int, b: float,
                  host_link: str = "hose") -> Placement:
        """The :class:`Placement` of a VC with ``counts`` VMs per host (resources per VM)."""
        hosts = np.flatnonzero(counts)
        loads = self.hose_loads(counts, n, b, host_link)
        links = np.flatnonzero(loads > 0)
        return Placement(hosts, counts[hosts, None].astype(np.float64) * per_vm, links,
                         loads[links])


def _as_slice(idx: np.ndarray) -> slice | np.ndarray:
    """``idx`` as a slice when it is a run of consecutive integers, else itself."""
    if idx.size and np.array_equal(idx, np.arange(idx[0], idx[0] + idx.size)):
        return slice(int(idx[0]), int(idx[0]) + idx.size)
    return idx


def padded_members(parent: np.ndarray, n_parents: int) -> np.ndarray:
    """(n_parents, W) matrix listing each parent's items in index order, padded with -1.

    ``parent[i]`` is item i's parent; W is the largest number of items of one parent.
    """
    order = np.argsort(parent, kind="stable")
    p = parent[order]
    starts = np.searchsorted(p, np.arange(n_parents))
    pos = np.arange(p.size) - starts[p]
    out = np.full((n_parents, int(pos.max()) + 1 if p.size else 0), -1, dtype=np.int64)
    out[p, pos] = order
    return out


def vm_slots(free_cpu: np.ndarray, s: float) -> np.ndarray:
    """How many VMs of size ``s`` each host can take (``UNLIMITED`` if s is 0)."""
    if s <= 0:
        return np.full(free_cpu.shape, UNLIMITED, dtype=np.int64)
    return np.floor(free_cpu / s + 1e-9).astype(np.int64)


def link_slots(link_free: np.ndarray, b: float) -> np.ndarray:
    """How many VMs' worth of hose traffic (b each) each link can still carry."""
    if b <= 0:
        return np.full(link_free.shape, UNLIMITED, dtype=np.int64)
    return np.floor(link_free / b + 1e-9).astype(np.int64)
