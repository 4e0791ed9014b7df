"""The store contract how-to (docs/how-to/store-contract.md) runs as printed: a third-party
store's test module that subclasses ``runkernel.conformance.StoreContract`` passes under
plain pytest, run as the page's command runs it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from docs_blocks import commands, run_by
from runkernel.conformance import StoreContract

PAGE = "how-to/store-contract.md"


def test_the_conformance_example_passes_as_printed(tmp_path: Path) -> None:
    module, command = run_by(PAGE, "test_readme_conformance.py")
    assert (module.language, module.title, command.language) == ("python", "test_my_store.py", "bash")
    (tmp_path / "test_my_store.py").write_text(module.code, encoding="utf-8")
    (line,) = commands(command)
    assert line == "python3 -m pytest -q test_my_store.py"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_my_store.py"],
        cwd=tmp_path, capture_output=True, text=True, check=False, timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    passed = re.search(r"(\d+) passed", result.stdout)
    contract_tests = [name for name in dir(StoreContract) if name.startswith("test_")]
    assert passed is not None and int(passed.group(1)) >= len(contract_tests) >= 15, result.stdout
    print(f"conformance example: {passed.group(0)}")
