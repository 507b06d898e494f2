"""dcsim: a discrete-event datacenter simulator whose allocation algorithms are plugins."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("dcsim")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

from dcsim.errors import ConfigError, DcsimError, PluginError  # noqa: E402

__all__ = ["ConfigError", "DcsimError", "PluginError", "__version__"]
