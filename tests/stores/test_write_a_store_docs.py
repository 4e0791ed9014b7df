"""docs/how-to/write-a-store.md runs as printed: its store block is
``examples/jsonl_store.py`` (included by the page), saved as ``jsonl_store.py`` in a
directory outside runkernel, and its test module passes the whole contract suite there,
run by the page's command, child processes included."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from docs_blocks import commands, run_by
from runkernel.conformance import StoreContract

ROOT = Path(__file__).resolve().parent.parent.parent
PAGE = "how-to/write-a-store.md"


def test_the_example_store_passes_the_suite_as_printed(tmp_path: Path) -> None:
    store, module, command = run_by(PAGE, "test_write_a_store_docs.py")
    assert (store.title, module.title, command.language) == ("jsonl_store.py", "test_jsonl_store.py", "bash")
    assert store.code.strip() == '--8<-- "examples/jsonl_store.py"'  # the page prints the file itself
    shutil.copy(ROOT / "examples" / "jsonl_store.py", tmp_path / "jsonl_store.py")
    (tmp_path / "test_jsonl_store.py").write_text(module.code, encoding="utf-8")
    (line,) = commands(command)
    assert line == "python3 -m pytest -q test_jsonl_store.py"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "test_jsonl_store.py"],
        cwd=tmp_path, capture_output=True, text=True, check=False, timeout=900,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    passed = re.search(r"(\d+) passed", result.stdout)
    contract_tests = [name for name in dir(StoreContract) if name.startswith("test_")]
    print(f"the example store: {passed.group(0) if passed else result.stdout[-300:]}")
    assert passed is not None and int(passed.group(1)) >= len(contract_tests), result.stdout[-3000:]
    assert "skipped" not in result.stdout  # reopen and store_factory given: nothing left out


def test_every_name_a_store_calls_is_documented() -> None:
    """What a store author needs is on the page or in the API reference: every name of
    ``runkernel.adapters.stores.kit``, the one module the example store imports."""
    from runkernel.adapters.stores import kit

    page = (ROOT / "docs" / PAGE).read_text(encoding="utf-8")
    api = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    on_page = [name for name in kit.__all__ if f"`{name}" in page]
    in_api = [name for name in kit.__all__ if f"### `{name}" in api]
    print(f"kit names: {len(kit.__all__)}, on the page {len(on_page)}, in the API reference {len(in_api)}")
    assert [name for name in kit.__all__ if name not in on_page and name not in in_api] == []
    assert [name for name in kit.__all__ if name not in in_api] == []
    imported = re.findall(r"^from (\S+) import", (ROOT / "examples" / "jsonl_store.py").read_text(), re.M)
    assert [m for m in imported if m.startswith("runkernel")] == ["runkernel.adapters.stores.kit"]
