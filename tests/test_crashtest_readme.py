"""The README's crash-test examples run as printed: each python block of "Crash-testing
your own app" is a user's pytest file, run by pytest in a fresh interpreter and an empty
directory (the Pydantic AI one only with the extra installed)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent


def blocks() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = re.search(r"^## Crash-testing your own app\n\n(.*?)(?=^## )", text, re.S | re.M)
    assert section is not None, "the README has a section 'Crash-testing your own app'"
    found = re.findall(r"^```python\n(.*?)^```$", section.group(1), re.S | re.M)
    assert len(found) == 2
    return [str(block) for block in found]


def test_the_readme_crashtest_examples_run_as_printed(tmp_path: Path) -> None:
    plain, pydantic_ai = blocks()
    files = {"test_shop.py": plain}
    if importlib.util.find_spec("pydantic_ai") is not None:  # the pydantic-ai extra is installed
        files["test_pydantic_ai_shop.py"] = pydantic_ai
    for name, code in files.items():
        (tmp_path / name).write_text(code)
    done = subprocess.run(  # one interpreter for both: a user's pytest run
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *files],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    print(done.stdout[-2000:])
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(files) + 1} passed" in done.stdout
