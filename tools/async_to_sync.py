#!/usr/bin/env python
"""Generate sync modules from async ones, as psycopg generates its sync code (its
``tools/async_to_sync.py``): the push-mode driver's sync shell from the async one, the
PostgreSQL store's sync session from its async one. The async module is written by
hand, the sync one is this tool's output, checked in, and
``tests/drive/test_async_to_sync.py`` fails while it differs from what this tool
generates.

``python tools/async_to_sync.py`` rewrites every generated file; ``--check`` only says
which are stale (exit status 1).

The rewrite is guided by the syntax tree but edits the source text in place, so the
generated file keeps the hand-written one's comments, line breaks and layout:

- ``if True:  # ASYNC`` blocks: the ``if`` branch is the async variant and is dropped;
  the ``else:`` branch (if any) is the sync one and takes its place, dedented;
- ``async def`` / ``async with`` / ``async for`` lose ``async``; ``await x`` becomes ``x``;
- names in ``RENAMES`` are renamed (``AsyncDriver`` → ``Driver``) in code, docstrings
  and ``__all__`` (other strings and comments are left as written: an error message may
  name the async class on purpose); modules in ``MODULE_RENAMES`` are renamed in code
  only (``connection_async`` → ``connection``: the sync module imports the sync twin);
- ``MaybeAwaitable[X]`` and ``Awaitable[X]`` become ``X``, and names in ``DROPPED_IMPORTS`` leave import lists;
- docstrings get the phrases of ``DOCSTRING_PHRASES`` replaced.

The result must parse and hold no ``async``/``await`` left (else the tool fails).
A dev tool, not part of the package: nothing runs it at import time.
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import sys
import tokenize
from collections.abc import Iterator, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: (hand-written async source, generated sync file), relative to the repository root
GENERATED: tuple[tuple[str, str], ...] = (
    ("runkernel/adapters/drive/driver_async.py", "runkernel/adapters/drive/driver_sync.py"),
    ("runkernel/adapters/stores/postgres/connection_async.py", "runkernel/adapters/stores/postgres/connection.py"),
    ("runkernel/adapters/stores/postgres/pick_up_async.py", "runkernel/adapters/stores/postgres/pick_up.py"),
    ("runkernel/adapters/stores/postgres/inbox_async.py", "runkernel/adapters/stores/postgres/inbox.py"),
    ("runkernel/adapters/stores/postgres/send_async.py", "runkernel/adapters/stores/postgres/send.py"),
)

RENAMES: Mapping[str, str] = {
    "AsyncDriver": "Driver",
    "AsyncPostgresConnection": "PostgresConnection",
    # psycopg's and psycopg-pool's own
    "AsyncConnection": "Connection",
    "AsyncConnectionPool": "ConnectionPool",
    "AsyncClientCursor": "ClientCursor",
}

#: modules an async module imports whose sync twins the sync module imports instead:
#: renamed in code only (a docstring names the module it means)
MODULE_RENAMES: Mapping[str, str] = {
    "connection_async": "connection",
}

#: a sync file has no awaitables: ``MaybeAwaitable[X]`` and ``Awaitable[X]`` are ``X``
UNWRAPPED = frozenset({"MaybeAwaitable", "Awaitable"})

DROPPED_IMPORTS = frozenset({"MaybeAwaitable", "Awaitable"})

DOCSTRING_PHRASES: Mapping[str, str] = {
    "for asyncio hosts: the gate may be async; store\n    calls run off the event loop, on one thread kept for the store (``store_thread``), and\n    ``on_event`` is called there (``loop.call_soon_threadsafe`` reaches the loop from it).": (
        "for synchronous hosts."
    ),
    "for asyncio hosts": "for synchronous hosts",
}

_ASYNC_MARK = re.compile(r"^\s*if\b.*#\s*ASYNC\b")


class GenerationError(Exception):
    """The async source cannot be turned into a sync module."""


def header(source: str) -> str:
    return (
        f"# generated from {source} by tools/async_to_sync.py, do not edit:\n"
        f"# change {source} and run `python tools/async_to_sync.py`\n"
    )


def generate(text: str, source: str) -> str:
    """The sync module for the async module ``text`` (read from ``source``)."""
    text = _resolve_async_blocks(text, source)
    text = _rewrite(text)
    _check(text, source)
    return header(source) + text


# --- `if True:  # ASYNC` blocks ------------------------------------------------------


def _resolve_async_blocks(text: str, source: str) -> str:
    """Each ``if True:  # ASYNC`` block, outermost first, replaced by its ``else:`` body."""
    while True:
        lines = text.splitlines(keepends=True)
        block = _first_async_block(_parse(text, source), lines)
        if block is None:
            return text
        first, last = block.lineno - 1, block.end_lineno
        assert last is not None
        text = "".join(lines[:first] + _else_body(block, lines) + lines[last:])


