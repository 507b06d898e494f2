"""The architecture holds (#17, #35): the import contracts of pyproject.toml (layers, the
domain models free of the engine and SimPy, Arrow only in ``dcsim.results``, the allocator
families independent), no import cycle between modules, no module importing another
module's private names, and none reading or writing another module's private attributes.
Module size is no gate (``benchmarks/module_sizes.py`` prints the sizes for review)."""

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


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


#: module attributes whose documented, public name has one leading underscore (``os._exit``:
#: end the process without clean-up, documented in the os module's reference)
_PUBLIC_UNDERSCORED = {("os", "_exit")}

_ATTRIBUTE_FUNCTIONS = {"getattr", "setattr", "hasattr", "delattr"}


def _literal_attribute_call(node: ast.AST) -> tuple[str, ast.expr, str] | None:
    """``(function, object, name)`` of ``getattr(obj, "_x", ...)``, ``setattr``, ``hasattr``,
    ``delattr`` (or ``object.__setattr__(obj, "_x", v)``) with a literal name, else None."""
    if not (isinstance(node, ast.Call) and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
        return None
    f = node.func
    if isinstance(f, ast.Name) and f.id in _ATTRIBUTE_FUNCTIONS:
        return f.id, node.args[0], node.args[1].value
    if isinstance(f, ast.Attribute) and f.attr in ("__setattr__", "__delattr__"):
        return f.attr.strip("_"), node.args[0], node.args[1].value
    return None


def _instance_dict_access(node: ast.AST) -> tuple[str, ast.expr, str] | None:
    """``("getattr" | "setattr", object, name)`` of ``obj.__dict__["_x"]`` (read, or
    assigned or deleted), ``obj.__dict__.get("_x")`` (read), ``.setdefault`` or ``.pop``
    (write): the attribute reached through the instance's dict, else None."""
    def key(n: ast.AST) -> str | None:
        return n.value if isinstance(n, ast.Constant) and isinstance(n.value, str) else None

    def of(d: ast.AST) -> ast.expr | None:
        return d.value if isinstance(d, ast.Attribute) and d.attr == "__dict__" else None

    if isinstance(node, ast.Subscript) and of(node.value) is not None and key(node.slice):
        kind = "getattr" if isinstance(node.ctx, ast.Load) else "setattr"
        return kind, of(node.value), key(node.slice)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args
            and node.func.attr in ("get", "setdefault", "pop")
            and of(node.func.value) is not None and key(node.args[0])):
        kind = "getattr" if node.func.attr == "get" else "setattr"
        return kind, of(node.func.value), key(node.args[0])
    return None


def _is_own_object(node: ast.expr) -> bool:
    """``self``, ``cls`` or ``super()``: the object whose class this code belongs to."""
    return ((isinstance(node, ast.Name) and node.id in ("self", "cls"))
            or (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == "super"))


def _names_defined(tree: ast.Module, any_object: bool) -> set[str]:
    """The private names a module defines: ``def _x`` / ``class _x`` anywhere, ``_x = ...``
    (or annotated, imported as) at module or class level, ``__slots__`` entries, and
    ``self._x = ...`` / ``cls._x = ...`` (or ``setattr(self, "_x", v)``); with
    ``any_object`` also ``obj._x = ...`` on any object (another instance of its class)."""
    own: set[str] = set()

    def bound(target: ast.expr):
        if isinstance(target, ast.Name):
            yield target.id
        elif isinstance(target, (ast.Tuple, ast.List)):
            for e in target.elts:
                yield from bound(e)
        elif isinstance(target, ast.Starred):
            yield from bound(target.value)

    def body(statements: list[ast.stmt]) -> None:
        for s in statements:
            if isinstance(s, ast.Assign):
                for t in s.targets:
                    own.update(bound(t))
                if (any(isinstance(t, ast.Name) and t.id == "__slots__" for t in s.targets)
                        and isinstance(s.value, (ast.Tuple, ast.List))):
                    own.update(e.value for e in s.value.elts
                               if isinstance(e, ast.Constant) and isinstance(e.value, str))
            elif isinstance(s, (ast.AnnAssign, ast.AugAssign)):
                own.update(bound(s.target))
            elif isinstance(s, (ast.Import, ast.ImportFrom)):
                own.update((a.asname or a.name).split(".")[0] for a in s.names)

    body(tree.body)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            own.add(node.name)
        if isinstance(node, ast.ClassDef):
            body(node.body)
        if (isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del))
                and (any_object or _is_own_object(node.value))):
            own.add(node.attr)
        call = _literal_attribute_call(node) or _instance_dict_access(node)
        if (call is not None and call[0] == "setattr"
                and (any_object or _is_own_object(call[1]))):
            own.add(call[2])
    return {n for n in own if _is_private(n)}


