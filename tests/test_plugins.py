"""Plugin discovery: built-ins via the same hooks, entry points, DCSIM_PLUGINS filtering."""

from __future__ import annotations

import types

import pytest

from dcsim import plugins
from dcsim.allocators import Allocator
from dcsim.errors import ConfigError, PluginError
from dcsim.hookspecs import hookimpl
from tests.helpers.entry_points import FakeEntryPoint


class Spread(Allocator):
    name = "spread_test"
    description = "test allocator"

    def allocate(self, request, view):
        return int(view.free[:, 0].argmax())


def _module(cls):
    mod = types.ModuleType(f"fake_{cls.name}")

    @hookimpl
    def register_allocators(register):
        register(cls)

    mod.register_allocators = register_allocators
    return mod


def test_builtins_register_through_the_hook(fake_eps):
    """random, first_fit and best_fit are found via register_allocators, package 'dcsim'."""
    found = plugins.registered("allocator")
    assert {"random", "first_fit", "best_fit"} <= set(found)
    assert found["first_fit"].package == "dcsim"


def test_entry_point_plugin_is_listed_with_its_package(fake_eps):
    """An installed entry point's allocator appears beside the built-ins."""
    fake_eps.append(FakeEntryPoint("spread", _module(Spread), dist="dcsim-spread"))
    found = plugins.registered("allocator")
    assert found["spread_test"].cls is Spread
    assert found["spread_test"].package == "dcsim-spread"


def test_env_var_restricts_plugins(fake_eps, monkeypatch):
    """DCSIM_PLUGINS="" loads no third-party plugin; naming one loads just that one."""
    fake_eps.append(FakeEntryPoint("spread", _module(Spread)))
    monkeypatch.setenv("DCSIM_PLUGINS", "")
    assert "spread_test" not in plugins.registered("allocator")
    plugins.reset()
    monkeypatch.setenv("DCSIM_PLUGINS", "spread")
    assert "spread_test" in plugins.registered("allocator")


def test_broken_plugin_is_left_out_and_named(fake_eps, capsys):
    """A plugin that fails to import does not block the others: it is left out with one
    warning, listed by broken(), and named when something it might provide is asked for."""
    fake_eps.append(FakeEntryPoint("broken", ImportError("no module named zzz")))
    fake_eps.append(FakeEntryPoint("spread", _module(Spread)))
    found = plugins.registered("allocator")
    assert "spread_test" in found and "first_fit" in found
    assert plugins.broken() == {"broken": "ImportError: no module named zzz"}
    err = capsys.readouterr().err
    assert err.count("warning: plugin 'broken' failed to load") == 1
    with pytest.raises(PluginError, match=r"unknown allocator 'mine'.*plugin 'broken' failed "
                                          r"to load \(ImportError: no module named zzz\).*"
                                          r"DCSIM_PLUGINS"):
        plugins.get_allocator_class("mine")


def test_dcsim_plugins_lists_a_broken_plugin(fake_eps):
    from click.testing import CliRunner

    from dcsim.cli import main

    fake_eps.append(FakeEntryPoint("broken", ImportError("no module named zzz")))
    r = CliRunner().invoke(main, ["plugins"])
    assert r.exit_code == 0 and "first_fit" in r.stdout
    assert "broken (failed to load, left out):\n  broken  ImportError: no module named zzz" \
        in r.stdout


def test_an_unknown_name_in_dcsim_plugins_is_warned_about(fake_eps, monkeypatch, capsys):
    fake_eps.append(FakeEntryPoint("spread", _module(Spread)))
    monkeypatch.setenv("DCSIM_PLUGINS", "spread,sprad")
    assert "spread_test" in plugins.registered("allocator")
    err = capsys.readouterr().err
    assert "warning: DCSIM_PLUGINS names 'sprad', which no installed package provides " \
           "(installed: spread)" in err


def test_duplicate_names_are_refused(fake_eps):
    """Two different classes under one name is an error naming both packages."""

    class Clash(Spread):
        name = "first_fit"

    fake_eps.append(FakeEntryPoint("clash", _module(Clash), dist="dcsim-clash"))
    with pytest.raises(PluginError, match="registered twice.*dcsim-clash"):
        plugins.registered("allocator")


def test_unknown_allocator_lists_available(fake_eps):
    """Asking for a name nobody registered lists the registered ones."""
    with pytest.raises(PluginError,
                       match="unknown allocator 'nope'; available: .*best_fit.*first_fit"):
        plugins.get_allocator_class("nope")


def test_options_are_typed_and_strict():
    """Allocator options are validated; unknown keys and bad values name the field."""
    from dcsim.allocators.single import BestFitAllocator

    assert BestFitAllocator.parse_options({"score": "max"}).score == "max"
    with pytest.raises(ConfigError, match=r"allocators.0.options.scor: Extra inputs"):
        BestFitAllocator.parse_options({"scor": "max"}, where="allocators.0.options")
    with pytest.raises(ConfigError, match=r"options.score: Input should be 'sum' or 'max'"):
        BestFitAllocator.parse_options({"score": "min"})


def test_misspelt_hook_is_a_plugin_error(fake_eps):
    """A plugin implementing a hook that does not exist is named, without a traceback."""
    mod = types.ModuleType("typo")

    @hookimpl
    def register_allocator(register):  # missing "s"
        register(Spread)

    mod.register_allocator = register_allocator
    fake_eps.append(FakeEntryPoint("typo", mod))
    with pytest.raises(PluginError, match="typo"):
        plugins.get_plugin_manager()


def test_a_name_registered_twice_by_one_package_says_so(monkeypatch):
    import types

    import pytest

    from dcsim import Allocator, hookimpl, plugins
    from dcsim.errors import PluginError

    class A(Allocator):
        name = "twice_test"

        def allocate(self, request, view):
            return 0

    class B(A):
        name = "twice_test"

    def module(*classes):
        mod = types.ModuleType("fake_twice")

        @hookimpl
        def register_allocators(register):
            for c in classes:
                register(c)

        mod.register_allocators = register_allocators
        return mod

    class EP:
        def __init__(self, name, mod):
            self.name, self._mod = name, mod
            self.dist = types.SimpleNamespace(name="dcsim-bad")

        def load(self):
            return self._mod

    for eps in ([EP("bad", module(A, B))], [EP("bad1", module(A)), EP("bad2", module(B))]):
        monkeypatch.setattr(plugins, "entry_points",
                            lambda group, eps=eps: eps if group == "dcsim" else [])
        plugins.reset()
        try:
            with pytest.raises(PluginError) as e:
                plugins.registered("allocator")
        finally:
            plugins.reset()
        assert "registered twice by the same package, 'dcsim-bad'" in str(e.value)
        assert "by 'dcsim-bad' and by 'dcsim-bad'" not in str(e.value)
