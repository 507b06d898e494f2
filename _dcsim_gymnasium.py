"""dcsim's Gymnasium environments registered the moment Gymnasium is imported, in any
interpreter of an environment where dcsim is installed.

``dcsim-gymnasium.pth`` (installed beside this module) imports it when the interpreter
starts, so that ``import gymnasium as gym; gym.make("dcsim/Nara-v0")`` works without
importing dcsim first: Gymnasium 1.0 dropped the entry-point plugins that did this at its
own import. It costs one import of this file and one function call per later import; it
imports nothing of dcsim, and nothing at all until ``gymnasium`` itself is imported, then
calls :func:`dcsim.environments.register_envs` and removes itself. Nothing it does can break
another program: a failure at start-up is swallowed by the ``.pth`` line (even a
``SystemExit``), and one while registering (dcsim uninstalled but these two files left, say)
is a ``RuntimeWarning``, never an exception out of ``import gymnasium``. ``import dcsim`` installs
the same hook (:func:`dcsim.environments.register_when_imported`) where the start-up file
is absent (a checkout on ``PYTHONPATH``).
"""

import sys


class AfterGymnasiumLoads:
    """An import hook (a finder on ``sys.meta_path``): finds ``gymnasium`` with the other
    finders, runs its loader, then registers dcsim's environments; removes itself at the
    first import of ``gymnasium``."""

    def __init__(self):
        self._loader = None

    def find_spec(self, name, path=None, target=None):
        if name != "gymnasium" or self._loader is not None:
            return None
        import importlib.util

        if self in sys.meta_path:
            sys.meta_path.remove(self)  # the real finders alone, from here on
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        self._loader = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        module.__spec__.loader = self._loader
        try:  # a failure here must never break ``import gymnasium`` in another program
            from dcsim.environments import register_envs

            register_envs()
        except (Exception, SystemExit) as e:  # dcsim removed, broken, or exiting
            import warnings

            warnings.warn(f"dcsim's Gymnasium environments are not registered ({type(e).__name__}: "
                          f"{e}); reinstall dcsim, or remove {__file__} and "
                          "dcsim-gymnasium.pth from site-packages", RuntimeWarning,
                          stacklevel=2)


def install():
    """Put the hook first on ``sys.meta_path`` unless it is there already (idempotent)."""
    if not any(isinstance(f, AfterGymnasiumLoads) for f in sys.meta_path):
        sys.meta_path.insert(0, AfterGymnasiumLoads())
