"""Plugin discovery on pluggy: built-ins and installed packages register through the same hooks.

Third-party packages declare ``[project.entry-points.dcsim]`` in their ``pyproject.toml``; the
entry point's module implements hooks from :mod:`dcsim.hookspecs`. ``DCSIM_PLUGINS``
restricts which installed plugins load: a comma-separated list of entry-point names (empty
string = none; unset = all). Built-ins always load.

A *local* plugin is the same kind of module without a package: a Python file (or an
importable module) an experiment names under ``plugins:`` (:func:`load_local`), registered
under the name ``local:<its path>``; its code is part of every run's fingerprint like an
installed plugin's, so editing the file makes ``--resume`` refuse.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pluggy

from dcsim import hookspecs
from dcsim.errors import PluginError

ENTRY_POINT_GROUP = "dcsim"
ENV_VAR = "DCSIM_PLUGINS"
#: the built-in plugin modules, by the kind they register. Each kind's modules are imported
#: the first time something of that kind is looked up (``dcsim reschedule`` imports no
#: allocator, so neither networkx nor the model)
BUILTIN: dict[str, tuple[str, ...]] = {
    "allocator": ("dcsim.allocators.single", "dcsim.allocators.vc.kraken",
                  "dcsim.allocators.vc.ahab", "dcsim.allocators.vc.oktopus",
                  "dcsim.allocators.vc.tetris", "dcsim.allocators.vc.strawman",
                  "dcsim.allocators.multi.baselines", "dcsim.allocators.multi.learned"),
    "scheduler": ("dcsim.schedulers.builtin", "dcsim.schedulers.deeprm"),
    "rescheduler": ("dcsim.reschedulers.builtin", "dcsim.reschedulers.vmr2l"),
    "placer": ("dcsim.placers.builtin",),
    "gpu_allocator": ("dcsim.gpu_allocators.builtin",),
    "power_model": ("dcsim.power.builtin",),
    "topology": ("dcsim.builtin_kinds",),
    "arrival": ("dcsim.builtin_kinds",),
    "distribution": ("dcsim.builtin_kinds",),
    "trace_format": ("dcsim.builtin_kinds",),
    "metric": (),
    "command": (),
    "mode": ("dcsim.modes.builtin",),
}
BUILTIN_MODULES = tuple(dict.fromkeys(m for mods in BUILTIN.values() for m in mods))
KINDS = tuple(BUILTIN)
#: the hook each kind registers through (:mod:`dcsim.hookspecs`)
HOOKS: dict[str, str] = {
    "allocator": "register_allocators", "scheduler": "register_schedulers",
    "rescheduler": "register_reschedulers", "placer": "register_placers",
    "gpu_allocator": "register_gpu_allocators", "power_model": "register_power_models",
    "topology": "register_topologies", "arrival": "register_arrival_processes",
    "distribution": "register_distributions", "trace_format": "register_trace_formats",
    "metric": "register_metrics", "command": "register_commands",
    "mode": "register_modes",
}
#: kinds whose plugin classes are the configuration itself (a pydantic model selected by
#: the value of this field, ``topology: {kind: dragonfly, ...}``): their name is that
#: field's literal, not a ``name`` attribute
NAME_FIELD: dict[str, str] = {"topology": "kind", "arrival": "process",
                              "distribution": "dist"}

_pm: pluggy.PluginManager | None = None
_sources: dict[str, str] = {}  # plugin name -> distribution that provided it
_broken: dict[str, str] = {}  # entry point name -> why it failed to load
_loaded_kinds: set[str] = set()  # kinds whose built-in modules are registered
#: kind -> (the plugin manager's plugins when it was made, what :func:`registered` found)
_registry: dict[str, tuple[tuple[str, ...], dict[str, Registered]]] = {}


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


#: how plugin discovery reports what it skipped (a broken plugin, an unknown DCSIM_PLUGINS
#: name); the default prints one ``warning:`` line on stderr
warn: Callable[[str], None] = _warn


@dataclass(frozen=True)
class Registered:
    kind: str  # one of KINDS
    name: str
    cls: type
    package: str  # "dcsim" for built-ins, else the distribution name


def get_plugin_manager(kinds: tuple[str, ...] = KINDS) -> pluggy.PluginManager:
    """The process-wide plugin manager: installed plugins load on first use, the built-ins
    of each kind in ``kinds`` (default: all) when first asked for. Asking again costs
    nothing: the hooks are validated only when something was registered."""
    global _pm
    added = False
    if _pm is None:
        pm = pluggy.PluginManager("dcsim")
        pm.add_hookspecs(hookspecs)
        _load_entry_points(pm)
        _pm = pm
        added = True
    for kind in kinds:
        if kind in _loaded_kinds:
            continue
        for modname in BUILTIN[kind]:
            if _pm.get_plugin(modname) is None:
                _pm.register(importlib.import_module(modname), name=modname)
                _sources[modname] = "dcsim"
                added = True
        _loaded_kinds.add(kind)
    if added:
        try:
            _pm.check_pending()
        except pluggy.PluginValidationError as e:
            raise PluginError(f"a dcsim plugin failed validation: {e}") from None
    return _pm


def module_names() -> tuple[str, ...]:
    """The names of the plugin modules registered now (built-in, installed, local or by
    hand): it changes whenever one is registered or unregistered, so what is derived from
    the registry can be kept until it does."""
    return tuple(name for name, _ in get_plugin_manager(()).list_name_plugin())


def _load_entry_points(pm: pluggy.PluginManager) -> None:
    """Register every installed plugin that loads; one that fails to import is set aside
    in :func:`broken` (listed by ``dcsim plugins``, named when a run needs something it
    would have provided) instead of stopping every command."""
    allowed = os.environ.get(ENV_VAR)
    allow = None if allowed is None else {s.strip() for s in allowed.split(",") if s.strip()}
    eps = sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name)
    for name in sorted((allow or set()) - {ep.name for ep in eps}):
        warn(f"{ENV_VAR} names {name!r}, which no installed package provides (installed: "
             f"{', '.join(ep.name for ep in eps) or 'none'})")
    for ep in eps:
        if allow is not None and ep.name not in allow:
            continue
        if pm.get_plugin(ep.name) is not None:
            continue
        try:
            module = ep.load()
            pm.register(module, name=ep.name)
        except Exception as e:  # a broken third-party plugin must not look like a dcsim bug
            _broken[ep.name] = f"{type(e).__name__}: {e}"
            warn(f"plugin {ep.name!r} failed to load ({_broken[ep.name]}); left out")
            continue
        dist = getattr(ep, "dist", None)
        _sources[ep.name] = dist.name if dist is not None else ep.name


def load_local(target: str) -> str:
    """Register the plugin module ``target``: a Python file (an absolute path, or relative
    to the working directory) or the dotted name of an importable module. Its hooks count
    as an installed plugin's; what it registers is listed as coming from ``local:<target>``.
    Registering the same target again does nothing. Returns the plugin's name; a file that
    is missing or fails to import is a :class:`PluginError` saying which and why."""
    import hashlib
    import importlib.util

    pm = get_plugin_manager(())
    is_file = target.endswith(".py")
    key = str(Path(target).resolve()) if is_file else target
    name = f"local:{key}"
    if pm.get_plugin(name) is not None:
        return name
    try:
        if is_file:
            path = Path(key)
            if not path.is_file():
                raise PluginError(f"no such file: {path}")
            module_name = (f"dcsim_local_{path.stem}_"
                           f"{hashlib.sha1(key.encode()).hexdigest()[:8]}")
            spec = importlib.util.spec_from_file_location(module_name, path)
            if spec is None or spec.loader is None:
                raise PluginError(f"{path} is not a Python module")
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module  # the fingerprint finds its file by name
            try:
                spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[module_name]
                raise
        else:
            module = importlib.import_module(target)
    except PluginError:
        raise
    except Exception as e:  # the plugin's own error, named, without a dcsim traceback
        raise PluginError(f"{Path(target).name if is_file else target} failed to import "
                          f"({type(e).__name__}: {e})") from None
    pm.register(module, name=name)
    _sources[name] = name
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as e:
        pm.unregister(name=name)
        raise PluginError(f"{target}: {e}") from None
    return name


def broken() -> dict[str, str]:
    """Installed plugins that failed to load: entry point name -> the error."""
    get_plugin_manager(())
    return dict(_broken)


def reset() -> None:
    """Forget loaded plugins (tests; after installing a package at run time)."""
    global _pm
    _pm = None
    _sources.clear()
    _broken.clear()
    _registry.clear()
    _loaded_kinds.clear()


def registered(kind: str = "allocator") -> dict[str, Registered]:
    """Everything registered of ``kind``, by name; a name registered twice is an error.
    The hooks run once per kind while the set of registered plugin modules stays the same
    (a plugin registered later, a local one or by hand, makes the next call ask again)."""
    pm = get_plugin_manager((kind,))
    modules = tuple(name for name, _ in pm.list_name_plugin())
    cached = _registry.get(kind)
    if cached is not None and cached[0] == modules:
        return dict(cached[1])
    out: dict[str, Registered] = {}
    if kind not in HOOKS:
        raise PluginError(f"unknown plugin kind {kind!r}; kinds: {', '.join(KINDS)}")
    hook = getattr(pm.hook, HOOKS[kind])
    # the built-ins first, in BUILTIN's order, then installed plugins as they loaded
    order = {m: i for i, m in enumerate(BUILTIN_MODULES)}
    impls = sorted(reversed(hook.get_hookimpls()),
                   key=lambda impl: (impl.plugin_name not in order,
                                     order.get(impl.plugin_name, 0)))
    for impl in impls:
        package = _sources.get(impl.plugin_name, impl.plugin_name)
        found: list[type] = []
        impl.function(found.append)
        for cls in found:
            name = plugin_name(cls, kind)
            if not isinstance(name, str) or not name:
                raise PluginError(
                    f"plugin {impl.plugin_name!r} registered {cls!r} with no name"
                    + (f" (a {kind} is named by its {NAME_FIELD[kind]}: Literal[...] field)"
                       if kind in NAME_FIELD else ""))
            if name in out and out[name].cls is not cls:
                if out[name].package == package:
                    raise PluginError(
                        f"{kind} {name!r} is registered twice by the same package, "
                        f"{package!r} (two classes named {name!r}, or the package's plugin "
                        "module listed under two entry points or installed twice); "
                        "register it once")
                raise PluginError(
                    f"{kind} {name!r} is registered twice: by {out[name].package!r} "
                    f"and by {package!r}"
                )
            out[name] = Registered(kind, name, cls, package)
    _registry[kind] = (modules, out)
    return dict(out)


def plugin_name(cls: Any, kind: str) -> str | None:
    """The name ``cls`` registers under: its ``name``, or for a configuration kind
    (:data:`NAME_FIELD`) the literal of its selecting field (``kind: Literal["dragonfly"]``);
    a command's is the click command's name."""
    if kind in NAME_FIELD:
        field = getattr(cls, "model_fields", {}).get(NAME_FIELD[kind])
        if field is None:
            return None
        args = getattr(field.annotation, "__args__", ())
        default = args[0] if len(args) == 1 else field.get_default()
        return default if isinstance(default, str) else None
    name = getattr(cls, "name", None)
    return name if isinstance(name, str) else None


def get_plugin_class(name: str, kind: str = "allocator") -> type:
    """The ``kind`` class registered as ``name``; unknown names list what is available."""
    found = registered(kind)
    if name not in found:
        raise PluginError(
            f"unknown {kind} {name!r}; available: {', '.join(sorted(found)) or 'none'} "
            f"(see `dcsim plugins`){broken_note()}"
        )
    return found[name].cls


def broken_note() -> str:
    """What to add to an "unknown name" error while installed plugins failed to load: that
    one of them may provide it (empty when none failed)."""
    return "".join(f"; plugin {k!r} failed to load ({v}): it may provide it (fix it, or "
                   f"leave it out of {ENV_VAR})" for k, v in sorted(broken().items()))


def get_allocator_class(name: str) -> type:
    """The allocator class registered as ``name``; unknown names list what is available."""
    return get_plugin_class(name, "allocator")


def get_scheduler_class(name: str) -> type:
    """The queue-mode scheduler class registered as ``name``."""
    return get_plugin_class(name, "scheduler")
