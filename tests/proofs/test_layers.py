"""The library's import layers: every module of ``runkernel`` read with ``ast`` (every
``import`` statement, those inside functions included), checked for

- no import circle between modules, imports under ``if TYPE_CHECKING:`` included (they
  never run, so they cannot fail an import, but a type is a dependency too: two modules
  that name each other's types are one module cut in two), and
- imports only going down, in this order (a module may import its own room and any room
  below it, TYPE_CHECKING imports included: a type is a dependency too):

    top:     runkernel (the facade), runkernel.cli, runkernel.ui, runkernel.integrations
    worker:  runkernel.adapters.worker
    drive:   runkernel.adapters.drive
    stores:  runkernel.adapters.stores, runkernel.conformance (beside the stores)
    specs:   runkernel.specs
    kernel:  runkernel.kernel

  The base module ``runkernel.errors`` may be imported by anyone and imports nothing of
  runkernel, not even under TYPE_CHECKING. ``runkernel.testing`` may import anything; the
  only library modules that may import it are the CLI's ``simulate`` and ``crashtest``
  commands (lazily: inside a function, or under TYPE_CHECKING).

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
BASE = {"runkernel.errors", "runkernel.adapters"}
TESTING = "runkernel.testing"
#: Library modules allowed to import ``runkernel.testing``, inside a function only.
TESTING_IMPORTERS = {"runkernel.cli.simulate", "runkernel.cli.crashtest"}


def module_name(path: pathlib.Path, root: pathlib.Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts).removesuffix(".__init__")


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
            edges[name].add(target)
            edge = f"{name} -> {target} (line {imp.line}{', lazy' if imp.lazy else ''}{', TYPE_CHECKING' if imp.type_only else ''})"
            if name == TESTING or name.startswith(TESTING + "."):
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
        (
            "runkernel/errors.py",
            "if TYPE_CHECKING:\n    from runkernel.kernel.rules import Rule\n",
            "a base module imports only base modules",
        ),
    ],
)
def test_a_planted_bad_import_is_named(tmp_path: pathlib.Path, where: str, line: str, expected: str) -> None:
    copy = tmp_path / "runkernel"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / where.removeprefix("runkernel/")
    target.write_text(target.read_text() + "\n" + line)
    bad, _ = violations(copy)
    assert any(expected in b and b.startswith(module_name(target, copy)) for b in bad), bad


@pytest.mark.parametrize(
    "line",
    [
        "from runkernel.adapters.stores.memory import MemoryStore\n",
        "if TYPE_CHECKING:\n    from runkernel.adapters.stores.memory import MemoryStore\n",
    ],
    ids=["import", "type-checking-import"],
)
def test_a_planted_circle_is_found(tmp_path: pathlib.Path, line: str) -> None:
    copy = tmp_path / "runkernel"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / "adapters" / "stores" / "leases.py"
    target.write_text(target.read_text() + "\n" + line)
    _, loops = violations(copy)
    assert any("runkernel.adapters.stores.leases" in c and "runkernel.adapters.stores.memory" in c for c in loops), loops
