"""The library's import layers: every module of ``runkernel`` read with ``ast`` (every
``import`` statement, those inside functions included), checked for

- no import circle between modules (imports under ``if TYPE_CHECKING:`` are left out of
  this check: they never run, so they cannot make a circle at import time), and
- imports only going down, in this order (a module may import its own room and any room
  below it, TYPE_CHECKING imports included: a type is a dependency too):

    top:     runkernel (the facade), runkernel.cli, runkernel.ui, runkernel.integrations
    worker:  runkernel.adapters.worker
    drive:   runkernel.adapters.drive
    stores:  runkernel.adapters.stores, runkernel.conformance (beside the stores)
    specs:   runkernel.specs
    kernel:  runkernel.kernel

  The base modules ``runkernel.errors``, ``runkernel._deprecation`` and ``runkernel._compat``
  may be imported by anyone (``_compat``'s TYPE_CHECKING block names where every old name
  lives now, so its own imports are not checked; ``runkernel.errors`` may name types of
  any room under TYPE_CHECKING, see ``TYPES_ONLY_FROM_ABOVE``). ``runkernel.testing`` may
  import anything; the only library modules that may import it are the CLI's ``simulate``
  command (lazily: inside a function, or under TYPE_CHECKING) and the deprecated aliases of moved modules
  (``runkernel.simulation``, ``runkernel.adapters.crash`` and the other old paths kept for
  one release), which may import anything and which no library module may import.

Each offending edge is listed in the failure.
"""

from __future__ import annotations

import ast
import pathlib
import shutil
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
PACKAGE = ROOT / "runkernel"

#: The rooms, lowest first: (rank, name, module prefixes).
ROOMS: tuple[tuple[int, str, tuple[str, ...]], ...] = (
    (0, "kernel", ("runkernel.kernel",)),
    (1, "specs", ("runkernel.specs",)),
    (2, "stores", ("runkernel.adapters.stores", "runkernel.conformance")),
    (3, "drive", ("runkernel.adapters.drive",)),
    (4, "worker", ("runkernel.adapters.worker",)),
    (5, "top", ("runkernel.cli", "runkernel.ui", "runkernel.integrations")),
)
BASE = {"runkernel.errors", "runkernel._deprecation", "runkernel._compat", "runkernel.adapters"}
TESTING = "runkernel.testing"
#: The deprecated aliases of the old paths: modules that only re-export a moved module.
DEPRECATED_ALIAS_PREFIXES = ("runkernel.simulation",)
#: Base modules whose ``if TYPE_CHECKING:`` imports may name any room. Why: the errors
#: annotate the records they carry (a ``Lease``, an ``Action``, a kernel ``Rule``); those
#: types belong to the rooms that raise the errors, and the imports never run, so the
#: kernel can still import ``runkernel.errors`` without loading anything else.
TYPES_ONLY_FROM_ABOVE = {"runkernel.errors"}
#: Library modules allowed to import ``runkernel.testing``, inside a function only.
TESTING_IMPORTERS = {"runkernel.cli.simulate", "runkernel.cli.crashtest"}


def module_name(path: pathlib.Path, root: pathlib.Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts).removesuffix(".__init__")


def is_deprecated_alias(name: str, tree: ast.Module) -> bool:
    """An old path kept for one release: it calls ``moved_module`` at its top level."""
    if name.startswith(DEPRECATED_ALIAS_PREFIXES):
        return True
    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            func = node.value.func
            if isinstance(func, ast.Name) and func.id == "moved_module":
                return True
    return False


class Import:
    def __init__(self, target: str, line: int, lazy: bool, type_only: bool) -> None:
        self.target, self.line, self.lazy, self.type_only = target, line, lazy, type_only


