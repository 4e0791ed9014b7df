"""Subcommands that work on a store: inspect, export, resume, cancel, reconcile; and what
every store command shares (``_opened``, ``_store_option``). ``simulate`` is ``simulate``."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
from collections.abc import Iterator

from runkernel.adapters.stores.damage import check_snapshot, check_thread
from runkernel.adapters.stores.export import export_lines
from runkernel.adapters.drive.inbox import AlreadyAnswered, AlreadyQueued, queue_end, queue_resume, ticket_of_call
from runkernel.adapters.stores.inspect_view import (
    find_indeterminate,
    inspect_json,
    inspect_text,
)
from runkernel.adapters.stores.contract import RECONCILE_OUTCOMES, Reconciliation, SchemaError, Store
from runkernel.adapters.stores.registry import DEFAULT_STORE_URL, BadStoreUrl, open_store
from runkernel.kernel.protocol import (
    Approve,
    DelegationResult,
    Deny,
    EndRequest,
    ExternalResult,
    ProvideInput,
    ResumeCommand,
    ResumePayload,
    TimerFired,
)
from runkernel.cli.text import EXIT_OK, EXIT_USAGE, CliError, printable, require_id
from runkernel.kernel.resume import payload_problem
from runkernel.kernel.rules import Rejection
from runkernel.kernel.state import EndCause
from runkernel.kernel.values import RESUME_MAX_DEPTH, EndCauseKind, JsonValue, WaitKind


#: Commands that read or change what a store keeps between processes: an in-process
#: ``memory:`` store is always empty for them, so it is refused instead of answering.
_PERSISTENT_ONLY = ("inspect", "export", "resume", "cancel", "reconcile", "start", "worker", "runs", "fork", "upgrade-check")


@contextlib.contextmanager
def _opened(url: str, *, create: bool = False, read_only: bool = False, command: str = "") -> Iterator[Store]:
    """The store a URL names, closed afterwards. A bad URL, or a file that is not a
    runkernel store of this schema, is a usage error (exit 2); a store that cannot be
    reached (locked, full, read-only, I/O) or is damaged is a failure (exit 1). Only
    ``simulate`` and ``start`` create a SQLite file (``create``); every other command
    refuses a missing one; read commands open it read-only."""
    if url == "memory:" and command in _PERSISTENT_ONLY:
        raise CliError(
            f"memory: holds nothing outside one process, so {command} has nothing to work on; "
            "use --store sqlite:///path.db",
            EXIT_USAGE,
        )
    try:
        store = open_store(url, create=create, read_only=read_only)
    except (SchemaError, BadStoreUrl) as error:
        raise CliError(str(error), EXIT_USAGE) from None
    try:
        yield store
    finally:
        store.close()


def _queued(result: Rejection | AlreadyQueued | AlreadyAnswered | int, what: str, run_id: str) -> int:
    """Report an inbox submission: the typed rejection, the different answer already
    pending for the wait (exit 1: a wait takes one answer), where the command went, or
    the identical command already waiting there (exit 0: what was asked is queued)."""
    if isinstance(result, Rejection):
        raise CliError(f"refused: {result}")
    if isinstance(result, AlreadyAnswered):
        raise CliError(f"{result} for run {run_id}; nothing new queued")
    if isinstance(result, AlreadyQueued):
        print(f"already queued as command {result.entry_id} for run {run_id}; nothing new queued")
        return EXIT_OK
    print(f"queued {what} {result} for run {run_id}; the runtime driving it applies it")
    return EXIT_OK


# --- inspect, export ----------------------------------------------------------------------


def _inspect(args: argparse.Namespace) -> int:
    require_id(args.run_id, "RUN_ID")
    with _opened(args.store, read_only=True, command="inspect") as store:
        snapshot = store.run(args.run_id)
        if snapshot is None:
            raise CliError(f"no committed run {args.run_id!r} in {args.store}")
        check_snapshot(snapshot, store.commits(snapshot.thread_id))
        if args.format == "json":
            print(json.dumps(inspect_json(store, snapshot), indent=2, ensure_ascii=False))
        else:
            sys.stdout.write(printable(inspect_text(store, snapshot), keep_newlines=True))
        return EXIT_OK


def _export(args: argparse.Namespace) -> int:
    require_id(args.thread_id, "THREAD_ID")
    with _opened(args.store, read_only=True, command="export") as store:
        if store.thread_head(args.thread_id) is None:
            raise CliError(f"no thread {args.thread_id!r} in {args.store}")
        check_thread(store, args.thread_id)
        for line in export_lines(store, args.thread_id, redact=args.redact):
            sys.stdout.write(line + "\n")
        return EXIT_OK


# --- resume, cancel, reconcile -----------------------------------------------------------


def _payload(args: argparse.Namespace) -> tuple[WaitKind, ResumePayload]:
    if args.reason is not None and not args.deny:
        raise CliError("--reason only with --deny", EXIT_USAGE)
    if args.approve:
        return WaitKind.APPROVAL, Approve()
    if args.deny:
        return WaitKind.APPROVAL, Deny(args.reason)
    if args.input is not None:
        return WaitKind.INPUT, ProvideInput(args.input)
    if args.timer:
        return WaitKind.SCHEDULED, TimerFired()
    if args.input_json is not None:
        return WaitKind.INPUT, ProvideInput(_json_value(args.input_json))
    if args.external is not None:
        return WaitKind.EXTERNAL, ExternalResult(_json_value(args.external))
    return WaitKind.DELEGATION, DelegationResult(_json_value(args.delegation))


def _json_value(raw: str) -> JsonValue:
    """A JSON value as traces take it: finite numbers, no duplicate keys."""
    try:
        value: JsonValue = json.loads(
            raw, parse_constant=_no_constant, parse_float=_finite, object_pairs_hook=_unique_keys
        )
    except json.JSONDecodeError as error:
        raise CliError(f"the value must be JSON: {error}", EXIT_USAGE) from None
    except RecursionError:  # deeper than the parser's stack: far past any trace's nesting
        raise CliError(
            f"the resume value cannot be committed: it nests deeper than {RESUME_MAX_DEPTH} levels", EXIT_USAGE
        ) from None
    return value


def _no_constant(name: str) -> object:
    raise CliError(f"the value must be JSON; {name} is not", EXIT_USAGE)


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise CliError(f"the value must be JSON with finite numbers; {text} is not a finite number", EXIT_USAGE)
    return number


def _unique_keys(pairs: list[tuple[str, JsonValue]]) -> dict[str, JsonValue]:
    found: dict[str, JsonValue] = {}
    for key, value in pairs:
        if key in found:
            raise CliError(f"the value must be JSON without repeated keys; duplicate key {key!r}", EXIT_USAGE)
        found[key] = value
    return found


def _resume(args: argparse.Namespace) -> int:
    require_id(args.run_id, "RUN_ID")
    if args.ticket is not None:
        require_id(args.ticket, "--ticket")
    else:
        require_id(args.call, "--call")
    kind, payload = _payload(args)
    problem = payload_problem(payload)
    if problem is not None:  # refused before the store is opened: nothing is queued
        raise CliError(problem, EXIT_USAGE)
    with _opened(args.store, command="resume") as store:
        ticket = args.ticket
        if ticket is None:  # --call: the ticket the call's committed wait holds
            found = ticket_of_call(store, args.run_id, args.call)
            if isinstance(found, Rejection):
                raise CliError(f"refused: {found}")
            ticket = found
        command = ResumeCommand(args.run_id, ticket, kind, payload)
        return _queued(queue_resume(store, command), "command", args.run_id)


def _cancel(args: argparse.Namespace) -> int:
    require_id(args.run_id, "RUN_ID")
    with _opened(args.store, command="cancel") as store:
        result = queue_end(store, args.run_id, EndRequest(EndCause(EndCauseKind.CANCELLED)))
        return _queued(result, "cancel", args.run_id)


def _reconcile(args: argparse.Namespace) -> int:
    require_id(args.operation_id, "OPERATION_ID")
    with _opened(args.store, command="reconcile") as store:
        found = find_indeterminate(store, args.operation_id)
        if found is None:
            raise CliError(f"no Indeterminate call has operation id {args.operation_id!r} in {args.store}")
        store.record_reconciliation(Reconciliation(args.operation_id, args.outcome, args.note))
        print(
            f"recorded {args.outcome!r} for operation {args.operation_id} (call {found[1]} of run "
            f"{found[0]}); committed facts are unchanged"
        )
        return EXIT_OK


# --- parser -------------------------------------------------------------------------------


def _store_option(parser: argparse.ArgumentParser, default: str | None = DEFAULT_STORE_URL) -> None:
    parser.add_argument(
        "--store",
        default=default,
        required=default is None,
        metavar="URL",
        help=f"memory:, sqlite:///path.db or postgresql://... (default: {default})"
        if default
        else "memory:, sqlite:///path.db or postgresql://...",
    )


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the store subcommands to the parser."""
    inspect = commands.add_parser(
        "inspect", help="the four questions about one Run, from committed facts only"
    )
    _store_option(inspect)
    inspect.add_argument("run_id", metavar="RUN_ID")
    inspect.add_argument("--format", choices=("text", "json"), default="text")
    inspect.set_defaults(handler=_inspect)

    export = commands.add_parser("export", help="print a Thread's runkernel/2 trace")
    _store_option(export)
    export.add_argument("thread_id", metavar="THREAD_ID")
    export.add_argument("--redact", action="store_true", help="replace ticket ids by a consistent digest")
    export.set_defaults(handler=_export)

    resume = commands.add_parser(
        "resume",
        help="pre-validate a resume against the committed ticket and queue it for the runtime",
    )
    _store_option(resume)
    resume.add_argument("run_id", metavar="RUN_ID")
    which = resume.add_mutually_exclusive_group(required=True)
    which.add_argument("--ticket", metavar="TICKET_ID", help="the committed ticket id")
    which.add_argument(
        "--call", metavar="CALL_ID", help="the waiting call's id (a framework's tool call id): its committed ticket"
    )
    payload = resume.add_mutually_exclusive_group(required=True)
    payload.add_argument("--approve", action="store_true", help="approve an approval wait")
    payload.add_argument("--deny", action="store_true", help="deny an approval wait (see --reason)")
    payload.add_argument("--input", metavar="TEXT", help="answer an input wait with TEXT, sent as a string")
    payload.add_argument(
        "--input-json", metavar="JSON", help="answer an input wait with a JSON value (a number, a list, an object ...)"
    )
    payload.add_argument("--external", metavar="JSON", help="complete an external wait with a result")
    payload.add_argument("--delegation", metavar="JSON", help="complete a delegation wait with the child's result")
    payload.add_argument("--timer", action="store_true", help="fire a scheduled wait")
    resume.add_argument("--reason", help="why, with --deny only")
    resume.set_defaults(handler=_resume)

    cancel = commands.add_parser("cancel", help="queue a cancel for a Run that is not Ended")
    _store_option(cancel)
    cancel.add_argument("run_id", metavar="RUN_ID")
    cancel.set_defaults(handler=_cancel)

    reconcile = commands.add_parser(
        "reconcile", help="record what the downstream system says happened to an Indeterminate call"
    )
    _store_option(reconcile)
    reconcile.add_argument("operation_id", metavar="OPERATION_ID")
    reconcile.add_argument("--outcome", required=True, choices=RECONCILE_OUTCOMES)
    reconcile.add_argument("--note", help="free text kept with the record")
    reconcile.set_defaults(handler=_reconcile)
