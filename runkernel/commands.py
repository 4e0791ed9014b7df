"""Subcommands that work on a store: simulate, inspect, export, resume, cancel, reconcile."""

from __future__ import annotations

import argparse
from typing import Any

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2


class CliError(Exception):
    """An expected failure: printed as one line on stderr, with an exit code."""

    def __init__(self, message: str, code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.code = code


def register(commands: "argparse._SubParsersAction[Any]") -> None:
    """Add the store subcommands to the parser."""
