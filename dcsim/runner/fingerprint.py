"""The code each run uses, and the check that keeps ``--resume`` from mixing results of
different code.

A run's code is dcsim's own (its source hash), the plugins it loads that come from other
distributions, and the versions of the libraries that shape results; the hashing is
:mod:`dcsim.results.provenance`. :func:`run_code` is what a run records (in
``runs/<run_id>.json`` and, as ``code_id``, in its summary row); :func:`code_changes`
compares what finished runs recorded with what would run them now.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

from dcsim.errors import CodeChangedError
from dcsim.modes import MODES
from dcsim.plugins import ENTRY_POINT_GROUP, registered
from dcsim.results import provenance


def run_plugins(plan, spec=None) -> list[tuple[str, str]]:
    """``(kind, name)`` of every plugin a run loads: its own (the allocator, scheduler,
    rescheduler or placer of ``plan``), the embedder a composing allocator wraps (its
    ``embed`` option, AHAB's and the strawman's), ``vm_online``'s periodic rescheduler and
    the run's metric plugins (``metrics.plugins``), the trace format that reads
    ``workload.trace``, and the configuration kinds its config selects (topology, arrival
    process, distributions).
    ``spec`` is the plan's validated experiment (default: ``plan.spec``)."""
    spec = spec if spec is not None else plan.spec
    mode = spec.mode if spec is not None else plan.config.get("mode", "loss")
    kind = MODES[mode].plugin_kind
    found = [(kind, plan.allocator["name"])]
    embed = plan.allocator.get("options", {}).get("embed")
    if kind == "allocator" and isinstance(embed, str):
        found.append(("allocator", embed))
    if mode == "vm_online":
        found.extend(("rescheduler", name) for name in _online_reschedulers(plan, spec))
    found.extend(("metric", m["name"]) for m in plan.metrics)
    found.extend(_config_kinds(plan.config))
    return list(dict.fromkeys(found))


def _config_kinds(config: Any) -> list[tuple[str, str]]:
    """The plugins a run's config selects besides its policy (a plugin's code shapes the
    run as an allocator's does): its ``topology.kind``, its ``workload.arrival.process``,
    the trace format that reads its trace (``workload.trace.format``; queue mode's trace
    jobs: ``workload.format``) when not ``table``, and every ``dist``."""
    workload = _get(config, "workload")
    trace = _get(workload, "trace") or (workload if _get(workload, "kind") == "trace" else None)
    fmt = _get(trace, "format")
    found = [(kind, name) for kind, name in (
        ("topology", _get(_get(config, "topology"), "kind")),
        ("arrival", _get(_get(workload, "arrival"), "process")),
        ("trace_format", fmt if fmt != "table" else None)) if isinstance(name, str)]
    stack = [config]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("dist"), str):
                found.append(("distribution", node["dist"]))
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found


def _get(node: Any, key: str) -> Any:
    """``node[key]`` when ``node`` is a mapping, else None."""
    return node.get(key) if isinstance(node, dict) else None


def _online_reschedulers(plan, spec) -> list[str]:
    vm = spec.vm if spec is not None else plan.config.get("vm")
    reschedule = vm.get("reschedule") if isinstance(vm, dict) else getattr(vm, "reschedule",
                                                                            None)
    if reschedule is None:
        return []
    if isinstance(reschedule, dict):
        return [reschedule.get("algorithm", "greedy")]
    return [reschedule.algorithm]


@functools.cache
def _distribution_modules(dist: str) -> tuple[str, ...]:
    """The top-level modules that ``dist``'s ``dcsim`` entry points import."""
    return tuple(sorted({ep.module.split(".")[0] for ep in entry_points(group=ENTRY_POINT_GROUP)
                         if getattr(ep.dist, "name", None) == dist}))


def plugin_code(kind: str, name: str) -> dict[str, Any] | None:
    """The fingerprint of the ``kind`` plugin ``name`` when another distribution than dcsim
    provides it: ``kind``, ``name``, ``distribution``, ``version`` and ``source_hash``, the
    hash of the top-level modules its entry points import and the one defining its class
    (every file of a package). None for a built-in (dcsim's own hash covers it) and for a
    name nothing registers (the run fails on it anyway)."""
    reg = registered(kind).get(name)
    if reg is None or reg.package == "dcsim":
        return None
    modules = _distribution_modules(reg.package)
    if modules:
        modules = tuple(sorted({*modules, reg.cls.__module__.split(".")[0]}))
    else:  # registered by hand, not through an entry point: the class's own module
        modules = (reg.cls.__module__,)
    return {"kind": kind, "name": name, "distribution": reg.package,
            "version": provenance.installed_version(reg.package),
            "source_hash": provenance.modules_hash(modules)}


def run_code(plan, spec=None) -> dict[str, Any]:
    """What one run records of the code that makes it: ``code_id``, ``dcsim`` (version,
    commit, dirty, source_hash), ``libraries`` (versions) and ``plugins`` (the
    fingerprints of those from other distributions)."""
    plugins = [c for c in (plugin_code(k, n) for k, n in run_plugins(plan, spec))
               if c is not None]
    core, libraries = provenance.dcsim_code(), provenance.libraries()
    return {"code_id": provenance.code_id(core["source_hash"], plugins, libraries),
            "dcsim": dict(core), "libraries": dict(libraries), "plugins": plugins}


