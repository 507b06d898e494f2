"""Power models: what a server draws at a utilisation (plugin kind ``power_model``).

The built-ins (:mod:`dcsim.power.builtin`) are ``constant``, ``linear`` and ``table``;
installed packages add their own through the ``register_power_models`` hook, like
allocators. The engine's energy accounting is :mod:`dcsim.modes.loss.power`.
"""

from dcsim.power.base import PowerModel

__all__ = ["PowerModel"]