def _private_attribute_uses(path: Path, source: str, writes: bool) -> list[str]:
    """``module:line: obj._x`` for each read (``writes``: each write) of a private
    attribute ``path`` does not own; see the two tests below for the rules."""
    tree = ast.parse(source)
    module = _module_name(path)
    own = _names_defined(tree, any_object=not writes)
    found = []
    for node in ast.walk(tree):
        call = _literal_attribute_call(node)
        through_dict = _instance_dict_access(node)
        if through_dict is not None:
            is_write = through_dict[0] == "setattr"
            obj, name = through_dict[1], through_dict[2]
            shown = f"{ast.unparse(obj)}.__dict__[{name!r}]"
        elif isinstance(node, ast.Attribute):
            is_write = isinstance(node.ctx, (ast.Store, ast.Del))
            obj, name, shown = node.value, node.attr, f"{ast.unparse(node.value)}.{node.attr}"
        elif call is not None:
            is_write = call[0] in ("setattr", "delattr")
            obj, name = call[1], call[2]
            shown = f"{call[0]}({ast.unparse(obj)}, {name!r})"
        else:
            continue
        if (is_write != writes or not _is_private(name) or _is_own_object(obj)
                or name in own
                or (isinstance(obj, ast.Name) and (obj.id, name) in _PUBLIC_UNDERSCORED)):
            continue
        found.append((node.lineno, node.col_offset, f"{module}:{node.lineno}: {shown}"))
    return [f for *_, f in sorted(found)]


def _private_attribute_reads(path: Path, source: str) -> list[str]:
    return _private_attribute_uses(path, source, writes=False)


def _private_attribute_writes(path: Path, source: str) -> list[str]:
    return _private_attribute_uses(path, source, writes=True)


def test_no_module_reads_another_modules_private_attributes():
    """The private-import rule, for attributes: ``obj._x`` (or ``getattr(obj, "_x")``,
    ``hasattr``, ``obj.__dict__.get("_x")``) reads ``_x`` only in the module that owns the
    name, the one that defines it (``self._x = ...``, ``def _x``, a class-level or
    module-level ``_x``). A module
    reaching into another's object (``view._columns``, ``topology._link_index``) couples
    to what its owner may change at will, and no import line shows it, so the import gate
    cannot. Make the thing public (no underscore, a docstring) on its owner, or ask the
    owner a public question instead.

    ``self._x``, ``cls._x`` and ``super()._x`` are the class's own; so is ``other._x`` in
    the module defining ``_x`` (another instance of the class, as in ``__eq__``). Other
    libraries' private names (``pool._processes``, numba's internals) are theirs: use
    their public API, which is what their next release keeps (``os._exit`` is public, as
    documented). The rule goes by name, not by type: a module that defines its own ``_x``
    reads any ``obj._x`` unchecked. Tests may reach into private attributes; they are not
    walked."""
    found = []
    for p in sorted((ROOT / "dcsim").rglob("*.py")):
        found += _private_attribute_reads(p, p.read_text())
    assert found == [], "private attributes read from another module:\n" + "\n".join(found)


