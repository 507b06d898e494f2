"""The errors a user can cause; the CLI turns each into one line and a non-zero exit."""


class DcsimError(Exception):
    """Base class of every error dcsim reports to a user without a traceback."""


class ConfigError(DcsimError):
    """An experiment, topology or trace file is invalid; the message names the field or file."""


class PluginError(DcsimError):
    """A plugin is missing, misconfigured, or returned an invalid choice; the message names it."""


class CodeChangedError(DcsimError):
    """Finished runs in an output directory were made by other code (dcsim's, a plugin's,
    a library's version) than would run now, so resuming would mix the two; the message
    names what changed."""


class StateError(DcsimError):
    """A reservation or release would drive a resource negative or above its capacity."""


class naming_path:  # noqa: N801 - used as a context manager, like contextlib's
    """Give an ``OSError`` raised inside without a file name (a full disk while writing)
    the ``path`` being written, so the CLI's one line says where."""

    def __init__(self, path) -> None:
        self.path = str(path)

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, e, tb) -> None:
        if isinstance(e, OSError) and e.filename is None:
            raise OSError(e.errno, e.strerror or str(e), self.path) from e
