"""The Tetris alignment score of the Nara baselines (``tetris``, and the first server of
``nalb`` and ``nulb``: :mod:`dcsim.allocators.multi.baselines`), in every reading the options name.

The score of server ``s`` for a request is ``Σ_r w_r · free_r(s) · demand_r`` plus a
bandwidth term for the server's link, times a locality penalty outside the anchor's rack.
Two scales:

* dcsim's scale-free reading of the 2021 paper's App. D.1 (``bandwidth_term: own_link``,
  the default, and ``authors_misaligned``): ``w_r = 1 / capacity_r²`` and the link term is
  the free share of the link times the request's share of it;
* the Nara authors' arithmetic (``own_raw``, ``authors_raw``; ``zawaki/nara_revision``
  ``scripts/rollout.py`` ``tetris()``): every node feature and the request's node demand
  scaled by 1/10 (``w_r = 1/100``, written for 2021's 10-unit servers), the link term raw
  free channels times the channels the request takes per pair. Their global
  l2-normalisation scales every score alike and does not change the choice.

The two coincide on the 2021 topologies (10-unit servers, capacity-1 links); on the 2023
optical ones (16-unit servers, 8-32-channel links) the authors' link term is 25-400 times
heavier. ``authors_*`` also reproduce their code's indexing of the link values.
"""

from __future__ import annotations

import numpy as np

from dcsim.allocators.multi.rack_index import lexicographic_order as _lexicographic_order
from dcsim.allocators.multi.rack_index import own_link_scores
from dcsim.allocators.multi.step import Partial
from dcsim.model import StateView

#: The Nara authors' ``tetris()`` scales every node feature and the request's node demand by
#: 1/10 (``scripts/rollout.py``: written for the 2021 paper's 10-unit servers), whatever the
#: servers' capacity: a node term ``free · demand / 100``.
AUTHORS_NODE_SCALE = 0.1

#: ``bandwidth_term`` values that score with the authors' raw scale (node terms / 100, link
#: term in raw free bandwidth) instead of dividing by each capacity squared.
RAW_TERMS = ("authors_raw", "own_raw")
#: ``bandwidth_term`` values whose link values land on other servers' rows, as the authors'
#: code indexes them.
MISALIGNED_TERMS = ("authors_misaligned", "authors_raw")


def bandwidth_scores(partial: Partial, view: StateView, kind: str) -> np.ndarray:
    """The Tetris score's bandwidth term per server.

    ``own_link``: each server's own link (the best of its links when it has several), its
    free bandwidth over capacity, times the request's bandwidth over that capacity.
    ``own_raw``: the same link's raw free bandwidth times the request's raw bandwidth (the
    Nara authors' scale: free channels × channels per pair). ``authors_misaligned`` and
    ``authors_raw`` (the scale of ``own_link`` and of ``own_raw``): the Nara authors'
    ``tetris()`` (``scripts/rollout.py`` 306-337) puts the link values of the eligible
    servers, in server-index order, against feature rows in name order (``Resource_0,
    Resource_1, Resource_10, ...``), padded with zeros in front: the server whose index has
    lexicographic rank ``k`` gets the value of eligible server ``k - n_ineligible`` (zero
    when negative).
    """
    n = view.free.shape[0]
    if partial.bandwidth <= 0 or view.link_free.shape[0] == 0:
        return np.zeros(n)
    own = own_link_scores(partial, view, raw=kind in RAW_TERMS)
    if kind not in MISALIGNED_TERMS:
        return own
    valid = np.flatnonzero(partial.eligible())
    lex = _lexicographic_order(n)
    out = np.zeros(n)
    out[lex[n - valid.size:]] = own[valid]
    return out


def node_weights(view: StateView, bandwidth_term: str) -> np.ndarray:
    """Per server and resource, the factor of ``free × demand`` in the Tetris score:
    ``1 / capacity²``, or the Nara authors' constant ``1/100`` with a raw ``bandwidth_term``
    (the same floats on 10-unit servers)."""
    if bandwidth_term in RAW_TERMS:
        return np.full(view.free.shape, AUTHORS_NODE_SCALE ** 2)
    return view.inv_capacity ** 2


def tetris_scores(partial: Partial, view: StateView, inv_cap2: np.ndarray,
                  locality_penalty: float = 0.9, anchor: str = "first",
                  demand: str = "remaining", bandwidth_term: str = "own_link",
                  carried: int = -1) -> np.ndarray:
    """Tetris alignment of every server with ``partial``'s demand (-inf: ineligible); the
    defaults are the ``tetris`` allocator's.

    ``inv_cap2`` is the node term's factor per server and resource (:func:`node_weights`:
    ``1 / capacity²``, or ``1/100`` for a raw ``bandwidth_term``). ``demand``: the
    ``remaining`` demand or the ``full`` request (the authors' code). ``bandwidth_term``
    (``none``, ``own_link``, ``own_raw``, ``authors_misaligned``, ``authors_raw``) adds
    :func:`bandwidth_scores`. Servers
    in another rack than the anchor server are multiplied by ``locality_penalty``; the
    anchor is the request's ``first`` chosen server, the ``previous`` one, ``carried``
    (server ``carried``, e.g. one chosen for an earlier request) or ``none``.
    """
    vec = partial.remaining if demand == "remaining" else partial.request.demand
    score = (view.free * inv_cap2) @ vec
    if bandwidth_term != "none":
        score = score + bandwidth_scores(partial, view, bandwidth_term)
    at = partial.anchor(anchor, carried)
    if at >= 0:
        rack = view.topology.server_rack
        if rack[at] >= 0:
            score[rack != rack[at]] *= locality_penalty
    score[~partial.eligible()] = -np.inf
    return score
