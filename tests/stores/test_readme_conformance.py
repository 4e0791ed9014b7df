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
from runkernel.conformance.instances import InstancesContract
from runkernel.conformance.processes import ProcessContract

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
    skipped = re.search(r"(\d+) skipped", result.stdout)
    ran = (int(passed.group(1)) if passed else 0) + (int(skipped.group(1)) if skipped else 0)
    contract_tests = [name for name in dir(StoreContract) if name.startswith("test_")]
    assert ran >= len(contract_tests) >= 15, result.stdout
    # the page's class gives no reopen nor store_factory: the tests across instances run
    # with the store's own reopen(), all but the thread lease race (it needs clock=), and
    # the tests across processes are skipped, each saying which fixture would run it
    across = [n for n in contract_tests if n in dir(ProcessContract)]
    across.append("test_threads_racing_for_a_lease_through_their_own_instances_are_granted_it_once")
    assert all(n in dir(InstancesContract) for n in across[-1:])
    assert skipped is not None and int(skipped.group(1)) == len(across) == 3, result.stdout
    print(f"conformance example: {passed.group(0) if passed else 0}, {skipped.group(0)}")
