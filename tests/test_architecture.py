"""The architecture holds (#17): the import contracts of pyproject.toml (layers, the domain
models free of the engine and SimPy, Arrow only in ``dcsim.results``), no import cycle
between modules, and no module past 450 lines."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: modules allowed past the limit, with their length when listed: each may only shrink
#: (split it along its seams, then drop it from here). Empty since #17 split the last ones.
STILL_LONG: dict[str, int] = {}
LIMIT = 450


def test_import_contracts_hold():
    importlinter = pytest.importorskip("importlinter.cli")
    code = importlinter.lint_imports(config_filename=str(ROOT / "pyproject.toml"),
                                     no_cache=True, no_logo=True)
    assert code == 0, "lint-imports: a contract is broken (run it to see which)"


def test_no_import_cycle_between_modules():
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("dcsim")
    edges = {m: {i for i in graph.find_modules_directly_imported_by(m)
                 if i.startswith("dcsim")} for m in graph.modules}
    cycles = _strongly_connected(edges)
    assert cycles == [], f"import cycles: {cycles}"


def _strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm: the components of more than one module."""
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for m in sorted(edges):
        if m not in index:
            visit(m)
    return out


def test_the_cycle_finder_finds_a_cycle():
    assert _strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [
        ["a", "b", "c"]]
    assert _strongly_connected({"a": {"b"}, "b": set()}) == []


def test_modules_stay_short():
    too_long = {}
    for p in sorted((ROOT / "dcsim").rglob("*.py")):
        rel = p.relative_to(ROOT).as_posix()
        n = len(p.read_text().splitlines())
        if n > STILL_LONG.get(rel, LIMIT):
            too_long[rel] = n
    assert too_long == {}, (f"modules over {LIMIT} lines (or longer than when listed in "
                            f"STILL_LONG): {too_long}")
    gone = [m for m in STILL_LONG if not (ROOT / m).is_file()]
    assert gone == [], f"STILL_LONG lists modules that no longer exist: {gone}"
