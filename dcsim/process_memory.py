"""How the ``dcsim`` program's processes allocate memory, so a long replay stays flat.

A replay streams its trace in row groups and writes its rows in row groups: each batch
allocates and frees a few arrays of megabytes (numpy's through the C library's ``malloc``,
Arrow's through its own pool). With glibc's default, a freed block of that size raises the
threshold above which ``malloc`` maps memory afresh, so later blocks come from the heap and
fragment it; Arrow's default pool (mimalloc) keeps segments of its own. Either way the
resident size creeps with the number of batches (issue #47, item 9;
``benchmarks/bench_memory.py`` measures it, and its README section has the figures).

:func:`tune`, called by the ``dcsim`` program before anything imports pyarrow, fixes both:

- ``MALLOC_MMAP_THRESHOLD_`` = 256 KiB: blocks above it are mapped and returned to the
  system when freed (glibc reads the variable at a process's start, so this process is set
  with ``mallopt`` and the variable is left for the worker processes it starts);
- ``ARROW_DEFAULT_MEMORY_POOL`` = ``system``: Arrow allocates with ``malloc`` too.

Either variable already set by the user is kept as it is (set both to the libraries'
defaults, ``MALLOC_MMAP_THRESHOLD_`` unset and ``ARROW_DEFAULT_MEMORY_POOL=mimalloc``, to
compare). Nothing is changed when dcsim is imported as a library: the settings are the
program's, not a side effect of ``import dcsim``. Results do not depend on them: the same
seed gives the same rows (``tests/test_process_memory.py``).
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import MutableMapping

#: blocks above this many bytes are mapped afresh and unmapped when freed (glibc)
MMAP_THRESHOLD = 256 * 1024
#: Arrow's allocator for the program's processes
ARROW_POOL = "system"
#: glibc's mallopt parameter for the mmap threshold (malloc.h)
M_MMAP_THRESHOLD = -3


def _mallopt(param: int, value: int) -> bool:
    """glibc's ``mallopt`` in this process; False where the C library has none."""
    try:
        libc = ctypes.CDLL(None)
        fn = libc.mallopt
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn(param, value) == 1


def tune(environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Set the program's allocators (see the module's text); return what was set."""
    environ = os.environ if environ is None else environ
    done: dict[str, str] = {}
    if "ARROW_DEFAULT_MEMORY_POOL" not in environ and "pyarrow" not in sys.modules:
        environ["ARROW_DEFAULT_MEMORY_POOL"] = done["ARROW_DEFAULT_MEMORY_POOL"] = ARROW_POOL
    if "MALLOC_MMAP_THRESHOLD_" not in environ and _mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD):
        environ["MALLOC_MMAP_THRESHOLD_"] = done["MALLOC_MMAP_THRESHOLD_"] = str(MMAP_THRESHOLD)
    return done
