"""Subcommands that start and drive Runs: ``start``, ``worker`` and ``runs``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from runkernel.adapters.drive.ports import SecretIds
from runkernel.adapters.stores.contract import LeaseStatus, Store
from runkernel.adapters.stores.fleet import Fleet
from runkernel.adapters.stores.run_views import awaiting_json, lease_cell, lease_json
from runkernel.adapters.stores.work import RunSummary
from runkernel.adapters.worker.apps import AppLoadError, load_app, version_of
from runkernel.errors import VersionRequired
from runkernel.cli.text import EXIT_OK, EXIT_USAGE, CliError, printable, require_id
from runkernel.cli.commands import _opened, _store_option
from runkernel.cli.worker_command import register_worker
from runkernel.kernel.decide import decide
from runkernel.kernel.protocol import Activate
from runkernel.kernel.rules import Rejection
from runkernel.kernel.state import Message
from runkernel.kernel.values import Role

STATES = ("running", "awaiting", "ended")


def _app_name(given: str) -> tuple[str, str | None]:
    """``--app``: an app name as given (no version: any worker of the app may drive the
    Run), or the name and version (``version_of``) of the app ``MODULE:ATTR`` loads (as
    ``runkernel worker --app`` loads it), so that a worker of that code drives the Run."""
    require_id(given, "--app", plain=True)
    if ":" not in given:
        return given, None
    try:
        app = load_app(given)
        version = version_of(app)
    except (AppLoadError, VersionRequired) as error:
        raise CliError(str(error), EXIT_USAGE) from None
    return require_id(app.name, f"the name of --app {given}", plain=True), version


def _start(args: argparse.Namespace) -> int:
    require_id(args.thread, "--thread", plain=True)
    args.app, app_version = _app_name(args.app)
    if args.run is not None:
        require_id(args.run, "--run", plain=True)
    for text in args.message:
        if not text.strip():
            raise CliError("MESSAGE must not be empty: a user message says something", EXIT_USAGE)
    run_id = args.run if args.run is not None else SecretIds().new_id("run")
    messages = tuple(Message(Role.USER, text) for text in args.message)
    with _opened(args.store, create=True, command="start") as store:
        head = store.thread_head(args.thread)
        activation = Activate(
            args.thread, run_id, head.version if head else 0, messages, args.app, app_version=app_version
        )
        decision = decide(None, activation)
        if isinstance(decision, Rejection):
            raise CliError(f"refused: {decision}")
        assert decision.commit is not None
        store.append(decision.commit)
    print(run_id)
    return EXIT_OK


def _runs(args: argparse.Namespace) -> int:
    if args.limit is not None and args.limit < 0:
        raise CliError(f"--limit must be 0 or more, not {args.limit}", EXIT_USAGE)
    if args.thread is not None:
        require_id(args.thread, "--thread")
    with _opened(args.store, read_only=True, command="runs") as store:
        listed = _listed(store, store.list_runs(state=args.state, thread_id=args.thread, limit=args.limit))
        fleet = Fleet(store)
        undriven = {s.run_id: fleet.undriven(s.app, s.app_version, s.state) for s, _, _ in listed}
    if args.format == "json":
        print(json.dumps(
            [_summary_json(s, lease, waits, undriven[s.run_id]) for s, lease, waits in listed], indent=2, ensure_ascii=False
        ))
        return EXIT_OK
    rows: list[tuple[str, ...]] = [
        ("RUN", "THREAD", "STATE", "STEP", "VERSION", "APP", "APP VERSION", "LEASE", "WAITING FOR", "NOT DRIVEN")
    ]
    rows += [
        tuple(
            printable(cell)
            for cell in (
                s.run_id, s.thread_id, s.state, str(s.step), str(s.version), s.app or "-", s.app_version or "-",
                lease_cell(lease), _waiting_cell(s, waits), undriven[s.run_id] or "-",
            )
        )
        for s, lease, waits in listed
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        sys.stdout.write("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() + "\n")
    return EXIT_OK


def _listed(
    store: Store, summaries: Sequence[RunSummary]
) -> list[tuple[RunSummary, LeaseStatus, dict[str, Any] | None]]:
    """The listed Runs with their leases and, when Awaiting, what each waits for: the
    leases read a page at a time in one keyed query each (never one query per Run), an
    Awaiting Run's latest commit in one indexed read; never a Run's history."""
    leases: dict[str, LeaseStatus] = {}
    for start in range(0, len(summaries), _LEASE_PAGE):
        page = [summary.run_id for summary in summaries[start : start + _LEASE_PAGE]]
        leases.update(store.lease_statuses(page))
    listed = []
    for summary in summaries:
        snapshot = store.run(summary.run_id) if summary.state == "awaiting" else None
        waits = None if snapshot is None else awaiting_json(snapshot)
        listed.append((summary, leases[summary.run_id], waits))
    return listed


# Run ids per lease query: a page, as the console reads, and far below the number of
# parameters a SQLite statement may bind
_LEASE_PAGE = 200


def _waiting_cell(summary: RunSummary, waits: dict[str, Any] | None) -> str:
    if waits is None:
        return summary.waiting_for or "-"
    return f"{waits['wait']} ticket {waits['ticket_id']} call {waits['call_id']}"


def _summary_json(
    summary: RunSummary, lease: LeaseStatus, waits: dict[str, Any] | None, undriven: str | None
) -> dict[str, object]:
    return {
        "run_id": summary.run_id,
        "thread_id": summary.thread_id,
        "state": summary.state,
        "step": summary.step,
        "version": summary.version,
        "app": summary.app,
        # the version of the app's code its activation recorded (null: before versions)
        "app_version": summary.app_version,
        # why no live worker may drive it (null: one may, or it ended): Versions
        "not_driven": undriven,
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
        metavar="NAME|MODULE:ATTR",
        help="the application the Run belongs to: a worker drives only its app's Runs (the app's name, or the"
        " app itself as runkernel worker --app loads it, whose name is recorded)",
    )
    start.add_argument("message", nargs="+", metavar="MESSAGE", help="a user message")
    start.set_defaults(handler=_start)

    register_worker(commands, _store_option)

    runs = commands.add_parser("runs", help="list Runs, newest first")
    _store_option(runs)
    runs.add_argument("--state", choices=STATES, help="only Runs in this state")
    runs.add_argument("--thread", metavar="T", help="only Runs of this Thread")
    runs.add_argument("--limit", type=int, metavar="N", help="at most N Runs")
    runs.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")
    runs.set_defaults(handler=_runs)
