"""Compiled kernels (numba, the ``fast`` extra): whether to use them (``DCSIM_KERNELS``).
The tree as flat tables for them is :mod:`dcsim.allocators.vc.kernel_tables`; this module
imports nothing of the model, so a command can ask before it loads anything.

Two places use them: ``first_fit``'s scan of the free columns
(:mod:`dcsim.allocators.single_kernel`, which stops at the first fit), and AHAB's lookahead.
AHAB's lookahead embeds a few dozen small VCs in a few dozen states per decision; numpy
spends most of that in the fixed cost of its calls, not in the work. An embedder may
therefore offer a *rollout kernel* (``lookahead_kernel``): the whole lookahead, every
step of every row, as one call to a function compiled by numba (the ``fast`` extra). A
kernel computes exactly what the numpy batch code computes, float for float (the same
operations in the same order where order matters; ``tests/allocators/test_kernels.py`` compares
rewards and final states), so the rows of a run do not depend on it.

``DCSIM_KERNELS`` chooses, for both: ``auto`` (default) uses the kernels when numba is
installed, ``numpy`` never, ``numba`` always (an error without numba). Compiled kernels are
cached on disk only in a private folder of the user's (:mod:`dcsim.allocators.kernel_cache`,
``DCSIM_KERNEL_CACHE``): numba reads its cache with pickle.
"""

from __future__ import annotations

import importlib.util
import os

from dcsim.errors import ConfigError

#: The values of ``DCSIM_KERNELS``.
KERNEL_CHOICES = ("auto", "numpy", "numba")


def kernel_choice() -> str:
    """``DCSIM_KERNELS`` (default ``auto``), checked: a ConfigError names a bad value."""
    choice = os.environ.get("DCSIM_KERNELS", "auto").strip().lower() or "auto"
    if choice not in KERNEL_CHOICES:
        raise ConfigError(f"DCSIM_KERNELS={choice!r}: expected one of "
                          f"{', '.join(KERNEL_CHOICES)}")
    return choice


def kernels_on() -> bool:
    """Whether the compiled kernels are to be used (``DCSIM_KERNELS``, module docstring)."""
    choice = kernel_choice()
    if choice == "numpy":
        return False
    found = importlib.util.find_spec("numba") is not None
    if choice == "numba" and not found:
        raise ConfigError("DCSIM_KERNELS=numba needs numba: pip install 'dcsim[fast]'")
    return found
