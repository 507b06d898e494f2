"""dcsim's Gymnasium environments, by id, and the one function that registers them.

====================  ==========================================  =========================
id                    class                                       what one step is
====================  ==========================================  =========================
``dcsim/Nara-v0``     :class:`dcsim.learn.nara.env.NaraEnv`       one server of a request
``dcsim/VMR2L-v0``    :class:`dcsim.learn.vmr2l.env.VMR2LEnv`     one migration (VM, slot)
``dcsim/VMR2L-        :class:`dcsim.learn.vmr2l.env.              the VM, then its slot
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
  ``dcsim`` first) works everywhere.

Registration stores only the ids and the classes' import paths: neither the environments'
modules nor PyTorch are imported until an environment is made.

Rendering: every environment takes Gymnasium's ``render_mode`` keyword (``None``, the
default, or one of :data:`RENDER_MODES`, its ``metadata["render_modes"]``; anything else is a
:class:`~dcsim.errors.ConfigError` from :func:`checked_render_mode`). ``"ansi"``: ``render()``
returns a few lines of text (the step, the utilisation per resource, what is pending);
``"rgb_array"``: an image of the same state from :func:`bars_image` (what Stable-Baselines3's
``make_vec_env`` asks for by default, and its ``VecVideoRecorder`` records). Nothing is drawn
until ``render()`` is called.
"""

from __future__ import annotations

import sys

__all__ = ["ENVIRONMENTS", "RENDER_MODES", "bars_image", "checked_render_mode", "register_envs",
           "register_when_imported"]

#: id -> Gymnasium entry point ("module:Class")
ENVIRONMENTS: dict[str, str] = {
    "dcsim/Nara-v0": "dcsim.learn.nara.env:NaraEnv",
    "dcsim/VMR2L-v0": "dcsim.learn.vmr2l.env:VMR2LEnv",
    "dcsim/VMR2L-TwoStep-v0": "dcsim.learn.vmr2l.env:VMR2LTwoStepEnv",
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


# ---------------------------------------------------------------------------- rendering
#: the render modes of every environment (its ``metadata["render_modes"]``), besides None
RENDER_MODES: tuple[str, ...] = ("ansi", "rgb_array")


class Rendered:
    """``render()`` for an environment that draws itself as text (``render_text()``,
    ``render_mode="ansi"``) and as an image (``render_image()``, ``"rgb_array"``): None
    without a render mode."""

    render_mode: str | None = None

    def render(self):
        if self.render_mode == "ansi":
            return self.render_text()
        if self.render_mode == "rgb_array":
            return self.render_image()
        return None


def checked_render_mode(render_mode: object, env_id: str) -> str | None:
    """``render_mode`` if the environments support it (None or one of :data:`RENDER_MODES`);
    otherwise a :class:`~dcsim.errors.ConfigError` naming it and the supported ones."""
    if render_mode is None or (isinstance(render_mode, str) and render_mode in RENDER_MODES):
        return render_mode
    from dcsim.errors import ConfigError

    why = ("the environments open no window: 'ansi' returns text to print, 'rgb_array' an "
           "image, which gymnasium.make(..., render_mode='human') shows with pygame"
           if render_mode == "human" else "unknown render mode")
    supported = ", ".join(["None", *map(repr, RENDER_MODES)])
    raise ConfigError(f"{env_id}: render_mode {render_mode!r} is not supported ({why}); "
                      f"supported: {supported}")


#: bar colours per resource, in the topology's order (matplotlib's tab10)
_BAR_COLOURS = ((31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40),
                (148, 103, 189), (140, 86, 75), (227, 119, 194), (127, 127, 127))
#: the strip under a unit: 1 green (offered: the mask allows it), 2 dark (taken by the
#: decision in progress), 3 red (what a migration left)
_MARK_COLOURS = {1: (44, 160, 44), 2: (40, 40, 40), 3: (214, 39, 40)}
_BAR_HEIGHT, _BAR_WIDTH, _GAP, _STRIP = 64, 2, 1, 4


def bars_image(used, marks=None):
    """An RGB image (uint8, height × width × 3) of ``used`` (units × resources, each the
    used fraction of the unit's capacity, in [0, 1]; a row of NaN is padding, left blank):
    one group of bars per unit (a server, a host's NUMA node), one bar per resource, on a
    light grey background as tall as the capacity; under each unit a strip coloured by
    ``marks`` (units, int: 0 none, 1 green, 2 dark, 3 red). The size depends only on the
    shape of ``used``, so copies of one environment draw images of one size."""
    import numpy as np

    used = np.asarray(used, dtype=np.float64)
    n_units, n_res = used.shape
    unit_w = n_res * _BAR_WIDTH + _GAP
    width = n_units * unit_w + _GAP
    height = _BAR_HEIGHT + _GAP + _STRIP + _GAP
    img = np.full((height, width, 3), 255, dtype=np.uint8)
    real = ~np.isnan(used).all(axis=1)
    bars = np.rint(np.clip(np.nan_to_num(used), 0.0, 1.0) * _BAR_HEIGHT).astype(np.int64)
    # filled[r, u, k]: row r (0 at the top) of unit u's bar k is coloured
    filled = (_BAR_HEIGHT - 1 - np.arange(_BAR_HEIGHT))[:, None, None] < bars[None]
    colours = np.array([_BAR_COLOURS[k % len(_BAR_COLOURS)] for k in range(n_res)],
                       dtype=np.uint8)
    back = np.where(real, 225, 255).astype(np.uint8)[None, :, None, None]
    block = np.where(filled[..., None], colours[None, None], back)   # (rows, U, R, 3)
    block = np.repeat(block, _BAR_WIDTH, axis=2).reshape(_BAR_HEIGHT, n_units, -1, 3)
    block = np.concatenate(                                             # the gap after each
        [block, np.full((_BAR_HEIGHT, n_units, _GAP, 3), 255, np.uint8)], axis=2)
    img[:_BAR_HEIGHT, _GAP:] = block.reshape(_BAR_HEIGHT, -1, 3)
    if marks is not None:
        strip = np.full((n_units, 3), 255, dtype=np.uint8)
        marks = np.asarray(marks)
        for code, colour in _MARK_COLOURS.items():
            strip[marks == code] = colour
        row = np.concatenate([np.repeat(strip[:, None], unit_w - _GAP, axis=1),
                              np.full((n_units, _GAP, 3), 255, np.uint8)], axis=1)
        top = _BAR_HEIGHT + _GAP
        img[top:top + _STRIP, _GAP:] = row.reshape(1, -1, 3)
    return img
