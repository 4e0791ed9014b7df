"""The README's example, and the examples of docs/guide/using.md, run exactly as printed.

Every fenced ``python`` block of a README section marked ``<!-- runnable: ... -->`` (the
line under its ``##`` heading), and every block docs/guide/using.md hands to this test,
runs in a fresh interpreter, in an empty directory, so it can use nothing but what
``runkernel`` exports and what the block itself defines. The guide includes the README's
push-mode example rather than a copy of it (the ``push-example`` snippet).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from docs_blocks import DOCS, run_by

README = Path(__file__).resolve().parent.parent.parent / "README.md"
MARKER = "<!-- runnable:"
SECTIONS = ("An example",)
GUIDE = "guide/using.md"


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
    *[
        (f"README {title} #{number}", block)
        for title, body in runnable_sections(README.read_text()).items()
        for number, block in enumerate(python_blocks(body), start=1)
    ],
    *[(block.name, block.code) for block in run_by(GUIDE, "test_readme_examples.py")],
]


def test_the_marked_sections_and_their_examples_are_found() -> None:
    sections = runnable_sections(README.read_text())
    assert set(SECTIONS) <= set(sections), set(SECTIONS) - set(sections)
    assert len(python_blocks(sections["An example"])) == 1
    guide = run_by(GUIDE, "test_readme_examples.py")
    assert [block.language for block in guide] == ["python", "python"]  # the kernel, pull mode
    assert any("decide(" in block.code for block in guide) and any("Runtime(" in block.code for block in guide)


def test_the_guide_includes_the_readme_example_it_does_not_copy() -> None:
    readme = README.read_text()
    included = re.search(r"--8<-- \[start:push-example\][^\n]*\n(.*?)^[^\n]*--8<-- \[end:push-example\]", readme, re.S | re.M)
    assert included is not None, "the README marks its push-mode example as the push-example snippet"
    assert python_blocks(included.group(1)) == python_blocks(runnable_sections(readme)["An example"])
    assert '--8<-- "README.md:push-example"' in (DOCS / GUIDE).read_text()


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
