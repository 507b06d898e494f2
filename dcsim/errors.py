"""The errors a user can cause; the CLI turns each into one line and a non-zero exit."""


class DcsimError(Exception):
    """Base class of every error dcsim reports to a user without a traceback."""


class ConfigError(DcsimError):
    """An experiment, topology or trace file is invalid; the message names the field or file."""


class PluginError(DcsimError):
    """A plugin is missing, misconfigured, or returned an invalid choice; the message names it."""


class StateError(DcsimError):
    """A reservation or release would drive a resource negative or above its capacity."""
