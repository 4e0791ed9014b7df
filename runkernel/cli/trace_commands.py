"""The commands on traces and the spec: ``spec``, ``check-trace`` and ``schema``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from runkernel.cli.text import EXIT_OK, EXIT_USAGE, CliError

# each command imports what it needs when it runs: ``schema`` reads one file, ``spec``
# loads the machines, ``check-trace`` the kernel; the parser needs none of them
FORMATS = ("mermaid", "markdown", "json")  # runkernel.specs.export.FORMATS (a test checks)


def _spec(args: argparse.Namespace) -> int:
    from runkernel.specs.export import render

    sys.stdout.write(render(args.format))
    return EXIT_OK


def _check_trace(args: argparse.Namespace) -> int:
    from runkernel.specs.checker import Verdict, check_files

    if args.files.count("-") > 1:
        raise CliError("- (standard input) may be given once: a second read finds it empty", EXIT_USAGE)
    worst = Verdict.LEGAL
    try:
        # the names as given, not as Path prints them ("./a" is reported as "./a")
        for name, (_, finding) in zip(args.files, check_files(Path(name) for name in args.files)):
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
    from runkernel.specs.schema import shipped_schema

    sys.stdout.write(shipped_schema())
    return 0


def _printable(name: str) -> str:
    """A file name as text whatever its bytes (undecodable bytes become escapes)."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def register_trace(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``spec``, ``check-trace`` and ``schema`` to the parser."""
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
            "Judge every commit of each FILE with the kernel's commit validation. The files "
            "are one trace split over files, judged in the order given: a ticket id is used "
            "once across all of them, a child Run is checked against its parent in another "
            "file, and a Thread's commits may go on in a later file (the same file twice is "
            "refused at its first line). Each file is reported on its own; its first "
            "illegal line as FILE:LINE: RULE: message on stderr. Exit 0 if every "
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
