"""dcsim: a discrete-event datacenter simulator whose allocation algorithms are plugins.

What a plugin author needs is importable from here::

    from dcsim import Allocator, Choice, Placement, Request, StateView, hookimpl

and, for a policy that spreads a request over several servers and checks the bandwidth
between them (docs/howto/network-aware-allocator.md)::

    from dcsim import MultiServerAllocator, Partial, PathService
"""

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from dcsim.errors import ConfigError, DcsimError, PluginError
from dcsim.hookspecs import hookimpl
from dcsim.lazy_exports import lazy_getattr

try:
    __version__ = version("dcsim")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

if TYPE_CHECKING:  # what the lazy names below are, for type checkers and IDEs
    from dcsim.allocators import Allocator, Choice
    from dcsim.allocators.multi import MultiServerAllocator, Partial
    from dcsim.model import ClusterState, Placement, Request, StateView, Topology
    from dcsim.model.paths import PathService

#: names imported on first use (PEP 562), so that ``import dcsim`` (and every ``dcsim``
#: command, which imports the package first) does not load the model, networkx and pandas
#: before it knows it needs them
_LAZY = {"Allocator": "dcsim.allocators", "Choice": "dcsim.allocators",
         "ClusterState": "dcsim.model", "MultiServerAllocator": "dcsim.allocators.multi",
         "Partial": "dcsim.allocators.multi", "PathService": "dcsim.model.paths",
         "Placement": "dcsim.model", "Request": "dcsim.model", "StateView": "dcsim.model",
         "Topology": "dcsim.model"}


__getattr__ = lazy_getattr(__name__, _LAZY)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def _register_environments() -> None:
    """Register dcsim's Gymnasium environments (:mod:`dcsim.environments`) when
    Gymnasium is installed, so that ``gym.make("dcsim/Nara-v0")`` works after ``import
    dcsim`` (Gymnasium 1.0 dropped the entry-point plugins that did this at its own
    import): at once if Gymnasium is imported, else when it is (an import hook: nothing
    is imported until then)."""
    from importlib.util import find_spec

    if find_spec("gymnasium") is None:
        return
    from dcsim.environments import register_when_imported

    register_when_imported()


_register_environments()


__all__ = [
    "Allocator",
    "Choice",
    "ClusterState",
    "ConfigError",
    "DcsimError",
    "MultiServerAllocator",
    "Partial",
    "PathService",
    "Placement",
    "PluginError",
    "Request",
    "StateView",
    "Topology",
    "__version__",
    "hookimpl",
]