def imports_of(name: str, tree: ast.Module, is_package: bool, modules: set[str]) -> list[Import]:
    found: list[Import] = []

    def resolve(base: str, names: list[str]) -> list[str]:
        # ``from pkg import sub`` imports the module pkg.sub when there is one, else pkg.
        return [f"{base}.{n}" if f"{base}.{n}" in modules else base for n in names]

    def visit(node: ast.AST, lazy: bool, type_only: bool) -> None:
        if isinstance(node, ast.If) and (
            (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
            or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING")
        ):
            for child in node.body:
                visit(child, lazy, True)
            for child in node.orelse:
                visit(child, lazy, type_only)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "runkernel":
                    found.append(Import(alias.name, node.lineno, lazy, type_only))
            return
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            if base.split(".")[0] == "runkernel":
                for target in resolve(base, [a.name for a in node.names]):
                    found.append(Import(target, node.lineno, lazy, type_only))
            return
        inner = lazy or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for below in ast.iter_child_nodes(node):
            visit(below, inner, type_only)

    for top in tree.body:
        visit(top, False, False)
    return found


def rank_of(name: str) -> int | None:
    for rank, _room, prefixes in ROOMS:
        if any(name == p or name.startswith(p + ".") for p in prefixes):
            return rank
    if name == "runkernel":
        return ROOMS[-1][0]  # the facade re-exports the whole library: top room
    return None


def room_of(name: str) -> str:
    rank = rank_of(name)
    return next(room for r, room, _ in ROOMS if r == rank) if rank is not None else name


def violations(root: pathlib.Path) -> tuple[list[str], list[list[str]]]:
    """(each edge that breaks a layer rule, each import circle) of the package at ``root``."""
    trees: dict[str, tuple[ast.Module, bool]] = {}
    for path in sorted(root.rglob("*.py")):
        trees[module_name(path, root)] = (ast.parse(path.read_text()), path.name == "__init__.py")
    modules = set(trees)
    aliases = {n for n, (t, _) in trees.items() if is_deprecated_alias(n, t)}
    edges: dict[str, set[str]] = {n: set() for n in modules}
    bad: list[str] = []
    for name, (tree, is_package) in sorted(trees.items()):
        for imp in imports_of(name, tree, is_package, modules):
            target = imp.target if imp.target in modules else None
            while target is None and "." in imp.target:
                imp.target = imp.target.rsplit(".", 1)[0]
                target = imp.target if imp.target in modules else None
            if target is None or target == name:
                continue
            if not imp.type_only:
                edges[name].add(target)
            edge = f"{name} -> {target} (line {imp.line}{', lazy' if imp.lazy else ''}{', TYPE_CHECKING' if imp.type_only else ''})"
            if target in aliases and name not in aliases and not name.startswith(TESTING + ".") and name != TESTING:
                bad.append(f"{edge}: imports a deprecated alias")
                continue
            if name in aliases or name == TESTING or name.startswith(TESTING + ".") or name == "runkernel._compat":
                continue
            if target == TESTING or target.startswith(TESTING + "."):
                if name not in TESTING_IMPORTERS:
                    bad.append(f"{edge}: only {sorted(TESTING_IMPORTERS)} may import runkernel.testing")
                elif not (imp.lazy or imp.type_only):
                    bad.append(f"{edge}: runkernel.testing must be imported inside a function")
                continue
            if target in BASE:
                continue
            if name in BASE:
                if not (imp.type_only and name in TYPES_ONLY_FROM_ABOVE):
                    bad.append(f"{edge}: a base module imports only base modules")
                continue
            mine, theirs = rank_of(name), rank_of(target)
            if mine is None or theirs is None:
                bad.append(f"{edge}: {name if mine is None else target} belongs to no room")
            elif theirs > mine:
                bad.append(f"{edge}: {room_of(name)} imports up, from {room_of(target)}")
    return bad, circles(edges)


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            connect(v)
    return found


def test_imports_only_go_down_and_make_no_circle() -> None:
    bad, loops = violations(PACKAGE)
    print(f"modules: {sum(1 for _ in PACKAGE.rglob('*.py'))}, upward or forbidden imports: {len(bad)}, circles: {len(loops)}")
    assert not bad, "imports that break the layers:\n" + "\n".join(bad)
    assert not loops, "import circles:\n" + "\n".join(" <-> ".join(c) for c in loops)


@pytest.mark.parametrize(
    ("where", "line", "expected"),
    [
        ("runkernel/adapters/stores/work.py", "from runkernel.adapters.drive.runtime import RunOutcome\n", "stores imports up, from drive"),
        ("runkernel/kernel/codec.py", "def _late() -> None:\n    import runkernel.cli.entry\n", "kernel imports up, from top"),
        ("runkernel/adapters/drive/core.py", "from runkernel.testing import crash\n", "may import runkernel.testing"),
        ("runkernel/adapters/drive/ports.py", "from runkernel.adapters.ports import Tool\n", "imports a deprecated alias"),
    ],
)
def test_a_planted_bad_import_is_named(tmp_path: pathlib.Path, where: str, line: str, expected: str) -> None:
    copy = tmp_path / "runkernel"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / where.removeprefix("runkernel/")
    target.write_text(target.read_text() + "\n" + line)
    bad, _ = violations(copy)
    assert any(expected in b and b.startswith(module_name(target, copy)) for b in bad), bad


def test_a_planted_circle_is_found(tmp_path: pathlib.Path) -> None:
    copy = tmp_path / "runkernel"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / "adapters" / "stores" / "leases.py"
    target.write_text(target.read_text() + "\nfrom runkernel.adapters.stores.memory import MemoryStore\n")
    _, loops = violations(copy)
    assert any("runkernel.adapters.stores.leases" in c and "runkernel.adapters.stores.memory" in c for c in loops), loops
