"""Nara's multi-server allocators: a request spread over servers chosen one at a time.

* :mod:`.step`: the shared allocation step (:func:`allocate_multi`,
  :class:`MultiServerAllocator`, :class:`Partial`), re-exported here;
* :mod:`.paths`: candidate paths ranked by link weight;
* :mod:`.rack_index` (per-rack maxima of the free resources) and :mod:`.rack_search` (the
  choosers that search racks before servers);
* :mod:`.baselines`: the papers' baselines (random, first/best fit, tetris, nalb, nulb, ...),
  with :mod:`.tetris_score` their Tetris alignment score;
* :mod:`.learned`: the learned ``nara`` allocator (observation, numpy GNN, checkpoints).
"""

from dcsim.allocators.multi.paths import PathWeight, link_weight, link_weights, weighted_k_paths
from dcsim.allocators.multi.step import (
    Chooser,
    Eligibility,
    MultiServerAllocator,
    PairPaths,
    Partial,
    PathFinder,
    Reservation,
    allocate_multi,
    allocate_multi_steps,
    allocate_multi_stepwise,
    path_service,
)

__all__ = ["Chooser", "Eligibility", "MultiServerAllocator", "PairPaths", "Partial",
           "PathFinder", "PathWeight", "Reservation", "allocate_multi", "allocate_multi_steps",
           "allocate_multi_stepwise", "link_weight", "link_weights", "path_service",
           "weighted_k_paths"]
