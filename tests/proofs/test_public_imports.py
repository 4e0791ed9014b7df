"""What users copy imports only public modules.

Every ``python`` block of README.md and the pages under docs/, and every file in examples/, may import
from runkernel only ``runkernel``, ``runkernel.kernel``, ``runkernel.testing``,
``runkernel.integrations.<framework>`` and the documented store modules
(``api_doc.STORE_MODULES``): what they show is what a user writes, and everything else
may move (``adapters/`` gets rooms next).
"""

from __future__ import annotations

import ast
import importlib.util
import re
import types
from pathlib import Path

import pytest

from runkernel.cli.api_doc import STORE_MODULES

ROOT = Path(__file__).resolve().parent.parent.parent
PUBLIC = frozenset({"runkernel", "runkernel.kernel", *STORE_MODULES})


def is_public(module: str) -> bool:
    """Whether users may import ``module``."""
    if module in PUBLIC or module == "runkernel.testing" or module.startswith("runkernel.testing."):
        return True
    parts = module.split(".")
    return parts[:2] == ["runkernel", "integrations"] and len(parts) == 3 and not parts[2].startswith("_")


def _imports_a_module(package: str, name: str) -> bool:
    """Whether ``from package import name`` binds a module: an attribute of that name if
    the package has one (``runkernel.kernel.decide`` is a function), else a submodule."""
    try:
        value = getattr(importlib.import_module(package), name, None)
    except ImportError:  # an integration whose framework is not installed
        value = None
    if value is not None:
        return isinstance(value, types.ModuleType)
    try:
        return importlib.util.find_spec(f"{package}.{name}") is not None
    except ModuleNotFoundError:
        return False


def private_imports(code: str) -> list[str]:
    """The runkernel modules ``code`` imports that are not public, as ``line: module``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(code)):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            modules = [node.module]
            # ``from runkernel import adapters`` imports a module too
            if node.module == "runkernel" or node.module.startswith("runkernel."):
                modules += [
                    f"{node.module}.{alias.name}" for alias in node.names if _imports_a_module(node.module, alias.name)
                ]
        for module in modules:
            if (module == "runkernel" or module.startswith("runkernel.")) and not is_public(module):
                found.append(f"line {node.lineno}: {module}")
    return found


def python_blocks(text: str) -> list[str]:
    """Every python block, a titled one (a file the reader saves) or one in a list too."""
    return [
        "".join(line[len(indent):] if line.startswith(indent) else line for line in body.splitlines(True))
        for indent, body in re.findall(r"^([ ]*)```python[^\n]*\n(.*?)^\1```$", text, re.S | re.M)
    ]


SOURCES = [
    *[(f"{page.relative_to(ROOT)} block {n}", block)
      for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
      for n, block in enumerate(python_blocks(page.read_text()), start=1)],
    *[(f"examples/{path.name}", path.read_text()) for path in sorted((ROOT / "examples").glob("*.py"))],
]


def test_the_readme_the_docs_and_the_examples_are_found() -> None:
    names = [name for name, _ in SOURCES]
    assert sum(name.startswith("README.md") for name in names) >= 1, names
    assert sum(name.startswith("docs/") for name in names) >= 15, names
    assert "examples/demo_app.py" in names


@pytest.mark.parametrize(("name", "code"), SOURCES, ids=[name for name, _ in SOURCES])
def test_users_copy_only_public_imports(name: str, code: str) -> None:
    assert private_imports(code) == [], f"{name} imports a module that is not public"


def test_the_check_tells_private_imports_from_public_ones() -> None:
    public = (
        "import runkernel\n"
        "from runkernel import Driver\n"
        "from runkernel.kernel import decide\n"
        "from runkernel import kernel\n"
        "from runkernel.adapters.stores.memory import MemoryStore\n"
        "from runkernel.conformance import StoreContract\n"
        "from runkernel.testing import anything\n"
        "from runkernel.integrations.pydantic_ai import RunkernelDurability\n"
        "import json\n"
    )
    assert private_imports(public) == []
    private = (
        "from runkernel.adapters.drive.ports import Returned\n"
        "import runkernel.adapters.drive.runtime\n"
        "from runkernel import adapters\n"
        "from runkernel.kernel.protocol import Approve\n"
        "from runkernel.integrations.pydantic_ai._context import RunEnded\n"
        "def f():\n"
        "    from runkernel.adapters.worker.apps import RuntimeApp\n"
    )
    assert private_imports(private) == [
        "line 1: runkernel.adapters.drive.ports",
        "line 2: runkernel.adapters.drive.runtime",
        "line 3: runkernel.adapters",
        "line 4: runkernel.kernel.protocol",
        "line 5: runkernel.integrations.pydantic_ai._context",
        "line 7: runkernel.adapters.worker.apps",
    ]
