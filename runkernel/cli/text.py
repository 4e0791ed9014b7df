"""What the ``runkernel`` commands share: exit codes, the one expected error, the checks
of ids and durations given on the command line, and how committed text is shown."""

from __future__ import annotations

import math
import os
import sys
import time
import unicodedata
from typing import TextIO

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143  # 128 + SIGTERM, what a shell reports for a process it killed


def flush_or_drop_stdout() -> None:
    """Flush stdout; if it cannot be written (a closed pipe, a full disk), point it at
    /dev/null, so the interpreter's last flush of what is still buffered neither fails
    again (exit 120) nor complains on stderr."""
    try:
        sys.stdout.flush()
        return
    except (OSError, ValueError):
        pass
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass  # no real file descriptor (an embedding host, a test's capture)


class CliError(Exception):
    """An expected failure: printed as one line on stderr, with an exit code."""

    def __init__(self, message: str, code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.code = code


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``1 thread``, ``2 threads`` (``many`` for an irregular plural)."""
    return f"{count} {noun if count == 1 else many or noun + 's'}"


#: Bidirectional-text controls: they reorder what a terminal shows, like an escape does.
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def printable(text: str, *, keep_newlines: bool = False) -> str:
    """``text`` with every control character as an escape (``\\x1b``, ``\\n``), so
    committed data (a model's message, an id) cannot drive the operator's terminal."""
    if text.isprintable() and not keep_newlines:
        return text
    return "".join(
        char if (char == "\n" and keep_newlines) or not _is_control(char) else _escape(char) for char in text
    )


_NAMED_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _is_control(char: str) -> bool:
    return unicodedata.category(char) == "Cc" or char in _BIDI


def _escape(char: str) -> str:
    if char in _NAMED_ESCAPES:
        return _NAMED_ESCAPES[char]
    return f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"


def require_id(value: str, name: str, *, plain: bool = False) -> str:
    """An id given on the command line: not empty (nor only blanks); with ``plain``
    (ids this command mints into the store) no control characters either."""
    if not value.strip():
        raise CliError(f"{name} must not be empty", EXIT_USAGE)
    if plain and any(_is_control(c) for c in value):
        raise CliError(f"{name} must not hold control characters: {printable(value)}", EXIT_USAGE)
    return value


def positive_seconds(value: float, name: str) -> float:
    """A duration option: a finite number of seconds above zero."""
    if not (math.isfinite(value) and value > 0):
        raise CliError(f"{name} must be a finite number of seconds above 0, not {value}", EXIT_USAGE)
    return value


class ProgressBar:
    """Progress of long work on ``stream`` (stderr): a one-line bar on a terminal, and
    elsewhere (a CI log) a line every tenth of the work, with the seconds so far.
    ``show(done, total, text)`` after each unit; ``name`` prefixes the logged lines."""

    def __init__(self, stream: TextIO, name: str) -> None:
        self.stream = stream
        self.name = name
        self.tty = stream.isatty()
        self.started = time.monotonic()
        self.last_tenth = -1

    def show(self, done: int, total: int, text: str) -> None:
        if self.tty:
            width = 30
            filled = width * done // max(total, 1)
            self.stream.write(f"\r\x1b[K[{'#' * filled}{'.' * (width - filled)}] {text}")
            if done == total:
                self.stream.write("\n")
        else:
            tenth = 10 * done // max(total, 1)
            if tenth != self.last_tenth:
                self.last_tenth = tenth
                self.stream.write(f"{self.name}: {text} ({time.monotonic() - self.started:.1f}s)\n")
        self.stream.flush()
