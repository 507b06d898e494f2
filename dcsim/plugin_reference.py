"""What ``dcsim plugins`` prints: every registered plugin of every kind, the package that
provides it and its options, as text or as the Markdown of a configuration reference (the
same page for a built-in and for a plugin's own docs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dcsim.plugins import HOOKS, KINDS, NAME_FIELD, Registered, registered

#: where each kind is selected in an experiment (or on the command line)
SELECTED_BY: dict[str, str] = {
    "allocator": "allocators: [{name: ...}]", "scheduler": "queue.schedulers",
    "rescheduler": "vm.reschedule.algorithm", "placer": "vm.placers",
    "gpu_allocator": "gpu.allocators", "power_model": "power.server.model",
    "topology": "topology.kind", "arrival": "workload.arrival.process",
    "distribution": "dist: ... (any distribution)",
    "trace_format": "workload.trace.format, dcsim import-trace FORMAT",
    "metric": "metrics.plugins", "command": "dcsim COMMAND", "mode": "mode",
}


@dataclass(frozen=True)
class Option:
    name: str
    type: str
    default: str  # "(required)" or "= <repr>"
    help: str


#: a kind's heading in the reference page
TITLE = {"topology": "Topologies", "arrival": "Arrival processes",
         "trace_format": "Trace formats", "gpu_allocator": "GPU allocators",
         "power_model": "Power models"}


def plural(kind: str) -> str:
    """A kind's heading in the text listing: ``allocators``, ``gpu_allocators``,
    ``topologies`` (stable, for scripts reading it)."""
    return "topologies" if kind == "topology" else f"{kind}s"


def _type_name(ann: Any) -> str:
    """A readable type: ``int | None``, ``'json' | 'graphml'``, ``dict[str, float]``
    (constraints such as ``> 0`` are the validator's, not shown)."""
    import types
    import typing

    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(a) for a in args)
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in args)
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        shown = ", ".join("..." if a is Ellipsis else _type_name(a) for a in args)
        return f"{name}[{shown}]" if args else name
    if ann is type(None):
        return "None"
    return ann.__name__ if isinstance(ann, type) else str(ann).replace("typing.", "")


def options(kind: str, cls: Any) -> list[Option]:
    """The options a user sets for ``cls``: its ``Options`` fields, a configuration kind's
    own fields but the selecting one, or a command's parameters."""
    if kind == "command":
        import click.core

        unset = getattr(click.core, "UNSET", None)  # click >= 8.3: a default not given
        out = []
        for p in getattr(cls, "params", ()):
            flag = max(getattr(p, "opts", [p.name]), key=len)
            default = p.default if p.default is not unset else (
                () if getattr(p, "multiple", False) else None)
            out.append(Option(flag, _type_name(getattr(p.type, "name", p.type)),
                              "(required)" if p.required else f"= {default!r}",
                              getattr(p, "help", None) or ""))
        return out
    if kind == "mode":  # its plugin list and the sections it reads
        return [Option(cls.plugin_key, f"list of {cls.plugin_kind}s", "(required)",
                       "the plugins each run of this mode compares"),
                *(Option(name, "section",
                         "(required)" if sec.default is ... and sec.factory is None
                         else "(optional)", "") for name, sec in cls.own_sections.items())]
    model = cls if kind in NAME_FIELD else getattr(cls, "Options", None)
    fields = getattr(model, "model_fields", {})
    out = []
    for name, info in fields.items():
        if kind in NAME_FIELD and name == NAME_FIELD[kind]:
            continue
        default = ("(required)" if info.is_required()
                   else f"= {info.get_default(call_default_factory=True)!r}")
        out.append(Option(info.alias or name, _type_name(info.annotation), default,
                          info.description or ""))
    return out


def columns(kind: str, cls: Any) -> list[tuple[str, str, Any]]:
    """A metric's declared columns, ``(table, name, Column)`` (summary first); nothing for
    another kind (:mod:`dcsim.metrics`)."""
    if kind != "metric":
        return []
    return [(table, name, col) for table in ("summary", "timeseries")
            for name, col in (getattr(cls, f"{table}_columns", None) or {}).items()]


def description(r: Registered) -> str:
    text = getattr(r.cls, "description", "") if r.kind != "command" else (
        r.cls.get_short_help_str(limit=200) if hasattr(r.cls, "get_short_help_str") else "")
    if not text and r.kind in NAME_FIELD:
        text = (r.cls.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
    if not text and r.kind == "mode":  # its module's first paragraph
        import sys

        doc = getattr(sys.modules.get(type(r.cls).__module__), "__doc__", None) or ""
        text = doc.strip().split("\n\n")[0]
    return " ".join(str(text).split())


def text(kinds: tuple[str, ...] = KINDS, package: str | None = None) -> str:
    lines = []
    for kind in kinds:
        found = {n: r for n, r in registered(kind).items()
                 if package is None or r.package == package}
        lines.append(f"{plural(kind)}:")
        for name in sorted(found):
            r = found[name]
            lines.append(f"  {name}  [{r.package}]  {description(r)}".rstrip())
            for o in options(kind, r.cls):
                lines.append(f"      {o.name}: {o.type} {o.default}")
            for table, col, c in columns(kind, r.cls):
                lines.append(f"      column {col} ({table}, {c.type}): {c.meaning}")
    return "\n".join(lines)


def markdown(kinds: tuple[str, ...] = KINDS, package: str | None = None) -> str:
    """A reference page: a section per kind, a table of options per plugin; only the
    plugins of ``package`` where given (a plugin author's docs)."""
    out = ["# Plugin reference", "",
           "Generated by `dcsim plugins --markdown` from what is registered.", ""]
    for kind in kinds:
        found = {n: r for n, r in registered(kind).items()
                 if package is None or r.package == package}
        if not found:
            continue
        out += [f"## {TITLE.get(kind, plural(kind).capitalize())}", "",
                f"Selected by `{SELECTED_BY[kind]}`; registered through the "
                f"`{HOOKS[kind]}` hook.", ""]
        for name in sorted(found):
            r = found[name]
            out += [f"### `{name}`", "", f"Package: `{r.package}`. {description(r)}".rstrip(),
                    ""]
            opts = options(kind, r.cls)
            if opts:
                out += ["| option | type | default | |", "|---|---|---|---|"]
                out += ["| " + " | ".join(cell.replace("|", "\\|").replace("\n", " ")
                                          for cell in (f"`{o.name}`", f"`{o.type}`",
                                                       o.default.removeprefix("= "), o.help))
                        + " |" for o in opts]
                out.append("")
            cols = columns(kind, r.cls)
            if cols:
                out += ["| column | table | type | unit | meaning |", "|---|---|---|---|---|"]
                out += ["| " + " | ".join(cell.replace("|", "\\|").replace("\n", " ")
                                          for cell in (f"`{name}`", table, f"`{c.type}`",
                                                       c.unit, c.meaning)) + " |"
                        for table, name, c in cols]
                out.append("")
    return "\n".join(out).rstrip() + "\n"
