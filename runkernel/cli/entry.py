"""The ``runkernel`` command: argument parsing and exit codes only.

Each subcommand lives in a module of its own; this file parses, dispatches and turns
expected failures into one line on stderr and a non-zero exit code. It imports the
library lazily: ``runkernel --version`` and ``runkernel --help`` load none of it, and a
command loads only its own module (and what that imports). The commands are listed in
``COMMANDS``; the first word that is not an option picks the module whose parser is
built in full, every other command is a placeholder that only names itself.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import NoReturn

from runkernel import __version__
from runkernel.cli.text import EXIT_FAILURE, EXIT_USAGE, CliError, flush_or_drop_stdout

#: Every command, in the order ``--help`` lists them: (name, one-line help, the module
#: and its function that adds the command's full parser). A module's function adds all
#: of that module's commands; a test checks each one-line help here is the one the
#: module gives.
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("spec", "print the machines and the recovery table, generated from the code", "trace_commands:register_trace"),
    ("check-trace", "validate runkernel/2 traces: exit 0 legal, 1 illegal, 2 not a trace", "trace_commands:register_trace"),
    ("schema", "print the JSON Schema (2020-12) of one runkernel/2 trace line", "trace_commands:register_trace"),
    (
        "simulate",
        "the main job: scripted Runs crashed at every commit boundary, recovered and checked",
        "simulate:register_simulate",
    ),
    ("inspect", "the four questions about one Run, from committed facts only", "commands:register"),
    ("export", "print a Thread's runkernel/2 trace", "commands:register"),
    ("resume", "pre-validate a resume against the committed ticket and queue it for the runtime", "commands:register"),
    ("cancel", "queue a cancel for a Run that is not Ended", "commands:register"),
    ("reconcile", "record what the downstream system says happened to an Indeterminate call", "commands:register"),
    ("start", "commit a Run's activation (its user messages) and print its run id", "run_commands:register_runs"),
    ("worker", "drive every Run of an app that has work, under leases", "run_commands:register_runs"),
    ("runs", "list Runs, newest first", "run_commands:register_runs"),
    ("fork", "start a new Thread and Run from a Run's committed state at a version", "fork_command:register_fork"),
    (
        "upgrade-check",
        "say, per live Run of an app, whether new code can continue it",
        "upgrade_command:register_upgrade",
    ),
    ("db", "store maintenance: create a server store's schema, upgrade a store's schema", "db:register_db"),
    ("ui", "serve a web console for Runs, calls and approvals (the ui extra)", "ui:register_ui"),
    (
        "crashtest",
        "crash-test your own app at every commit boundary; report what the world saw",
        "crashtest:register_crashtest",
    ),
)


class _Parser(argparse.ArgumentParser):
    """argparse, but a refused command line is one line that names the fix (``--help``),
    not a five-line usage block; subcommand parsers are of this class too."""

    def error(self, message: str) -> NoReturn:
        raise CliError(f"{self.prog}: {message} (see {self.prog} --help)", EXIT_USAGE)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser: in full for every command (``command`` None), or in full for the
    module of ``command`` and with placeholders for the rest."""
    parser: argparse.ArgumentParser = _Parser(
        prog="runkernel",
        description=(
            "A formal state-machine kernel for durable AI-agent Runs: simulate crashes, "
            "check traces, print the spec, and inspect or steer Runs in a store."
        ),
    )
    parser.add_argument("--version", action="version", version=f"runkernel {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    wanted = {target for name, _, target in COMMANDS if command is None or name == command}
    registered: set[str] = set()
    for name, help_text, target in COMMANDS:
        if target not in wanted:
            commands.add_parser(name, help=help_text, add_help=False)
        elif target not in registered:
            registered.add(target)
            module, function = target.split(":")
            getattr(importlib.import_module(f"runkernel.cli.{module}"), function)(commands)
    return parser


def _command_of(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names (the first word not an option), if it is one."""
    names = {name for name, _, _ in COMMANDS}
    for word in argv:
        if word == "--":
            return None
        if not word.startswith("-"):
            return word if word in names else None
    return None


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
    words = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(_command_of(words) or "")
    try:
        args = parser.parse_args(words)
    except CliError as error:  # a command line argparse refused (_Parser.error)
        from runkernel.adapters.stores.redact import masked

        # a URL given where none was expected may be echoed: its passwords are masked
        print(masked(str(error), *words), file=sys.stderr)
        return error.code
    except argparse.ArgumentError as error:  # raised past error() by some argparse versions
        from runkernel.adapters.stores.redact import masked

        print(masked(f"runkernel: {error} (see runkernel --help)", *words), file=sys.stderr)
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
    except BrokenPipeError:
        flush_or_drop_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        print(f"runkernel {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as error:
        failure = _store_failure(error)
        if failure is not None:
            return _fail(args, *failure)
        if isinstance(error, OSError):
            where = f": {error.filename}" if error.filename else ""
            return _fail(args, f"{error.strerror or error}{where}", EXIT_FAILURE)
        raise


def _store_failure(error: Exception) -> tuple[str, int] | None:
    """The message and exit code of a store's failure, or None for anything else. The
    store modules are imported here, on the way out, so a command that opens no store
    never loads them: an error of a module nobody imported cannot have been raised."""
    if "runkernel.adapters.stores.contract" in sys.modules:
        from runkernel.adapters.stores.contract import IllegalCommit, SchemaError, StoreError, UnknownRun
        from runkernel.adapters.stores.registry import BadStoreUrl

        if isinstance(error, (BadStoreUrl, SchemaError)):  # a bad URL, or a file that is not a store
            return str(error), EXIT_USAGE
        if isinstance(error, (StoreError, IllegalCommit, UnknownRun)):  # the last two were StoreErrors once
            return str(error), EXIT_FAILURE
    sqlite3 = sys.modules.get("sqlite3")
    if sqlite3 is not None and isinstance(error, sqlite3.Error):  # stores wrap these; never a traceback
        return f"store failure: {error}", EXIT_FAILURE
    return None


def _fail(args: argparse.Namespace, message: str, code: int) -> int:
    """One line on stderr, with the store URL's passwords masked wherever it appears.
    What the command left in stdout's buffer is written first, or dropped if stdout
    failed, so the interpreter's last flush cannot fail again (exit 120)."""
    flush_or_drop_stdout()
    store = getattr(args, "store", None)
    if isinstance(store, str) and store:
        from runkernel.adapters.stores.redact import masked

        message = masked(message, store)  # however malformed the URL
    command = " ".join(c for c in (args.command, getattr(args, "db_command", None)) if c)
    print(f"runkernel {command}: {message}", file=sys.stderr)
    return code


def _is_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