def test_no_module_writes_another_modules_private_attributes():
    """Nor does a module set a private attribute on another module's object
    (``topology._dcsim_cache = ...``, ``setattr(obj, "_x", v)``,
    ``obj.__dict__.setdefault("_x", {})``): a cache or flag stored
    on someone else's object is state its owner neither documents nor knows of. Keep it
    in the module that uses it (a ``weakref.WeakKeyDictionary`` keyed by the object), or
    make it a public, documented part of the owner. Here a module owns ``_x`` only by
    ``self._x = ...``, ``cls._x = ...``, ``def _x`` or a class-level or module-level
    ``_x``; ``obj._x = ...`` on an object of its own class (a copy being built) is fine
    in that module.

    One write is the exception, named here with its reason: numba has no public way to
    give a compiled function a cache of one's own, so ``dcsim.allocators.kernel_cache``
    installs its guarded cache as the dispatcher's ``_cache`` (the module says why)."""
    found = []
    for p in sorted((ROOT / "dcsim").rglob("*.py")):
        found += _private_attribute_writes(p, p.read_text())
    found = [f for f in found if not (f.startswith("dcsim.allocators.kernel_cache:")
                                      and f.endswith(": dispatcher._cache"))]
    assert found == [], "private attributes set from another module:\n" + "\n".join(found)


def test_the_private_attribute_finder_finds_them():
    mod = ROOT / "dcsim" / "pkg" / "a.py"
    src = ("import os\nimport numpy as np\n"
           "class A:\n"
           "    _limit = 3\n"
           "    __slots__ = ('_slot',)\n"
           "    def __init__(self, view):\n"
           "        self._own = view._columns\n"
           "        self.n = len(cls._limit) + super()._base + self.__dict__['x']\n"
           "    def __eq__(self, other):\n"
           "        return self._own == other._own and other._slot\n"
           "    def _helper(self):\n"
           "        return getattr(self.topology, '_link_index', None)\n"
           "def f(pool, a, cmd):\n"
           "    os._exit(0) if a._helper() else np.random._bit_generator\n"
           "    hasattr(pool, '_processes'), getattr(a, '_limit'), getattr(a, 'public')\n"
           "    pool._processes.values(); obj.__class__; obj.__dict__\n"
           "    return cmd._run_build_commands, copy._ok\n"
           "def g(copy):\n"
           "    copy._ok = 1\n")
    assert _private_attribute_reads(mod, src) == [
        "dcsim.pkg.a:7: view._columns",
        "dcsim.pkg.a:12: getattr(self.topology, '_link_index')",
        "dcsim.pkg.a:14: np.random._bit_generator",
        "dcsim.pkg.a:15: hasattr(pool, '_processes')",
        "dcsim.pkg.a:16: pool._processes",
        "dcsim.pkg.a:17: cmd._run_build_commands"]
    assert _private_attribute_reads(mod, "def f(e):\n    e._tick(e._x)\n") == [
        "dcsim.pkg.a:2: e._tick", "dcsim.pkg.a:2: e._x"]
    writes = ("class T:\n    _table = None\n"
              "    def copy(self):\n        new = T()\n        new._table = self._table\n"
              "def cache(topology, d):\n"
              "    topology._dcsim_groups = 1\n    setattr(topology, '_dcsim_links', 2)\n"
              "    setattr(d, 'public', 3)\n    d._cache = None\n"
              "    del topology._gone\n")
    assert _private_attribute_writes(mod, writes) == [
        "dcsim.pkg.a:7: topology._dcsim_groups",
        "dcsim.pkg.a:8: setattr(topology, '_dcsim_links')",
        "dcsim.pkg.a:10: d._cache",
        "dcsim.pkg.a:11: topology._gone"]
    assert _private_attribute_reads(mod, writes) == []
    through = ("def tables(levels):\n"
               "    t = levels.__dict__.get('_tables')\n"
               "    levels.__dict__['_tables'] = t\n"
               "    p = levels.__dict__.setdefault('_plans', {})\n"
               "    return levels.__dict__['_other'], levels.__dict__.get('public')\n"
               "class Own:\n    def f(self):\n        return self.__dict__.get('_mine')\n")
    assert _private_attribute_reads(mod, through) == [
        "dcsim.pkg.a:5: levels.__dict__['_other']"]
    assert _private_attribute_writes(mod, through) == [
        "dcsim.pkg.a:3: levels.__dict__['_tables']",
        "dcsim.pkg.a:4: levels.__dict__['_plans']"]


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
