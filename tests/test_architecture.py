"""The architecture holds (#17, #35): the import contracts of pyproject.toml (layers, the
domain models free of the engine and SimPy, Arrow only in ``dcsim.results``, the allocator
families independent), no import cycle between modules, and no module importing another
module's private names. Module size is no gate (``benchmarks/module_sizes.py`` prints the
sizes for review)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


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


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _private_imports(path: Path, source: str) -> list[str]:
    """``module: imports _name from other.module`` for each private name ``path`` imports
    from another dcsim module (relative imports resolved; imports inside functions too)."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
        else:
            target = node.module or ""
        if target.split(".")[0] != "dcsim" or target == module:
            continue
        for alias in node.names:
            if alias.name.startswith("_") and not alias.name.startswith("__"):
                found.append(f"{module}: imports {alias.name} from {target}")
    return found


def test_no_module_imports_another_modules_private_names():
    """A name with one leading underscore is its module's own business: no other module of
    ``dcsim`` imports it (``from dcsim.x import _y``, relative or inside a function), so a
    module can be changed behind its public names. A module cut in two where the halves
    still share private names was cut off its seams: merge the halves, or make the shared
    thing public (no underscore, a docstring) because it is part of the owner's interface.

    A package's ``__init__`` re-exporting from its own submodules is held to the same rule:
    it may re-export public names only (a private name re-exported would be a public one in
    disguise). Dunder names (``__version__``) are public. Tests may reach into private
    names (they test the module from inside); they are not walked."""
    found = []
    for p in sorted((ROOT / "dcsim").rglob("*.py")):
        found += _private_imports(p, p.read_text())
    assert found == [], "private names imported from another module:\n" + "\n".join(found)


def test_the_private_import_finder_finds_them():
    init = ROOT / "dcsim" / "pkg" / "__init__.py"
    mod = ROOT / "dcsim" / "pkg" / "a.py"
    src = ("from dcsim.pkg.b import _x, y\nfrom .b import _z\nfrom . import _w\n"
           "from dcsim import __version__\nfrom numpy import _private\n"
           "def f():\n    from ..other import _v\n")
    assert _private_imports(mod, src) == [
        "dcsim.pkg.a: imports _x from dcsim.pkg.b", "dcsim.pkg.a: imports _z from dcsim.pkg.b",
        "dcsim.pkg.a: imports _w from dcsim.pkg", "dcsim.pkg.a: imports _v from dcsim.other"]
    assert _private_imports(init, "from .b import _q, r\n") == [
        "dcsim.pkg: imports _q from dcsim.pkg.b"]


def _test_module_imports(path: Path, source: str, local: set[str]) -> list[str]:
    """``file: imports X`` for each import in ``path`` of a test module or a conftest (by any
    name), or of a module in ``tests/`` by its bare name (``local``: those names), which
    works only while ``tests/`` happens to be on ``sys.path``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if (parts[0] in local or parts[-1] == "conftest"
                    or any(p.startswith("test_") for p in parts)):
                found.append(f"{path}: imports {name}")
    return found


def test_no_test_module_imports_another():
    """Test modules share builders through the ``tests/helpers`` package (and the slow
    references through ``tests.naive`` / ``tests.kraken_reference``), never by importing a
    test module or a conftest (it keeps only fixtures), nor a ``tests/`` file by bare name."""
    tests = ROOT / "tests"
    local = {p.stem for p in tests.glob("*.py")} | {p.name for p in tests.iterdir() if p.is_dir()}
    found = []
    for p in sorted(tests.rglob("*.py")):
        found += _test_module_imports(p.relative_to(ROOT), p.read_text(), local)
    assert found == [], "test modules importing each other:\n" + "\n".join(found)


def test_the_test_import_finder_finds_them():
    src = ("from conftest import a\nimport cli_helpers\nfrom tests.conftest import b\n"
           "from tests.allocators.vc.test_kraken import c\nfrom tests.helpers.vc import d\n"
           "import numpy\nfrom . import e\n")
    assert _test_module_imports(Path("t.py"), src, {"conftest", "cli_helpers", "helpers"}) == [
        "t.py: imports conftest", "t.py: imports cli_helpers", "t.py: imports tests.conftest",
        "t.py: imports tests.allocators.vc.test_kraken"]
