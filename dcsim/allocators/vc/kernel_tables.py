"""What the VC embedders hand their compiled lookahead kernels (:mod:`dcsim.kernels` decides
whether they are used): the tree as padded int64 tables (:class:`TreeTables`) and the
``lookahead_kernel`` callable that runs a kernel module's ``rollouts`` (:func:`rollout`)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from weakref import WeakKeyDictionary

import numpy as np

from dcsim.model.vc import TreeLevels


def rollout(module: str, *args, accept: Callable[[np.ndarray], bool] | None = None):
    """An embedder's ``lookahead_kernel``: ``run(cpu, lf, ns, ss, bs, gain, reward)`` calls
    ``dcsim.allocators.<module>.rollouts`` with those and ``args`` and returns True, or
    returns False at once when ``accept(ns)`` says the VCs are not the kernel's."""
    rollouts = importlib.import_module(f"dcsim.allocators.{module}").rollouts

    def run(cpu, lf, ns, ss, bs, gain, reward):
        if accept is not None and not accept(ns):
            return False
        rollouts(cpu, lf, ns, ss, bs, gain, reward, *args)
        return True
    return run


class TreeTables:
    """A :class:`TreeLevels` as padded int64 tables for compiled code (cached per levels):
    ``sizes`` (H + 1,); ``parent`` and ``uplink`` (H, widest level), row k the level-k
    groups' parent group and uplink (padded with -1); ``group`` (H + 1, hosts), each
    host's group per level; ``host_start`` and ``child_start``."""

    def __init__(self, levels: TreeLevels):
        H = levels.height
        self.height = H
        self.sizes = np.array(levels.size, dtype=np.int64)
        width = int(self.sizes.max())
        self.parent = np.full((max(H, 1), width), -1, dtype=np.int64)
        self.uplink = np.full((max(H, 1), width), -1, dtype=np.int64)
        for k in range(H):
            self.parent[k, :levels.size[k]] = levels.parent[k]
            self.uplink[k, :levels.size[k]] = levels.uplink[k]
        self.group = np.ascontiguousarray(levels.group_table, dtype=np.int64)
        #: (H + 1, widest level + 1): where each level-k group's hosts start (contiguous),
        #: then the number of hosts
        self.host_start = np.zeros((H + 1, width + 1), dtype=np.int64)
        for k in range(H + 1):
            self.host_start[k, :levels.size[k]] = levels.host_starts[k]
            self.host_start[k, levels.size[k]] = levels.n_hosts
        #: (H + 1, widest level + 1): where each level-k group's children start among
        #: level k - 1 (contiguous), then their number (row 0 unused)
        self.child_start = np.zeros((H + 1, width + 1), dtype=np.int64)
        for k in range(1, H + 1):
            self.child_start[k, :levels.size[k]] = levels.starts[k - 1]
            self.child_start[k, levels.size[k]] = levels.size[k - 1]
        up0 = levels.uplink_cols[0]
        #: whether the host links are one slice of the link columns (KRAKEN's fast path)
        self.host_links_slice = isinstance(up0, slice)


#: per TreeLevels (compared and hashed by identity), for as long as it lives
_TREE_TABLES: WeakKeyDictionary[TreeLevels, TreeTables] = WeakKeyDictionary()


def tree_tables(levels: TreeLevels) -> TreeTables:
    """The :class:`TreeTables` of ``levels``, made once."""
    tables = _TREE_TABLES.get(levels)
    if tables is None:
        tables = _TREE_TABLES[levels] = TreeTables(levels)
    return tables
