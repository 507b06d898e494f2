"""dcsim's Gymnasium environments, by id, and the one function that registers them.

====================  ==========================================  =========================
id                    class                                       what one step is
====================  ==========================================  =========================
``dcsim/Nara-v0``     :class:`dcsim.learn.nara_env.NaraEnv`       one server of a request
``dcsim/VMR2L-v0``    :class:`dcsim.learn.vmr2l_env.VMR2LEnv`     one migration (VM, slot)
``dcsim/VMR2L-        :class:`dcsim.learn.vmr2l_twostep.          the VM, then its slot
TwoStep-v0``          VMR2LTwoStepEnv`                            (one plain mask each)
====================  ==========================================  =========================

How they reach Gymnasium's registry (``docs/reference/environments.md`` says the same for
users):

- ``import dcsim`` registers them when Gymnasium is installed (the ``learn`` extra), so
  ``gym.make("dcsim/Nara-v0")`` works after it, and ``gym.make("dcsim:dcsim/Nara-v0")``
  (Gymnasium's ``module:id`` form, which imports ``dcsim`` first) works in a fresh
  interpreter. The ``dcsim`` command itself skips it: it never makes an environment by id.
- The package also declares them under the ``gymnasium.envs`` entry-point group, which
  Gymnasium before 1.0 loads when it is imported (so ``import gymnasium`` alone suffices
  there). Gymnasium 1.0 removed that plugin loading; from 1.0 on, a package's environments
  are registered by importing it (``gym.register_envs(dcsim)`` is Gymnasium's idiom for an
  import that is only for that).

Registration stores only the ids and the classes' import paths: neither the environments'
modules nor PyTorch are imported until an environment is made.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys

__all__ = ["ENVIRONMENTS", "register_envs", "register_when_imported"]

#: id -> Gymnasium entry point ("module:Class")
ENVIRONMENTS: dict[str, str] = {
    "dcsim/Nara-v0": "dcsim.learn.nara_env:NaraEnv",
    "dcsim/VMR2L-v0": "dcsim.learn.vmr2l_env:VMR2LEnv",
    "dcsim/VMR2L-TwoStep-v0": "dcsim.learn.vmr2l_twostep:VMR2LTwoStepEnv",
}


def register_envs() -> None:
    """Register every id of :data:`ENVIRONMENTS` with Gymnasium that is not registered yet
    (idempotent; the ``gymnasium.envs`` entry point)."""
    import gymnasium as gym

    for env_id, entry_point in ENVIRONMENTS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=entry_point)


class _AfterGymnasiumLoads(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """An import hook: finds ``gymnasium`` with the other finders, runs its own loader, then
    :func:`register_envs`; removes itself at the first import of ``gymnasium``."""

    def __init__(self) -> None:
        self._loader: importlib.abc.Loader | None = None

    def find_spec(self, name, path=None, target=None):
        if name != "gymnasium" or self._loader is not None:
            return None
        sys.meta_path.remove(self)   # the real finders alone, from here on
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        self._loader = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        self._loader.exec_module(module)
        module.__spec__.loader = self._loader
        register_envs()


def register_when_imported() -> None:
    """Register the environments now if Gymnasium is imported already, else the moment
    it is (an import hook; idempotent)."""
    if "gymnasium" in sys.modules:
        register_envs()
    elif not any(isinstance(f, _AfterGymnasiumLoads) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterGymnasiumLoads())
