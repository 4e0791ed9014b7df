"""The ``runkernel`` command: argument parsing and exit codes only.

Each subcommand lives in a module of its own; this file parses, dispatches and turns
expected failures into one line on stderr and a non-zero exit code.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path

from runkernel import __version__
from runkernel.adapters.store import StoreError
from runkernel.db_command import register_db
from runkernel.commands import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, CliError, register
from runkernel.run_commands import register_runs
from runkernel.specs.checker import Verdict, check_file
from runkernel.specs.export import FORMATS, render
from runkernel.specs.schema import shipped_schema


def _spec(args: argparse.Namespace) -> int:
    sys.stdout.write(render(args.format))
    return EXIT_OK


def _check_trace(args: argparse.Namespace) -> int:
    worst = Verdict.LEGAL
    for name in args.files:
        finding = check_file(Path(name))
        stream = sys.stdout if finding.verdict is Verdict.LEGAL else sys.stderr
        if finding.verdict is not Verdict.LEGAL or not args.quiet:
            print(finding.report(_printable(name)), file=stream)
        worst = max(worst, finding.verdict)
    return int(worst)


def _schema(_args: argparse.Namespace) -> int:
    sys.stdout.write(shipped_schema())
    return 0


def _printable(name: str) -> str:
    """A file name as text whatever its bytes (undecodable bytes become escapes)."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
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
    spec.add_argument("--format", choices=FORMATS, default="markdown", help="output format (default: markdown)")
    spec.set_defaults(handler=_spec)

    check = commands.add_parser(
        "check-trace",
        help="validate runkernel/2 traces: exit 0 legal, 1 illegal, 2 not a trace",
        description=(
            "Judge every commit of each FILE with the kernel's commit validation. The first "
            "illegal line is reported as FILE:LINE: RULE: message on stderr. Exit 0 if every "
            "file is legal, 1 if a line is illegal, 2 if a file is not a trace; with several "
            "files the highest code wins."
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


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    for name, value in vars(args).items():
        if isinstance(value, str) and not _is_text(value):
            print(f"runkernel {args.command}: --{name.replace('_', '-')} is not valid UTF-8", file=sys.stderr)
            return EXIT_USAGE
    try:
        code: int = args.handler(args)
        return code
    except CliError as error:
        print(f"runkernel {args.command}: {error}", file=sys.stderr)
        return error.code
    except StoreError as error:
        print(f"runkernel {args.command}: {error}", file=sys.stderr)
        return EXIT_FAILURE
    except sqlite3.Error as error:  # stores wrap these; a store failure is never a traceback
        print(f"runkernel {args.command}: store failure: {error}", file=sys.stderr)
        return EXIT_FAILURE
    except BrokenPipeError:
        return EXIT_FAILURE
    except OSError as error:
        where = f": {error.filename}" if error.filename else ""
        print(f"runkernel {args.command}: {error.strerror or error}{where}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        print(f"runkernel {args.command}: interrupted", file=sys.stderr)
        return 130


def _is_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
