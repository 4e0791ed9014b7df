"""``runkernel simulate``: scripted Runs crashed at every commit boundary, recovered and
checked, on a store it claims for itself; the simulator itself is
``runkernel.testing.simulation``, imported only when the command runs (the layering test, ``tests/proofs/test_layers.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, TextIO

from runkernel.adapters.stores.contract import SIMULATE_CLAIM, Store
from runkernel.adapters.stores.export import export_lines
from runkernel.adapters.stores.registry import kind_of
from runkernel.adapters.stores.sqlite import SqliteStore
from runkernel.cli.commands import _opened, _store_option
from runkernel.cli.text import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, EXIT_TERMINATED, EXIT_USAGE, CliError, ProgressBar, plural

if TYPE_CHECKING:
    from runkernel.testing.simulation.simulate import Report

#: ``simulate``'s own scratch store: it never touches the Run store (``DEFAULT_STORE_URL``)
#: unless told to with ``--store``, and in memory it finishes in seconds.
SIMULATE_STORE_URL = "memory:"



class SimulateProgress(ProgressBar):
    """The Runs played so far, with their commits, crashes and violations, on stderr."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream, "simulate")

    def __call__(self, done: int, total: int, report: Report) -> None:
        self.show(
            done,
            total,
            f"{done}/{total} runs, {report.commits} commits, "
            f"{sum(report.crashes.values())} crashes, {len(report.violations)} violations",
        )


def _simulate(args: argparse.Namespace) -> int:
    from runkernel.testing.simulation.simulate import format_report, simulate

    if args.runs < 1:
        raise CliError("--runs must be at least 1", EXIT_USAGE)
    export = None if args.export is None else _export_target(Path(args.export), reset=args.reset)
    with _opened(args.store, create=True) as store, _claim(store, args.store, reset=args.reset):
        if export is not None:
            export.mkdir(parents=True, exist_ok=True)  # only once the store is ours
            _clear_export(export)
        progress = None if args.no_progress else SimulateProgress(sys.stderr)
        terminated: list[int] = []
        began, cpu_began = time.monotonic(), time.process_time()
        with _sigterm_interrupts(terminated):
            report = simulate(store, args.runs, args.seed, progress)
        took, cpu = time.monotonic() - began, time.process_time() - cpu_began
        if progress is not None and progress.tty and not report.complete:
            sys.stderr.write("\n")  # the partial report starts on a line of its own
        if report.store_failure is not None:
            print(f"runkernel simulate: store unavailable: {report.store_failure}", file=sys.stderr)
        elif report.interrupted:
            print(f"runkernel simulate: {'terminated' if terminated else 'interrupted'}", file=sys.stderr)
        if export is not None and report.complete:
            for thread_id in report.thread_ids:
                with (export / f"{thread_id}.jsonl").open("w", encoding="utf-8", newline="\n") as out:
                    out.writelines(line + "\n" for line in export_lines(store, thread_id, redact=False))
        sys.stdout.write(format_report(report))
        if report.complete:
            # on stderr: the report on stdout stays the same for the same seed and code;
            # a stopped run's one stderr line says why it stopped instead
            print(f"runkernel simulate: {plural(report.runs, 'Run')} in {took:.1f} s ({cpu:.1f} s of CPU)", file=sys.stderr)
            if export is not None:
                print(f"exported {plural(len(report.thread_ids), 'thread')} to {args.export}")
        if report.interrupted:
            return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED
        return EXIT_OK if report.complete and not report.violations else EXIT_FAILURE


