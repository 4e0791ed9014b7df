"""``runkernel fork``: a new Thread and Run from a Run's committed state at a version."""

from __future__ import annotations

import argparse
import json

from runkernel.cli.commands import _opened, _store_option
from runkernel.cli.text import EXIT_OK, EXIT_USAGE, CliError, printable, require_id


def _fork(args: argparse.Namespace) -> int:
    from runkernel.adapters.drive.fork import fork
    from runkernel.errors import ForkRefused, UnknownRun

    require_id(args.run_id, "RUN_ID")
    if args.thread is not None:
        require_id(args.thread, "--thread", plain=True)
    if args.at < 1:
        raise CliError(f"--at names a Thread version, 1 or more, not {args.at}", EXIT_USAGE)
    with _opened(args.store, command="fork") as store:
        try:
            made = fork(store, args.run_id, at=args.at, thread_id=args.thread, abandon_open_calls=args.abandon_open_calls)
        except UnknownRun:
            raise CliError(f"no committed run {args.run_id!r} in {args.store}") from None
        except ForkRefused as refused:
            raise CliError(f"refused: {refused}") from None
    if args.format == "json":
        print(json.dumps({
            "thread_id": made.thread_id,
            "run_id": made.run_id,
            "state": made.state,
            "ticket_id": made.ticket_id,
            "abandoned": list(made.abandoned),
            "forked_from": {"thread_id": made.source_thread_id, "run_id": made.source_run_id, "version": made.version},
        }, indent=2, ensure_ascii=False))
        return EXIT_OK
    waits = f" awaiting on ticket {made.ticket_id}" if made.ticket_id is not None else " running"
    abandoned = f"; closed Indeterminate: {', '.join(made.abandoned)}" if made.abandoned else ""
    print(printable(
        f"forked run {made.source_run_id} at version {made.version} of thread {made.source_thread_id}: "
        f"thread {made.thread_id} run {made.run_id},{waits}{abandoned}"
    ))
    return EXIT_OK


def register_fork(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``fork`` to the parser."""
    parser = commands.add_parser(
        "fork",
        help="start a new Thread and Run from a Run's committed state at a version",
        description="Make a new Thread whose first commit holds the messages and staged state of RUN_ID's "
        "Thread at version N (forked_from names it); the source is never changed. Terminal calls of the batch "
        "open at N keep their results; other calls get new operation ids; an Executing call under replay runs "
        "again in the fork; one under reconnect or indeterminate refuses the fork (exit 1, naming it) unless "
        "--abandon-open-calls closes it Indeterminate; a waiting call waits on a new ticket. A worker of the "
        "source's app drives the fork.",
    )
    _store_option(parser)
    parser.add_argument("run_id", metavar="RUN_ID")
    parser.add_argument("--at", type=int, required=True, metavar="N", help="the source Thread's commit version")
    parser.add_argument("--thread", metavar="T", help="the new Thread's id (default: a new random one)")
    parser.add_argument(
        "--abandon-open-calls",
        action="store_true",
        help="close calls Executing at N under reconnect or indeterminate Indeterminate in the fork instead of refusing",
    )
    parser.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")
    parser.set_defaults(handler=_fork)
