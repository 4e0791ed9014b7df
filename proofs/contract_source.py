"""Reading the contract modules without importing them: which top-level functions are
contracts (their docstrings have ``post:`` lines), and where each one is.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from pathlib import Path


def contract_posts(path: Path) -> dict[str, int]:
    """Top-level functions of ``path`` whose docstring has ``post:`` lines, with how
    many. Parsed from the source, so a contract CrossHair silently skips still counts."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: dict[str, int] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            doc = ast.get_docstring(node) or ""
            posts = sum(1 for line in doc.splitlines() if line.strip().startswith("post:"))
            if posts:
                found[node.name] = posts
    return found


def function_lines(path: Path) -> dict[str, tuple[int, int]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return {
        node.name: (node.lineno, node.end_lineno or node.lineno)
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
    }


def contracts_in(paths: Sequence[Path]) -> dict[str, tuple[Path, int]]:
    """Every contract of ``paths``: its name, with the module it is in and how many
    ``post:`` lines it has, module by module in the given order, each in source order.
    A name may be a contract of one module only (the report and BUDGETS go by name)."""
    found: dict[str, tuple[Path, int]] = {}
    for path in paths:
        for name, posts in contract_posts(path).items():
            if name in found:
                raise ValueError(f"contract {name} is in both {found[name][0]} and {path}")
            found[name] = (path, posts)
    return found