def _first_async_block(tree: ast.AST, lines: list[str]) -> ast.If | None:
    for node in ast.walk(tree):  # breadth first: an outer block before any inside it
        if isinstance(node, ast.If) and _ASYNC_MARK.match(lines[node.lineno - 1]):
            if not (isinstance(node.test, ast.Constant) and node.test.value is True):
                raise GenerationError(f"line {node.lineno}: '# ASYNC' marks only 'if True:'")
            return node
    return None


def _else_body(block: ast.If, lines: list[str]) -> list[str]:
    if not block.orelse:
        return []
    indent = _indent(lines[block.lineno - 1])
    body_end = block.body[-1].end_lineno
    assert body_end is not None and block.end_lineno is not None
    for index in range(body_end, block.orelse[0].lineno - 1):
        if _indent(lines[index]) == indent and lines[index].strip().startswith("else:"):
            else_line = index
            break
    else:
        raise GenerationError(f"line {block.lineno}: an '# ASYNC' block's other branch must be 'else:', not 'elif'")
    body = lines[else_line + 1 : block.end_lineno]
    step = _indent(lines[block.orelse[0].lineno - 1]) - indent
    dedented = []
    for line in body:
        if line.strip() and not line.startswith(" " * step):
            raise GenerationError(f"line {block.lineno}: the 'else:' body is not indented consistently")
        dedented.append(line[step:] if line.strip() else line)
    return dedented


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


# --- async, await, names, docstrings ------------------------------------------------------


