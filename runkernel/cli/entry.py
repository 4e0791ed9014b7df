"""The ``runkernel`` command: argument parsing and exit codes only.

Each subcommand lives in a module of its own; this file parses, dispatches and turns
expected failures into one line on stderr and a non-zero exit code.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
from collections.abc import Sequence
from typing import NoReturn
from pathlib import Path

from runkernel import __version__
from runkernel.adapters.stores.contract import IllegalCommit, SchemaError, StoreError, UnknownRun
from runkernel.adapters.stores.redact import masked
from runkernel.adapters.stores.urls import BadStoreUrl
from runkernel.cli.db import register_db
from runkernel.cli.text import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, CliError
from runkernel.cli.commands import register
from runkernel.cli.run_commands import register_runs
from runkernel.specs.checker import Verdict, check_file
from runkernel.specs.export import FORMATS, render
from runkernel.specs.schema import shipped_schema


def _spec(args: argparse.Namespace) -> int:
    sys.stdout.write(render(args.format))
    return EXIT_OK


def _check_trace(args: argparse.Namespace) -> int:
    if args.files.count("-") > 1:
        raise CliError("- (standard input) may be given once: a second read finds it empty", EXIT_USAGE)
    worst = Verdict.LEGAL
    try:
        for name in args.files:
            finding = check_file(Path(name))
            stream = sys.stdout if finding.verdict is Verdict.LEGAL else sys.stderr
            if finding.verdict is not Verdict.LEGAL or not args.quiet:
                print(finding.report(_printable(name)), file=stream)
            worst = max(worst, finding.verdict)
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as error:
        # the verdicts are fine but could not be told: not "illegal" (1), whose exit
        # code a CI script reads as a verdict, but a failure of this run (2)
        raise CliError(f"cannot write the report: {error.strerror or error}", EXIT_USAGE) from None
    return int(worst)


def _schema(_args: argparse.Namespace) -> int:
    sys.stdout.write(shipped_schema())
    return 0


def _printable(name: str) -> str:
    """A file name as text whatever its bytes (undecodable bytes become escapes)."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


class _Parser(argparse.ArgumentParser):
    """argparse, but a refused command line is one line that names the fix (``--help``),
    not a five-line usage block; subcommand parsers are of this class too."""

    def error(self, message: str) -> NoReturn:
        raise CliError(f"{self.prog}: {message} (see {self.prog} --help)", EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = _Parser(
        prog="runkernel",
        description=(
            "A formal state-machine kernel for durable AI-agent Runs: simulate crashes, "
            "check traces, print the spec, and inspect or steer Runs in a store."
        ),
    )
    parser.add_argument("--version", action="version", version=f"runkernel {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    spec = commands.add_parser(
        "spec", help="print the machines and the recovery table, generated from the code"
    )
    spec.add_argument(
        "--format",
        choices=FORMATS,
        default="markdown",
        help=(
            "output format (default: markdown); mermaid is the two state diagrams as fenced "
            "```mermaid blocks (Markdown), without the recovery table that markdown and json hold"
        ),
    )
    spec.set_defaults(handler=_spec)

    check = commands.add_parser(
        "check-trace",
        help="validate runkernel/2 traces: exit 0 legal, 1 illegal, 2 not a trace",
        description=(
            "Judge every commit of each FILE with the kernel's commit validation. The first "
            "illegal line is reported as FILE:LINE: RULE: message on stderr. Exit 0 if every "
            "file is legal, 1 if a line is illegal, 2 if a file is not a trace; with several "
            "files the highest code wins. If the report cannot be written: 141 when standard "
            "output is a closed pipe (like a tool killed by SIGPIPE), 2 otherwise (a full disk)."
        ),
    )
    check.add_argument("files", nargs="+", metavar="FILE", help="a runkernel/2 JSON Lines file; - reads standard input")
    check.add_argument("-q", "--quiet", action="store_true", help="print nothing for legal files")
    check.set_defaults(handler=_check_trace)

    schema = commands.add_parser(
        "schema", help="print the JSON Schema (2020-12) of one runkernel/2 trace line"
    )
    schema.set_defaults(handler=_schema)

    register(commands)
    register_runs(commands)
    register_db(commands)
    return parser


#: What a positional argument is called in messages (its metavar, as --help shows it).
_POSITIONALS = {
    "run_id": "RUN_ID",
    "thread_id": "THREAD_ID",
    "operation_id": "OPERATION_ID",
    "message": "MESSAGE",
}

#: The exit code of a process killed by SIGPIPE, as a shell reports it.
EXIT_BROKEN_PIPE = 141


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except CliError as error:  # a command line argparse refused (_Parser.error)
        # a URL given where none was expected may be echoed: its passwords are masked
        print(masked(str(error), *(sys.argv[1:] if argv is None else argv)), file=sys.stderr)
        return error.code
    except argparse.ArgumentError as error:  # raised past error() by some argparse versions
        print(masked(f"runkernel: {error} (see runkernel --help)", *(sys.argv[1:] if argv is None else argv)), file=sys.stderr)
        return EXIT_USAGE
    for name, value in vars(args).items():
        if name == "files":
            continue  # file names are bytes; _printable shows them whatever they are
        values = value if isinstance(value, list) else [value]
        if any(isinstance(v, str) and not _is_text(v) for v in values):
            shown = _POSITIONALS.get(name) or f"--{name.replace('_', '-')}"
            print(f"runkernel {args.command}: {shown} is not valid UTF-8", file=sys.stderr)
            return EXIT_USAGE
    try:
        code: int = args.handler(args)
        sys.stdout.flush()  # a write that fails fails here, inside the handling below
        return code
    except CliError as error:
        return _fail(args, str(error), error.code)
    except (BadStoreUrl, SchemaError) as error:  # a bad URL, or a file that is not a store
        return _fail(args, str(error), EXIT_USAGE)
    except (StoreError, IllegalCommit, UnknownRun) as error:  # the last two were StoreErrors once: same exit
        return _fail(args, str(error), EXIT_FAILURE)
    except sqlite3.Error as error:  # stores wrap these; a store failure is never a traceback
        return _fail(args, f"store failure: {error}", EXIT_FAILURE)
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except OSError as error:
        where = f": {error.filename}" if error.filename else ""
        return _fail(args, f"{error.strerror or error}{where}", EXIT_FAILURE)
    except KeyboardInterrupt:
        print(f"runkernel {args.command}: interrupted", file=sys.stderr)
        return 130


def _fail(args: argparse.Namespace, message: str, code: int) -> int:
    """One line on stderr, with the store URL's passwords masked wherever it appears."""
    store = getattr(args, "store", None)
    if isinstance(store, str) and store:
        message = masked(message, store)
    command = " ".join(c for c in (args.command, getattr(args, "db_command", None)) if c)
    print(f"runkernel {command}: {message}", file=sys.stderr)
    return code


def _silence_stdout() -> None:
    """After a closed pipe, point stdout at /dev/null so the interpreter's last flush
    does not complain again on stderr."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass  # no real file descriptor (an embedding host, a test's capture)


def _is_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
