"""The README's examples run exactly as printed.

Every fenced ``python`` block of a README section marked ``<!-- runnable: ... -->`` (the
line under its ``##`` heading) runs in a fresh interpreter, in an empty directory, so it
can use nothing but what ``runkernel`` exports and what the block itself defines.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
MARKER = "<!-- runnable:"
SECTIONS = ("Using the kernel", "Using runkernel in your agent")


def runnable_sections(text: str) -> dict[str, str]:
    """The body of every ``##`` section whose first line is the runnable marker."""
    found: dict[str, str] = {}
    for match in re.finditer(r"^## ([^\n]+)\n\n(.*?)(?=^## |\Z)", text, re.S | re.M):
        title, body = match.group(1).strip(), match.group(2)
        if body.startswith(MARKER):
            found[title] = body
    return found


def python_blocks(body: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", body, re.S | re.M)


EXAMPLES = [
    (f"{title} #{number}", block)
    for title, body in runnable_sections(README.read_text()).items()
    for number, block in enumerate(python_blocks(body), start=1)
]


def test_the_marked_sections_and_their_examples_are_found() -> None:
    sections = runnable_sections(README.read_text())
    assert set(SECTIONS) <= set(sections), set(SECTIONS) - set(sections)
    assert len(python_blocks(sections["Using the kernel"])) == 1
    assert len(python_blocks(sections["Using runkernel in your agent"])) == 2


@pytest.mark.parametrize(("name", "code"), EXAMPLES, ids=[name for name, _ in EXAMPLES])
def test_a_readme_example_runs_as_printed(name: str, code: str, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    print(f"{name}:\n{result.stdout}")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip(), "every example prints what it did"
    if "Driver(" in code:
        assert "completed - Done: results are in your inbox." in result.stdout
        assert "approval needed: send_email {'to': 'me'}" in result.stdout
    if "Runtime(" in code:
        assert result.stdout.strip() == "ended"