@contextlib.contextmanager
def _sigterm_interrupts(terminated: list[int]) -> Iterator[None]:
    """While the simulation runs, SIGTERM stops it like Ctrl-C (a partial report) and
    is noted in ``terminated``, for exit 143 instead of 130."""

    def stop(signum: int, _frame: FrameType | None) -> None:
        terminated.append(signum)
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread: no handler can be set, nothing to restore
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _export_target(directory: Path, *, reset: bool) -> Path:
    """Check ``--export DIR`` before anything runs: missing (made once the store is
    claimed), or a directory that is empty or whose old traces ``--reset`` may replace."""
    if directory.exists() and not directory.is_dir():
        raise CliError(f"--export {directory} exists and is not a directory", EXIT_USAGE)
    if directory.is_dir():
        kept = sorted(p.name for p in directory.iterdir())
        if kept and not reset:
            raise CliError(
                f"--export {directory} is not empty ({plural(len(kept), 'entry', 'entries')}); pass --reset to replace "
                "its .jsonl traces, or choose an empty directory",
                EXIT_USAGE,
            )
        foreign = [name for name in kept if not name.endswith(".jsonl")]
        if foreign:
            raise CliError(
                f"--export {directory} holds files that are not traces ({', '.join(foreign[:3])}); "
                "choose an empty directory",
                EXIT_USAGE,
            )
    return directory


def _clear_export(directory: Path) -> None:
    """Remove the old traces (only ``*.jsonl``, checked by ``_export_target``)."""
    for old in directory.glob("*.jsonl"):
        old.unlink()


@contextlib.contextmanager
def _claim(store: Store, url: str, *, reset: bool) -> Iterator[None]:
    """Refuse a store that already holds Threads unless ``--reset``, and hold it while
    the simulation runs: the check and the claim are one step, so two simulations
    cannot both pass it (on SQLite one transaction that writes a claim row; on
    PostgreSQL a session advisory lock on the store's schema, taken before the check
    and held until the simulation ends)."""
    owner = f"{SIMULATE_CLAIM}pid {os.getpid()} on {socket.gethostname()}"
    with contextlib.ExitStack() as held:
        if isinstance(store, SqliteStore):
            refused = store.claim_empty(owner, reset=reset)
        else:
            claim = None
            kind = kind_of(url)
            if kind is not None and kind.claim is not None:
                claim = held.enter_context(kind.claim(url))
                if not claim.taken:
                    raise CliError(
                        f"store {url} is in use by another simulate (it holds the store's claim until it "
                        "ends); wait for it, or choose another --store",
                        EXIT_USAGE,
                    )
            count = len(store.thread_ids())
            ours = claim is None or claim.simulated()  # memory: is this process's own
            if count and not reset:
                refused = f"already holds {plural(count, 'thread')}"
            elif count and not ours:
                refused = f"holds {plural(count, 'thread')} that simulate did not create"
            else:
                refused = None
                if count:
                    store.reset()
                if claim is not None:
                    claim.mark(owner)
        if refused is not None:
            hint = (
                "pass --reset to delete what it holds, or choose another --store"
                if not reset
                else "--reset deletes only what simulate wrote; choose another --store"
            )
            raise CliError(f"store {url} {refused}; {hint}", EXIT_USAGE)
        yield


def register_simulate(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``simulate`` to the parser."""
    sim = commands.add_parser(
        "simulate",
        help="the main job: scripted Runs crashed at every commit boundary, recovered and checked",
        description=(
            "Play scripted agent Runs (text, batches, every wait kind, retries, every recovery "
            "policy, cancel/stop/failure, the step limit), crash the runtime at every commit "
            "boundary kind and position, recover with fresh runtimes from the store alone, and "
            "check invariants I1-I15 after each Run. Exit 0 only with zero violations."
        ),
    )
    sim.add_argument("--runs", type=int, default=1600, metavar="N", help="runs to play (default: 1600)")
    sim.add_argument("--seed", type=int, default=0, metavar="S", help="seed; same seed, same report (default: 0)")
    _store_option(sim, default=SIMULATE_STORE_URL)
    sim.add_argument("--export", metavar="DIR", help="write each Thread's log as DIR/<thread_id>.jsonl")
    sim.add_argument(
        "--reset", action="store_true", help="delete what an earlier simulate wrote to --store first (never other Runs)"
    )
    sim.add_argument("--no-progress", action="store_true", help="no progress output on stderr")
    sim.set_defaults(handler=_simulate)


__all__ = ["SIMULATE_STORE_URL", "SimulateProgress", "register_simulate"]
