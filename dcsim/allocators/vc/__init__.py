"""Virtual-cluster allocators (the AHAB paper, Zerwas et al. 2018): where each piece lives.

In one line, for KRAKEN: AHAB's lookahead is :mod:`.lookahead` (numpy) and
:mod:`.lookahead_kernel`, KRAKEN's batch :mod:`.kraken.batch` and kernel :mod:`.kraken.kernel`,
its references ``tests/kraken_reference.py`` (dense batch) and ``tests/naive.py`` (tree DP).

* :mod:`.embedder`: the :class:`~.embedder.VCAllocator` contract every embedder implements.
* AHAB (:mod:`.ahab`) and STRAWMAN (:mod:`.strawman`): admission around any embedder.
* The lookahead: :mod:`.lookahead` (numpy; :func:`~.lookahead.advance`, ``reserve_rows``
  and the row helpers the batch embedders share), :mod:`.lookahead_kernel` (numba; the
  host-link rules and the reservation every compiled rollout shares).
* One package per embedder, each with its plugin in ``__init__``, ``batch`` (numpy, K
  states at once) and ``kernel`` (numba, the whole lookahead in one call):
  :mod:`.kraken` (no one-row reference: one row is a batch of one),
  :mod:`.oktopus` (``reference``: FFT count sets, also the batch's fallback; ``sets``: the
  batch's count sets), :mod:`.tetris` (``reference``: ρ, the greedy and the one-row
  embedding, also the batch's fallback; ``all_pairs``: the batch's all-pairs fallback).
* The slow references only tests use live under ``tests/``, not here: the dense KRAKEN
  batch (``tests/kraken_reference.py``) and the exact tree DP, ``optimal_footprint``
  (``tests/naive.py``); each algorithm's tests are in ``tests/allocators/vc/test_<name>.py``.
"""
