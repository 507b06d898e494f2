"""Commands are a plugin kind: ``dcsim`` offers every command registered through
``register_commands`` beside its own, asks the registry only when it must, keeps its own
commands when a plugin reuses their names, and survives a broken plugin."""

from __future__ import annotations

import types

import click
from click.testing import CliRunner

from dcsim import plugins
from dcsim.cli import main
from dcsim.hookspecs import hookimpl
from tests.helpers.entry_points import FakeEntryPoint


@click.command("hello-plugin")
@click.argument("who")
@click.option("--times", type=int, default=1, help="How many greetings.")
@click.option("--tag", "tags", multiple=True, help="Words after the greeting.")
def hello(who: str, times: int, tags: tuple[str, ...]) -> None:
    """Greet WHO (a test command)."""
    for _ in range(times):
        click.echo(" ".join(["hello", who, *tags]))


@click.command("run")
def fake_run() -> None:
    """A plugin's 'run' (must never replace dcsim's)."""
    click.echo("the plugin's run")


def _commands(*cmds):
    mod = types.ModuleType("fake_commands")

    @hookimpl
    def register_commands(register):
        for c in cmds:
            register(c)

    mod.register_commands = register_commands
    return mod


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def test_a_plugin_command_is_listed_and_runs(fake_eps):
    fake_eps.append(FakeEntryPoint("hello", _commands(hello), dist="dcsim-hello"))
    r = invoke("--help")
    assert r.exit_code == 0, r.output
    listed = r.stdout.split("Commands:")[1]
    assert "hello-plugin  Greet WHO (a test command)." in listed and "run " in listed
    r = invoke("hello-plugin", "world", "--times", "2")
    assert r.exit_code == 0 and r.stdout == "hello world\nhello world\n", r.output
    assert plugins.registered("command")["hello-plugin"].package == "dcsim-hello"
    r = invoke("plugins", "--kind", "command")
    assert "hello-plugin  [dcsim-hello]  Greet WHO (a test command)." in r.stdout
    assert "--times: integer = 1" in r.stdout and "--tag: text = ()" in r.stdout
    assert invoke("hello-plugin", "you", "--tag", "a", "--tag", "b").stdout == "hello you a b\n"


def test_a_plugin_command_cannot_take_a_built_in_name(fake_eps):
    """The built-in keeps its name (one warning saying so); the plugin's other commands
    are offered."""
    fake_eps.append(FakeEntryPoint("clash", _commands(fake_run, hello), dist="dcsim-clash"))
    r = invoke("--help")
    assert r.exit_code == 0, r.output
    warning = ("warning: plugin 'dcsim-clash' registers a command named 'run', like dcsim's "
               "own `dcsim run`; left out")
    assert r.stderr.count(warning) == 1, r.stderr
    assert "hello-plugin" in r.stdout
    assert "Run the experiment in CONFIG" in invoke("run", "--help").stdout
    assert main.get_command(click.Context(main), "run").callback is not fake_run.callback


def test_a_broken_plugin_leaves_the_commands_working(fake_eps, tmp_path):
    fake_eps.append(FakeEntryPoint("broken", ImportError("no module named zzz")))
    fake_eps.append(FakeEntryPoint("hello", _commands(hello)))
    r = invoke("--help")
    assert r.exit_code == 0 and "hello-plugin" in r.stdout, r.output
    assert r.stderr.count("warning: plugin 'broken' failed to load") == 1, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = invoke("validate", "experiments/quickstart.yaml")
    assert r.exit_code == 0, r.output


def test_an_unreadable_command_registry_is_one_warning(fake_eps):
    """Two packages registering one command name: a warning, and dcsim's commands work."""
    fake_eps.append(FakeEntryPoint("a", _commands(hello), dist="dcsim-a"))
    fake_eps.append(FakeEntryPoint("b", _commands(hello.__class__(
        "hello-plugin", callback=lambda: None)), dist="dcsim-b"))
    r = invoke("--help")
    assert r.exit_code == 0, r.output
    assert r.stderr.count("warning: plugin commands left out: command 'hello-plugin' is "
                          "registered twice") == 1, r.stderr
    assert "validate" in r.stdout and "hello-plugin" not in r.stdout


def test_a_built_in_command_does_not_ask_the_registry(fake_eps, monkeypatch):
    """``dcsim validate`` (like ``dcsim run``) finds itself without loading plugin
    commands; an unknown name asks."""
    asked: list[str] = []
    real = plugins.registered

    def spy(kind: str = "allocator"):
        asked.append(kind)
        return real(kind)

    monkeypatch.setattr(plugins, "registered", spy)
    assert invoke("validate", "experiments/quickstart.yaml").exit_code == 0
    assert "command" not in asked
    r = invoke("no-such-command")
    assert r.exit_code == 2 and "No such command 'no-such-command'" in r.output
    assert "command" in asked

