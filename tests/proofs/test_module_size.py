"""Every library module holds one job in about 400 lines, or says why not.

A module over ``LIMIT`` lines must carry a paragraph starting "Why this module is long:"
in its docstring: a long module is either two jobs that want a split, or one job whose
length has a reason a reader should find at the top.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent.parent / "runkernel"
LIMIT = 400
REASON = "Why this module is long:"


def long_without_reason(path: Path) -> bool:
    """Whether ``path`` is over ``LIMIT`` lines with no reason in its module docstring."""
    text = path.read_text()
    if len(text.splitlines()) <= LIMIT:
        return False
    docstring = ast.get_docstring(ast.parse(text)) or ""
    return REASON not in docstring


def test_every_module_is_short_or_says_why() -> None:
    offenders = [
        f"{path.relative_to(PACKAGE).as_posix()} ({len(path.read_text().splitlines())} lines)"
        for path in sorted(PACKAGE.rglob("*.py"))
        if long_without_reason(path)
    ]
    assert offenders == [], f"over {LIMIT} lines with no {REASON!r} paragraph in the docstring: {offenders}"


def test_the_check_sees_a_long_module_without_a_reason(tmp_path: Path) -> None:
    body = "x = 1\n" * (LIMIT + 1)
    plain = tmp_path / "plain.py"
    plain.write_text('"""One job."""\n' + body)
    explained = tmp_path / "explained.py"
    explained.write_text(f'"""One job.\n\n{REASON} one table.\n"""\n' + body)
    short = tmp_path / "short.py"
    short.write_text('"""One job."""\n' + "x = 1\n" * (LIMIT - 1))
    assert long_without_reason(plain)
    assert not long_without_reason(explained)
    assert not long_without_reason(short)

