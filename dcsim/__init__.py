"""dcsim: a discrete-event datacenter simulator whose allocation algorithms are plugins.

What a plugin author needs is importable from here::

    from dcsim import Allocator, Choice, Placement, Request, StateView, hookimpl

and, for a policy that spreads a request over several servers and checks the bandwidth
between them (docs/howto/network-aware-allocator.md)::

    from dcsim import MultiServerAllocator, Partial, PathService
"""

import sys as _sys


def _is_command() -> bool:
    """Whether this process is the ``dcsim`` command (the console script, or ``python -m
    dcsim``), not a program or test that imports the package."""
    import os

    name = os.path.basename(_sys.argv[0]) if _sys.argv else ""
    if name in ("dcsim", "dcsim.exe", "dcsim-script.py"):
        return True
    argv = getattr(_sys, "orig_argv", [])
    return "-m" in argv and argv[argv.index("-m") + 1:argv.index("-m") + 2] == ["dcsim"]


def _interrupted_at_startup(signum, frame):  # pragma: no cover - runs in a child process
    """Ctrl-C while the command is still importing: one line and exit status 130 (a
    KeyboardInterrupt here would print the traceback of whichever import it hit)."""
    import os

    os.write(2, b"interrupted\n")
    os._exit(130)


def end_startup_interrupts() -> None:
    """Hand SIGINT back to Python (KeyboardInterrupt) if the start-up handler still holds
    it: the command calls this once its imports are done, so that a command with work to
    save can catch the interrupt itself."""
    import signal

    if signal.getsignal(signal.SIGINT) is _interrupted_at_startup:
        signal.signal(signal.SIGINT, signal.default_int_handler)


if _is_command():  # :class:`dcsim.cli._Group` hands SIGINT back to Python once it runs
    import signal as _signal

    _signal.signal(_signal.SIGINT, _interrupted_at_startup)

from importlib.metadata import PackageNotFoundError, version  # noqa: E402

try:
    __version__ = version("dcsim")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

from typing import TYPE_CHECKING  # noqa: E402

from dcsim.errors import ConfigError, DcsimError, PluginError  # noqa: E402
from dcsim.hookspecs import hookimpl  # noqa: E402
from dcsim.lazy_exports import lazy_getattr  # noqa: E402

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
    import): at once if Gymnasium is imported, else when it is. The ``dcsim`` command skips
    it: it makes no environment by id."""
    from importlib.util import find_spec

    if find_spec("gymnasium") is None:
        return
    from dcsim.environments import register_when_imported

    register_when_imported()


if not _is_command():
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