class _Edits:
    """Replacements at (line, column) spans of the text, columns in characters."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = text.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))
        self.spans: list[tuple[int, int, str]] = []

    def offset(self, line: int, column: int) -> int:
        return self.starts[line - 1] + column

    def byte_offset(self, line: int, column: int) -> int:
        """An ``ast`` position (its columns count UTF-8 bytes)."""
        return self.offset(line, len(self.lines[line - 1].encode()[:column].decode()))

    def replace(self, start: int, end: int, new: str) -> None:
        self.spans.append((start, end, new))

    def covered(self, start: int, end: int) -> bool:
        return any(s <= start and end <= e for s, e, _ in self.spans)

    def apply(self) -> str:
        out, at = [], 0
        for start, end, new in sorted(self.spans):
            if start < at:
                raise GenerationError(f"overlapping edits at offset {start}")
            out += [self.text[at:start], new]
            at = end
        out.append(self.text[at:])
        return "".join(out)


def _rewrite(text: str) -> str:
    tree = ast.parse(text)
    edits = _Edits(text)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(a.name in DROPPED_IMPORTS for a in node.names):
            edits.replace(*_span(edits, node), _import_without_dropped(node))
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in UNWRAPPED:
            start, end = _span(edits, node)
            inner_start, inner_end = _span(edits, node.slice)
            edits.replace(start, inner_start, "")
            edits.replace(inner_end, end, "")
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            for element in ast.walk(node.value):
                if isinstance(element, ast.Constant) and isinstance(element.value, str) and element.value in RENAMES:
                    edits.replace(*_span(edits, element), f'"{RENAMES[element.value]}"')
        doc = _docstring_node(node)
        if doc is not None:
            start, end = _span(edits, doc)
            edits.replace(start, end, _sync_docstring(text[start:end]))
    claimed = list(edits.spans)
    for token, following in _pairs(tokenize.generate_tokens(io.StringIO(text).readline)):
        start = edits.offset(*token.start)
        if any(s <= start < e for s, e, _ in claimed):
            continue  # inside an import list or docstring already rewritten
        if token.type != tokenize.NAME:
            continue
        if token.string == "await" or (token.string == "async" and following.string in ("def", "with", "for")):
            edits.replace(start, edits.offset(*following.start), "")
        elif token.string in RENAMES:
            edits.replace(start, edits.offset(*token.end), RENAMES[token.string])
        elif token.string in MODULE_RENAMES:
            edits.replace(start, edits.offset(*token.end), MODULE_RENAMES[token.string])
    return edits.apply()


def _pairs(tokens: Iterator[tokenize.TokenInfo]) -> Iterator[tuple[tokenize.TokenInfo, tokenize.TokenInfo]]:
    previous = next(tokens)
    for token in tokens:
        yield previous, token
        previous = token


def _span(edits: _Edits, node: ast.expr | ast.stmt) -> tuple[int, int]:
    assert node.end_lineno is not None and node.end_col_offset is not None
    return edits.byte_offset(node.lineno, node.col_offset), edits.byte_offset(node.end_lineno, node.end_col_offset)


def _docstring_node(node: ast.AST) -> ast.Constant | None:
    if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) or not node.body:
        return None
    first = node.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return first.value
    return None


def _sync_docstring(literal: str) -> str:
    for phrase, sync in DOCSTRING_PHRASES.items():
        literal = literal.replace(phrase, sync)
    for name, sync in RENAMES.items():
        literal = re.sub(rf"\b{name}\b", sync, literal)
    return literal


def _import_without_dropped(node: ast.ImportFrom) -> str:
    names = [
        RENAMES.get(a.name, a.name) + (f" as {a.asname}" if a.asname else "")
        for a in node.names
        if a.name not in DROPPED_IMPORTS
    ]
    if not names:
        return "pass"
    module = ".".join(MODULE_RENAMES.get(part, part) for part in (node.module or "").split("."))
    line = f"from {'.' * node.level}{module} import {', '.join(names)}"
    if len(line) <= 120:
        return line
    return line.split(" import ")[0] + " import (\n" + "".join(f"    {n},\n" for n in names) + ")"


# --- the result -----------------------------------------------------------------------------


def _parse(text: str, source: str) -> ast.Module:
    try:
        return ast.parse(text)
    except SyntaxError as error:
        raise GenerationError(f"{source}, made sync, does not parse: {error}") from error


def _check(text: str, source: str) -> None:
    tree = _parse(text, source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.AsyncFunctionDef, ast.AsyncWith, ast.AsyncFor, ast.Await)):
            raise GenerationError(f"line {node.lineno} of the sync module is still async")
    if "# ASYNC" in text:
        raise GenerationError(f"an '# ASYNC' mark is left in the sync module generated from {source}")


def stale() -> list[str]:
    """The generated files that differ from what this tool generates now."""
    return [
        target
        for source, target in GENERATED
        if not (ROOT / target).exists() or (ROOT / target).read_text() != generate((ROOT / source).read_text(), source)
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="say which generated files are stale; write nothing")
    options = parser.parse_args(argv)
    if options.check:
        for target in stale():
            print(f"{target} is stale: python tools/async_to_sync.py", file=sys.stderr)
        return 1 if stale() else 0
    for source, target in GENERATED:
        (ROOT / target).write_text(generate((ROOT / source).read_text(), source))
        print(f"{source} -> {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
