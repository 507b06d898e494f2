"""Names a package exports but imports on first use (PEP 562), so that importing the
package costs only what its importer uses (issue #37: ``import dcsim`` and every ``dcsim``
command would otherwise load the model, networkx and pandas before knowing they need them).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def lazy_getattr(package: str, exports: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``exports`` maps each name to the module
    that defines it; the value is imported at first access and then kept in the package's
    namespace (later accesses are plain lookups)."""

    def __getattr__(name: str) -> Any:
        if name in exports:
            value = getattr(importlib.import_module(exports[name]), name)
            setattr(sys.modules[package], name, value)
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
