"""The README's conformance example runs as printed: a third-party store's test module
that subclasses ``runkernel.conformance.StoreContract`` passes under plain pytest."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from runkernel.conformance import StoreContract

README = Path(__file__).resolve().parent.parent / "README.md"


def _example() -> str:
    text = README.read_text(encoding="utf-8")
    match = re.search(r"<!-- conformance-example -->\n```python\n(.*?)```\n<!-- /conformance-example -->", text, re.S)
    assert match is not None, "README has no conformance example block"
    return match.group(1)


def test_the_readme_conformance_example_passes_as_printed(tmp_path: Path) -> None:
    (tmp_path / "test_my_store.py").write_text(_example(), encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_my_store.py"],
        cwd=tmp_path, capture_output=True, text=True, check=False, timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    passed = re.search(r"(\d+) passed", result.stdout)
    contract_tests = [name for name in dir(StoreContract) if name.startswith("test_")]
    assert passed is not None and int(passed.group(1)) >= len(contract_tests) >= 15, result.stdout
    print(f"README conformance example: {passed.group(0)}")
