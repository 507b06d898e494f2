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

- An installed dcsim (``pip install``, editable or not) puts ``dcsim-gymnasium.pth`` in
  site-packages: at every interpreter start it installs an import hook
  (``_dcsim_gymnasium``, a top-level module that imports nothing of dcsim) which registers
  them the moment ``gymnasium`` is imported. So ``import gymnasium as gym;
  gym.make("dcsim/Nara-v0")`` works in a fresh interpreter. Gymnasium 1.0 dropped the
  entry-point plugins that did this at its own import; before 1.0 the ``gymnasium.envs``
  entry point the package also declares does it.
- ``import dcsim`` registers them too, when Gymnasium is installed (at once if it is
  imported, else by the same hook): a checkout on ``PYTHONPATH`` has no start-up file.
  ``gym.make("dcsim:dcsim/Nara-v0")`` (Gymnasium's ``module:id`` form, which imports
  ``dcsim`` first) works everywhere. The ``dcsim`` command itself skips this: it never makes
  an environment by id.

Registration stores only the ids and the classes' import paths: neither the environments'
modules nor PyTorch are imported until an environment is made.
"""

from __future__ import annotations

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


def register_when_imported() -> None:
    """Register the environments now if Gymnasium is imported already, else the moment
    it is (an import hook; idempotent)."""
    if "gymnasium" in sys.modules:
        register_envs()
    else:
        from _dcsim_gymnasium import install

        install()
