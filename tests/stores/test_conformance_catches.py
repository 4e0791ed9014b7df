"""The store contract suite catches the bugs a new backend is most likely to have: each
planted store (``planted_stores``) runs the whole public suite, from a test module of
its own that imports only ``runkernel.conformance`` and the store, under plain pytest in
a fresh interpreter, as its author would run it; the tests that must catch its bug fail.
The unplanted example store passes the same module (``test_example_store.py``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from planted_stores import CAUGHT_BY

ROOT = Path(__file__).resolve().parent.parent.parent

MODULE = '''
import pytest

from planted_stores import {name}
from runkernel.conformance import StoreContract, StoreFactory


class TestPlanted(StoreContract):
    @pytest.fixture
    def store(self, tmp_path):
        made = {name}(tmp_path / "journal")
        yield made
        made.close()

    @pytest.fixture
    def reopen(self, tmp_path):
        return lambda **options: {name}(tmp_path / "journal", **options)

    @pytest.fixture
    def store_factory(self, tmp_path):
        return StoreFactory("planted_stores:{name}", str(tmp_path / "journal"))
'''


@pytest.mark.parametrize("name", list(CAUGHT_BY))
def test_the_suite_catches_the_planted_store(name: str, tmp_path: Path) -> None:
    (tmp_path / "test_planted.py").write_text(MODULE.format(name=name), encoding="utf-8")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "tests" / "stores"), env.get("PYTHONPATH", "")])
    env["COLUMNS"] = "400"  # the short summary keeps each failure's message
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rf", "-p", "no:cacheprovider", "test_planted.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=False, timeout=900,
    )
    failed = set(re.findall(r"^FAILED test_planted\.py::TestPlanted::(\w+)", result.stdout, re.M))
    passed = re.search(r"(\d+) passed", result.stdout)
    print(f"{name}: {len(failed)} failed ({', '.join(sorted(failed))}), {passed.group(0) if passed else '0 passed'}")
    for line in re.findall(r"^FAILED test_planted\.py::TestPlanted::.*$", result.stdout, re.M):
        print(f"  {line}")  # what the suite told the store's author
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    missed = [test for test in CAUGHT_BY[name] if test not in failed]
    assert missed == [], f"{name} was not caught by {missed}:\n{result.stdout[-3000:]}"


def test_the_planted_stores_and_their_test_module_use_only_documented_names() -> None:
    """What catches the planted bugs is what an outside package has: the planted stores
    import of runkernel only the store kit's names (``kit.__all__``, all documented:
    ``test_write_a_store_docs``), beside the example store, and their test module only
    ``runkernel.conformance``'s."""
    import ast

    import runkernel.conformance
    from runkernel.adapters.stores import kit

    tree = ast.parse((Path(__file__).parent / "planted_stores.py").read_text(encoding="utf-8"))
    imported = [(node.module, alias.name) for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                for alias in node.names if node.module is not None]
    ours = [(module, name) for module, name in imported if module.split(".")[0] in ("runkernel", "examples")]
    print(f"planted stores: {len(ours)} names imported of runkernel and the example")
    assert {module for module, _ in ours} == {"runkernel.adapters.stores.kit", "examples.jsonl_store"}
    assert [name for module, name in ours if module.startswith("runkernel") and name not in kit.__all__] == []
    suite = ast.parse(MODULE.format(name="Planted"))
    names = [(node.module, alias.name) for node in ast.walk(suite) if isinstance(node, ast.ImportFrom)
             for alias in node.names]
    assert [n for m, n in names if m == "runkernel.conformance" and n not in runkernel.conformance.__all__] == []
    assert {m for m, _ in names if m is not None and m.startswith("runkernel")} == {"runkernel.conformance"}
