"""The public API: every name a host needs from ``runkernel``, documented, loaded lazily."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import runkernel
import runkernel.kernel
from runkernel.adapters.stores.memory import MemoryStore
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.errors import BadStoreUrl, StoreUnavailable
from runkernel.cli import api_doc
from runkernel.specs.checker import Verdict

ROOT = Path(__file__).resolve().parent.parent.parent

#: "about 30 names" (issue 18): what the README's and the guide's examples need, and the rest of each set
#: they use part of (every action, every gate answer, the error tree's root and branches).
#: 36 since issue 20 added an action, ``Fence`` (W5); 37 since issue 34 added one, ``RunCalls`` (a group's
#: calls handed out together); 38 since issue 37 added ``fork`` (a new Thread from a Run's committed state).
MOST_NAMES = 38


def test_every_public_name_resolves_to_its_module_object() -> None:
    for name, module in runkernel._MODULE_OF.items():
        value = getattr(runkernel, name)
        assert value is getattr(__import__(module, fromlist=[name]), name), name
    assert runkernel.__all__ == list(runkernel._MODULE_OF)
    print(f"len(runkernel.__all__): {len(runkernel.__all__)}")
    assert len(runkernel.__all__) <= MOST_NAMES
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        getattr(runkernel, "nonexistent")


def test_the_kernels_all_is_its_sections() -> None:
    listed = [name for _title, names in runkernel.kernel.SECTIONS for name in names]
    assert len(listed) == len(set(listed)), "a name in two sections"
    assert runkernel.kernel.__all__ == listed
    for name in listed:
        assert hasattr(runkernel.kernel, name), name


def test_the_type_checking_imports_are_the_same_table() -> None:
    """Type checkers read the ``if TYPE_CHECKING:`` block, the runtime reads SECTIONS."""
    tree = ast.parse((ROOT / "runkernel" / "__init__.py").read_text())
    imported: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom) and statement.module is not None
                for alias in statement.names:
                    assert alias.asname == alias.name, "re-exported names keep their name"
                    imported[alias.name] = statement.module
    assert imported == runkernel._MODULE_OF


def test_every_public_name_has_a_docstring_of_its_own() -> None:
    for title, groups in runkernel.SECTIONS:
        for module_name, names in groups:
            module = __import__(module_name, fromlist=list(names))
            for name in names:
                assert api_doc._entry(name, getattr(module, name), module_name), f"{title}: {name}"
    for title, kernel_names in runkernel.kernel.SECTIONS:
        for name in kernel_names:
            assert api_doc._entry(name, getattr(runkernel.kernel, name), "runkernel.kernel"), f"{title}: {name}"
    for module_name, _purpose, names in api_doc.MODULES:
        module = __import__(module_name, fromlist=list(names))
        for name in names:
            assert api_doc._entry(name, getattr(module, name), module_name), f"{module_name}: {name}"


def test_docs_api_md_is_generated_from_the_docstrings() -> None:
    page = (ROOT / "docs" / "api.md").read_text()
    assert page == api_doc.render(), "docs/api.md is stale: python -m runkernel.cli.api_doc > docs/api.md"


def test_a_public_name_without_a_docstring_fails_the_generator() -> None:
    class Undocumented:
        pass

    with pytest.raises(ValueError, match="no docstring"):
        api_doc._entry("Undocumented", Undocumented)


def test_import_runkernel_loads_nothing_until_a_name_is_used() -> None:
    probe = (
        "import sys, runkernel\n"
        "before = sorted(m for m in sys.modules if m.startswith(('runkernel.', 'statemachine', 'sqlite3')))\n"
        "runkernel.Driver\n"
        "after = 'runkernel.adapters.drive.driver' in sys.modules\n"
        "print(before, after)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[] True", out.stdout + out.stderr


def test_runkernel_exports_the_error_root_and_its_three_branches() -> None:
    errors = [
        getattr(runkernel, name)
        for name in runkernel._MODULE_OF
        if isinstance(getattr(runkernel, name), type) and issubclass(getattr(runkernel, name), BaseException)
    ]
    assert errors == [runkernel.RunkernelError, runkernel.UsageError, runkernel.PeerError, runkernel.StoreError]
    with pytest.raises(TypeError, match="base class"):
        runkernel.RunkernelError("x")


def test_open_store_opens_memory_and_sqlite_and_refuses_the_rest(tmp_path: Path) -> None:
    assert isinstance(runkernel.open_store("memory:"), MemoryStore)
    sqlite = runkernel.open_store(f"sqlite:///{tmp_path / 'a.db'}")
    assert isinstance(sqlite, SqliteStore)
    sqlite.close()
    with pytest.raises(StoreUnavailable, match="127.0.0.1:1/db: opening the store failed"):
        runkernel.open_store("postgresql://127.0.0.1:1/db")  # nothing listens on port 1
    with pytest.raises(BadStoreUrl, match="unknown store URL"):
        runkernel.open_store("redis://x")
    assert issubclass(StoreUnavailable, runkernel.StoreError) and issubclass(BadStoreUrl, runkernel.UsageError)


def test_check_trace_judges_a_file_or_commits(tmp_path: Path) -> None:
    store = MemoryStore()
    driver = runkernel.Driver(store, {})
    driver.start(["hi"], thread_id="t1", run_id="r1")
    driver.inferred("bye", end=runkernel.EndCauseKind.COMPLETED)
    assert runkernel.check_trace(store.commits("t1")).verdict is Verdict.LEGAL
    from runkernel.adapters.stores.export import export_lines

    path = tmp_path / "t1.jsonl"
    path.write_text("\n".join(export_lines(store, "t1", redact=False)) + "\n")
    assert runkernel.check_trace(path).verdict is Verdict.LEGAL
    assert runkernel.check_trace(str(tmp_path / "missing.jsonl")).verdict is Verdict.NOT_A_TRACE
