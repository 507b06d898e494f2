"""dcsim: a discrete-event datacenter simulator whose allocation algorithms are plugins.

What a plugin author needs is importable from here::

    from dcsim import Allocator, Choice, Placement, Request, StateView, hookimpl
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("dcsim")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

from dcsim.allocators import Allocator, Choice  # noqa: E402, I001
from dcsim.errors import ConfigError, DcsimError, PluginError  # noqa: E402
from dcsim.hookspecs import hookimpl  # noqa: E402
from dcsim.model import ClusterState, Placement, Request, StateView, Topology  # noqa: E402

__all__ = [
    "Allocator",
    "Choice",
    "ClusterState",
    "ConfigError",
    "DcsimError",
    "Placement",
    "PluginError",
    "Request",
    "StateView",
    "Topology",
    "__version__",
    "hookimpl",
]