def experiment_code(exp) -> dict[str, dict[str, Any]]:
    """:func:`run_code` of every planned run of ``exp``, by run id."""
    return {r.run_id: run_code(r) for r in exp.runs}


def reset() -> None:
    """Forget every fingerprint computed so far (tests; after editing code at run time)."""
    _distribution_modules.cache_clear()
    provenance.reset()


# ---------------------------------------------------------------------------- resume
@dataclass
class CodeChanges:
    """Finished runs whose code differs from the code that would run them now."""

    runs: list[str] = field(default_factory=list)  # their run ids, in plan order
    #: (what changed, how) -> how many of them; what is None: no fingerprint recorded
    reasons: dict[tuple[str | None, str], int] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.runs)

    def describe(self) -> str:
        """``dcsim's code changed since 3 finished runs (commit ...); numpy changed ...``"""
        parts = []
        for (subject, how), n in self.reasons.items():
            runs = f"{n} finished run{'s' if n != 1 else ''}"
            if subject is None:
                parts.append(f"{runs} recorded no code fingerprint{how}")
            else:
                parts.append(f"{subject} changed since {runs}{how}")
        return "; ".join(parts)

    def error(self, out) -> CodeChangedError:
        return CodeChangedError(
            f"{out}: {self.describe()}; use --overwrite, or --rerun-changed to rerun only "
            "the runs whose code changed")


def code_changes(records: dict[str, dict[str, Any]], current: dict[str, dict[str, Any]],
                 order: list[str]) -> CodeChanges:
    """Which finished runs (``records``: their ``runs/<run_id>.json``) were made by other
    code than ``current`` (:func:`experiment_code`), and what changed; ``order`` is the
    plan's run ids."""
    changes = CodeChanges()
    for run_id in order:
        if run_id not in records or run_id not in current:
            continue
        old, new = records[run_id].get("code"), current[run_id]
        if isinstance(old, dict) and old.get("code_id") == new["code_id"] \
                and same_parts(old, new):
            continue
        changes.runs.append(run_id)
        for reason in what_changed(old, new):
            changes.reasons[reason] = changes.reasons.get(reason, 0) + 1
    return changes


def same_parts(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether a recorded fingerprint's parts are ``new``'s (dcsim's source hash, the
    plugins', the library versions): a ``code_id`` edited to match other code does not
    make the parts match."""
    try:
        return (old["dcsim"]["source_hash"] == new["dcsim"]["source_hash"]
                and _by_key(old) == _by_key(new)
                and (old.get("libraries") or {}) == new["libraries"])
    except (KeyError, TypeError, AttributeError):
        return False


def what_changed(old: dict[str, Any] | None, new: dict[str, Any]) -> list[tuple[str | None,
                                                                                    str]]:
    """Why a run recorded as ``old`` would not be made the same way by ``new``: one
    ``(subject, how)`` per change (subject None: ``old`` is no fingerprint at all)."""
    if not isinstance(old, dict) or not isinstance(old.get("dcsim"), dict):
        return [(None, " (made by a dcsim that did not record one)")]
    out: list[tuple[str | None, str]] = []
    a, b = old["dcsim"], new["dcsim"]
    if a.get("source_hash") != b["source_hash"]:
        out.append(("dcsim's code", f" ({_dcsim_change(a, b)})"))
    for kind, name in sorted({*_by_key(old), *_by_key(new)}):
        pa, pb = _by_key(old).get((kind, name)), _by_key(new).get((kind, name))
        if (pa is not None and pb is not None and pa.get("distribution") == pb["distribution"]
                and pa.get("source_hash") == pb["source_hash"]):
            continue
        was, now = _provider(pa), _provider(pb)
        out.append((f"{kind} {name!r} ({was if was == now else f'{was} -> {now}'})", ""))
    libs_a, libs_b = old.get("libraries") or {}, new["libraries"]
    for lib in sorted({*libs_a, *libs_b}):
        va, vb = libs_a.get(lib), libs_b.get(lib)
        if va != vb:
            out.append((lib, f" ({va or 'not installed'} -> {vb or 'not installed'})"))
    if not out:  # the same parts under another code_id: say so rather than nothing
        out.append(("the code fingerprint", f" (code_id {old.get('code_id')} -> "
                                            f"{new['code_id']})"))
    return out


def _by_key(code: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(p["kind"], p["name"]): p for p in code.get("plugins") or []}


def _provider(p: dict[str, Any] | None) -> str:
    if p is None:
        return "built into dcsim"
    if str(p.get("distribution")).startswith("local:"):  # dcsim.plugins.load_local
        return f"the local plugin {p['distribution'].removeprefix('local:')}"
    return f"{p.get('distribution')} {p.get('version') or '(no version)'}"


def _dcsim_change(a: dict[str, Any], b: dict[str, Any]) -> str:
    """``version 0.1.0 -> 0.2.0, commit abc1234 -> def5678+dirty, source hash ... -> ...``"""
    parts = []
    if a.get("version") != b.get("version"):
        parts.append(f"version {a.get('version')} -> {b.get('version')}")
    if a.get("commit") and b.get("commit"):
        parts.append(f"commit {_commit(a)} -> {_commit(b)}")
    parts.append(f"source hash {str(a.get('source_hash'))[:12]} -> {b['source_hash'][:12]}")
    return ", ".join(parts)


def _commit(code: dict[str, Any]) -> str:
    return code["commit"][:10] + ("+dirty" if code.get("dirty") else "")
