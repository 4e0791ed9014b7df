"""Reading the documentation's code blocks, so a test can run every one as printed.

A page's blocks run in order, in one empty directory of its own, so a later block sees
the files and the store an earlier one made:

* a ``python`` block with ``title="NAME"`` is a file the reader saves: it is written to
  NAME;
* any other ``python`` block runs in a fresh interpreter;
* a ``bash`` block runs line by line in bash (a line may be a pipeline or use ``||``);
  a line that installs the package (``python3 -m pip install ...``) is not run, because
  the tests run in an environment that has it and ``.ci/run`` installs each extra;
* ``text``, ``json`` and ``mermaid`` blocks show output or data and are not run;
* a block right under a ``<!-- tests/LAYER/NAME.py runs this block ... -->`` line is run by that
  test, which checks what it prints, so this one does not run it a second time.

Where a command needs an id the reader copies from an earlier command's output (the
ticket of a wait, the operation id of an Indeterminate call), the page writes a
placeholder in capitals (``TICKET``, ``OPERATION``) and says where the id comes from;
``PLACEHOLDERS`` names how the test finds each one, from the same output a reader sees.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import attrs

DOCS = Path(__file__).resolve().parent.parent / "docs"

_FENCE = re.compile(r"^(?P<indent>[ ]*)```(?P<lang>[\w-]*)(?P<attrs>[^\n]*)\n(?P<body>.*?)^(?P=indent)```[ ]*$", re.S | re.M)
_TITLE = re.compile(r'title="([^"]+)"')
_RUN_BY = re.compile(r"<!-- (tests/(?:\w+/)?\w+\.py) runs this block\b[^\n]*-->\n\Z")
RUN_LANGUAGES = ("python", "bash")
SHOWN_LANGUAGES = ("text", "json", "mermaid", "")
INSTALL = re.compile(r"^python3? -m pip install\b")


@attrs.frozen
class Block:
    page: str
    number: int
    language: str
    title: str | None
    code: str
    run_by: str | None = None
    """The test that runs this block instead (``tests/LAYER/NAME.py``), if the page names one."""

    @property
    def name(self) -> str:
        return f"{self.page}#{self.number}" + (f" ({self.title})" if self.title else "")


def pages() -> list[Path]:
    """Every Markdown page of the documentation site."""
    return sorted(DOCS.rglob("*.md"))


def blocks(page: Path) -> list[Block]:
    """The fenced code blocks of a page, in order (indented ones in lists included)."""
    text = page.read_text(encoding="utf-8")
    found = []
    for number, match in enumerate(_FENCE.finditer(text), start=1):
        indent = match.group("indent")
        body = "".join(line[len(indent):] if line.startswith(indent) else line for line in match.group("body").splitlines(True))
        title = _TITLE.search(match.group("attrs"))
        marker = _RUN_BY.search(text, 0, match.start())
        found.append(
            Block(str(page.relative_to(DOCS)), number, match.group("lang"), title.group(1) if title else None, body,
                  marker.group(1) if marker else None)
        )
    return found


def run_by(page: str, test: str) -> list[Block]:
    """The blocks of ``docs/PAGE`` that the page says ``tests/LAYER/TEST`` runs, in order (test
    basenames are unique across the layers)."""
    return [block for block in blocks(DOCS / page) if block.run_by is not None and Path(block.run_by).name == test]


def commands(block: Block) -> Iterator[str]:
    """The lines of a bash block that the test runs (continuations joined)."""
    joined = block.code.replace("\\\n", " ")
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#") and not INSTALL.match(line):
            yield line
