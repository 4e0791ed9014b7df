"""Subcommands that start and drive Runs: ``start``, ``worker`` and ``runs``."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from types import FrameType
from typing import Any

from runkernel.adapters.drive.ports import SecretIds
from runkernel.adapters.drive.events import ModelFailed, RuntimeEvent, ToolRaised
from runkernel.adapters.worker.loop import Worker, WorkerReport
from runkernel.adapters.worker.apps import AppLoadError, load_app
from runkernel.adapters.stores.contract import LeaseStatus, Store
from runkernel.adapters.stores.run_views import awaiting_json, lease_cell, lease_json
from runkernel.adapters.stores.work import RunSummary
from runkernel.cli.text import EXIT_OK, EXIT_USAGE, CliError, plural, positive_seconds, printable, require_id
from runkernel.cli.commands import _opened, _store_option
from runkernel.kernel.decide import decide
from runkernel.kernel.protocol import Activate
from runkernel.kernel.rules import Rejection
from runkernel.kernel.state import Message
from runkernel.kernel.values import Role

STATES = ("running", "awaiting", "ended")


def _start(args: argparse.Namespace) -> int:
    require_id(args.thread, "--thread", plain=True)
    require_id(args.app, "--app", plain=True)
    if args.run is not None:
        require_id(args.run, "--run", plain=True)
    for text in args.message:
        if not text.strip():
            raise CliError("MESSAGE must not be empty: a user message says something", EXIT_USAGE)
    run_id = args.run if args.run is not None else SecretIds().new_id("run")
    messages = tuple(Message(Role.USER, text) for text in args.message)
    with _opened(args.store, create=True, command="start") as store:
        head = store.thread_head(args.thread)
        activation = Activate(args.thread, run_id, head.version if head else 0, messages, args.app)
        decision = decide(None, activation)
        if isinstance(decision, Rejection):
            raise CliError(f"refused: {decision}")
        assert decision.commit is not None
        store.append(decision.commit)
    print(run_id)
    return EXIT_OK


def _worker(args: argparse.Namespace) -> int:
    positive_seconds(args.lease, "--lease")
    positive_seconds(args.poll, "--poll")
    if args.worker_id is not None:
        require_id(args.worker_id, "--worker-id", plain=True)
    try:
        app = load_app(args.app)
    except AppLoadError as error:
        raise CliError(str(error), EXIT_USAGE) from None
    # a worker never has work in a new store: a missing file is a typo, refused
    with _opened(args.store, command="worker") as store:
        worker = Worker(
            store,
            app,
            worker_id=args.worker_id,
            lease_duration=args.lease,
            poll_interval=args.poll,
            on_failure=_tell_failure,
            on_event=_tell_raised,
        )

        def stop(_signum: int, _frame: FrameType | None) -> None:
            worker.shutdown()

        previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            report = worker.run_once() if args.once else worker.run()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    print(_report_line(worker.worker_id, report))
    return EXIT_OK


def _tell_failure(run_id: str, error: BaseException) -> None:
    """One line for the operator per failed drive; the worker goes on with other Runs."""
    what = _first_line(type(error).__name__, str(error))
    _tell(run_id, f"{what} (lease released; the Run is tried again later)")


def _tell_raised(event: RuntimeEvent) -> None:
    """One line per tool that raised: its call is committed (a retryable error for a
    replay tool, an unknown outcome otherwise), and the operator hears why; one line per
    model call that raised: nothing committed, and either another attempt after a wait
    or the Run ended failed."""
    if isinstance(event, ToolRaised):
        what = _first_line(event.error.type, event.error.message)
        call = f"tool call {event.call_id} attempt {event.attempt}"
        _tell(event.run_id, f"{call} raised {what} (committed as the call's outcome)")
    elif isinstance(event, ModelFailed):
        what = _first_line(event.error.type, event.error.message)
        call = f"model call for step {event.step} attempt {event.attempt}"
        then = "the Run ends failed" if event.retry_after is None else f"retried in {event.retry_after:g} s"
        _tell(event.run_id, f"{call} raised {what} (nothing committed; {then})")


def _first_line(kind: str, message: str) -> str:
    lines = message.strip().splitlines()
    return f"{kind}: {lines[0]}" if lines else kind


def _tell(run_id: str, what: str) -> None:
    print(f"runkernel worker: run {printable(run_id)}: {printable(what)}", file=sys.stderr, flush=True)


def _report_line(worker_id: str, report: WorkerReport) -> str:
    return (
        f"worker {worker_id}: {plural(report.drives, 'drive')}, {plural(report.commits, 'commit')}, "
        f"{plural(report.takeovers, 'take-over')}, {report.contended} contended, "
        f"{plural(report.conflicts, 'conflict')}, {plural(report.leases_lost, 'lease', 'leases')} lost, "
        f"{plural(report.failures, 'failure')}"
    )


def _runs(args: argparse.Namespace) -> int:
    if args.limit is not None and args.limit < 0:
        raise CliError(f"--limit must be 0 or more, not {args.limit}", EXIT_USAGE)
    if args.thread is not None:
        require_id(args.thread, "--thread")
    with _opened(args.store, read_only=True, command="runs") as store:
        listed = [
            _listed(store, summary)
            for summary in store.list_runs(state=args.state, thread_id=args.thread, limit=args.limit)
        ]
    if args.format == "json":
        print(json.dumps([_summary_json(s, lease, waits) for s, lease, waits in listed], indent=2, ensure_ascii=False))
        return EXIT_OK
    rows: list[tuple[str, ...]] = [("RUN", "THREAD", "STATE", "STEP", "VERSION", "APP", "LEASE", "WAITING FOR")]
    rows += [
        tuple(
            printable(cell)
            for cell in (
                s.run_id, s.thread_id, s.state, str(s.step), str(s.version), s.app or "-",
                lease_cell(lease), _waiting_cell(s, waits),
            )
        )
        for s, lease, waits in listed
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        sys.stdout.write("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() + "\n")
    return EXIT_OK


def _listed(store: Store, summary: RunSummary) -> tuple[RunSummary, LeaseStatus, dict[str, Any] | None]:
    """A listed Run with its lease and, when Awaiting, what it waits for: one indexed
    read each (the Run's lease row, its latest commit), never its history."""
    snapshot = store.run(summary.run_id) if summary.state == "awaiting" else None
    return summary, store.lease_status(summary.run_id), None if snapshot is None else awaiting_json(snapshot)


def _waiting_cell(summary: RunSummary, waits: dict[str, Any] | None) -> str:
    if waits is None:
        return summary.waiting_for or "-"
    return f"{waits['wait']} ticket {waits['ticket_id']} call {waits['call_id']}"


def _summary_json(
    summary: RunSummary, lease: LeaseStatus, waits: dict[str, Any] | None
) -> dict[str, object]:
    return {
        "run_id": summary.run_id,
        "thread_id": summary.thread_id,
        "state": summary.state,
        "step": summary.step,
        "version": summary.version,
        "app": summary.app,
        "waiting_for": summary.waiting_for,
        # an Awaiting Run's ticket, wait kind, call (and tool, request): answer it with
        # `runkernel resume RUN_ID --ticket T` or `--call CALL_ID` without an inspect first
        "ticket": waits,
        "lease": lease_json(lease),
    }


def register_runs(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``start``, ``worker`` and ``runs`` to the parser."""
    start = commands.add_parser(
        "start",
        help="commit a Run's activation (its user messages) and print its run id",
        description="Commit a new Run's activation in Thread T; a worker drives it from there.",
    )
    _store_option(start)
    start.add_argument("--thread", required=True, metavar="T", help="the Thread the Run belongs to")
    start.add_argument("--run", metavar="R", help="the run id (default: a new random one)")
    start.add_argument(
        "--app",
        required=True,
        metavar="NAME",
        help="the application the Run belongs to: a worker drives only its app's Runs (the app's name)",
    )
    start.add_argument("message", nargs="+", metavar="MESSAGE", help="a user message")
    start.set_defaults(handler=_start)

    worker = commands.add_parser(
        "worker",
        help="drive every Run of an app that has work, under leases",
        description=(
            "Drive every Run of the app that has work: Running and unleased, an inbox command "
            "(resume, cancel), an expired approval or a due timer. SIGTERM or SIGINT: finish the "
            "commit in flight, start nothing new, release leases, exit 0."
        ),
    )
    _store_option(worker)
    worker.add_argument(
        "--app", required=True, metavar="MODULE:ATTR", help="the host application, loaded like uvicorn module:app"
    )
    worker.add_argument("--once", action="store_true", help="drive until nothing is runnable, then exit")
    worker.add_argument("--lease", type=float, default=30.0, metavar="SECONDS", help="lease duration (default 30)")
    worker.add_argument("--poll", type=float, default=1.0, metavar="SECONDS", help="poll interval (default 1)")
    worker.add_argument("--worker-id", metavar="ID", help="this worker's id (default: host:pid:random)")
    worker.epilog = (
        "An exception raised by the app's model or tools is one line on stderr, counted in the "
        "report's failures; the lease is released and the worker goes on with the other Runs."
    )
    worker.set_defaults(handler=_worker)

    runs = commands.add_parser("runs", help="list Runs, newest first")
    _store_option(runs)
    runs.add_argument("--state", choices=STATES, help="only Runs in this state")
    runs.add_argument("--thread", metavar="T", help="only Runs of this Thread")
    runs.add_argument("--limit", type=int, metavar="N", help="at most N Runs")
    runs.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")
    runs.set_defaults(handler=_runs)
