"""``runkernel worker``: the signal handlers first, then the app, then the store (ridden
out while it is down), then the worker's loop; one line on stderr per failed drive, per
Run ended failed, per tool exception and model failure, per store outage begun and
ended; the report line on stdout when it stops. ``--once`` exits 1 when a Run it drove
ended failed (0 otherwise).

SIGTERM or SIGINT (the first of either): finish the commit in flight, start nothing new,
release leases, exit 0, saying on stderr what the worker waits for. A second one
abandons at once (exit 130, or 143 for SIGTERM): the leases it holds are not released
and expire after ``--lease`` seconds, when another worker takes its Runs over. The
handlers are installed before the app is imported or the store opened, so a signal at
any moment of the start stops the worker the same way.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import textwrap
from types import FrameType

from runkernel.adapters.drive.events import ModelFailed, RuntimeEvent, ToolRaised
from runkernel.adapters.drive.telemetry import Telemetry
from runkernel.adapters.stores.contract import SchemaError, Store, StoreUnavailable
from runkernel.errors import HostUnresolved
from runkernel.adapters.stores.registry import BadStoreUrl, open_store
from runkernel.adapters.worker.apps import AppLoadError, load_app, version_of
from runkernel.errors import VersionRequired
from runkernel.adapters.worker.loop import DEFAULT_CONCURRENCY, Worker, WorkerReport
from runkernel.adapters.worker.outage import OUTAGE_MAX_DELAY, OutageBegan, OutageEnded, OutageEvent, StoreOutage
from runkernel.adapters.worker.stop_flag import StopFlag
from runkernel.cli.text import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    EXIT_USAGE,
    CliError,
    plural,
    positive_seconds,
    printable,
    require_id,
)
from runkernel.kernel.state import EndCause

#: What each figure of the report line means (``worker --help`` and the README say it).
COUNTERS = (
    ("drives", "Runs leased and driven (a Run driven again later counts again)"),
    ("commits", "commits this worker wrote"),
    ("take-overs", "Runs taken over from a worker whose lease expired"),
    ("contended", "Runs another worker held when this one tried to lease them"),
    ("conflicts", "drives stopped because another writer committed first"),
    ("leases lost", "drives stopped because this worker's lease was gone"),
    ("failures", "failed drives: the app's hooks, gate or push host (any app kind) raised, or the store "
     "refused; nothing more committed, the Run is tried again later (one line each)"),
    ("runs failed", "Runs a drive ended failed: a model error not transient or out of attempts, an agent "
     "that raised, too many steps (one line each)"),
    ("tool exceptions", "tool calls whose executor raised: committed as the call's outcome (one line each)"),
    ("model failures", "model calls that raised: retried after a backoff, or the Run ended failed (one line each)"),
    ("in flight", "the most Runs driven at once (at most --concurrency, and one more Run taken over from a "
     "worker whose lease expired while every slot was busy)"),
    ("outages ridden out", "times the store stopped answering (restart, dropped connection, server down, lock "
     "held past the busy timeout): one line when it began, one when it ended; the worker retries with a "
     "capped backoff and drives on"),
)


def _worker(args: argparse.Namespace) -> int:
    positive_seconds(args.lease, "--lease")
    positive_seconds(args.poll, "--poll")
    if args.concurrency < 1:
        raise CliError(f"--concurrency must be at least 1, not {args.concurrency}", EXIT_USAGE)
    if args.worker_id is not None:
        require_id(args.worker_id, "--worker-id", plain=True)
    if args.store == "memory:":
        raise CliError(
            "memory: holds nothing outside one process, so worker has nothing to work on; "
            "use --store sqlite:///path.db",
            EXIT_USAGE,
        )
    with _Stopping(args.lease) as stopping, _FoldedClientLog() as folded:
        try:
            app = load_app(args.app)
            version_of(app)  # an app that must declare its version and did not: refused now
        except (AppLoadError, VersionRequired) as error:
            raise CliError(str(error), EXIT_USAGE) from None
        telemetry = _telemetry() if args.otel else None
        opening = StoreOutage(_tell_outage)
        folded.outage = opening
        store = _open_riding_out(args.store, opening, stopping, once=args.once)
        if store is None:
            return EXIT_OK  # stopped while the store was down: nothing held, nothing to report
        try:
            worker = Worker(
                store,
                app,
                worker_id=args.worker_id,
                lease_duration=args.lease,
                poll_interval=args.poll,
                on_failure=_tell_failure,
                on_event=_tell_event,
                on_run_failed=_tell_run_failed,
                on_outage=_tell_outage,
                telemetry=telemetry,
                concurrency=args.concurrency,
            )
            folded.outage = worker.outage
            stopping.worker = worker
            if stopping.signalled:
                worker.shutdown()  # signalled while the worker was built, before the handler knew it
            report = worker.run_once() if args.once else worker.run()
        finally:
            store.close()
        report.outages += opening.count
    print(_report_line(worker.worker_id, report))
    # --once is what a script or a CI job runs: a Run it drove that ended failed is its failure
    return EXIT_FAILURE if args.once and report.runs_failed else EXIT_OK


def _telemetry() -> Telemetry:
    """``--otel``: OpenTelemetry through the globally configured providers (loaded only
    here: without the flag the worker imports nothing of it)."""
    try:
        from runkernel.integrations.otel import OpenTelemetry
    except ImportError as error:
        raise CliError(f"--otel needs the otel extra (pip install 'runkernel[otel]'): {error}", EXIT_USAGE) from None
    return OpenTelemetry()


def _open_riding_out(url: str, outage: StoreOutage, stopping: _Stopping, *, once: bool = False) -> Store | None:
    """The store, opened once it answers (a server down at start is an outage like any
    other); None if a signal stopped the worker meanwhile. A URL or a store that is
    wrong (not a runkernel store, a missing file, credentials the server refuses) is
    refused at once; with ``once``, a host name that still does not resolve after the
    capped backoff is given up (exit 1)."""
    while not stopping.stop.requested:
        outage.begin_pass()  # each try is a pass: its failure is one retry of the outage
        try:
            store = open_store(url, create=False)
        except (SchemaError, BadStoreUrl) as error:
            raise CliError(str(error), EXIT_USAGE) from None
        except StoreUnavailable as error:
            outage.failed(error)
            if once and isinstance(error, HostUnresolved) and outage.gives_up():
                raise CliError(
                    f"host {error.host} still does not resolve after {outage.seconds:.1f} s; --once gives up"
                ) from None
            stopping.stop.wait(outage.delay())
            continue
        outage.end_pass()
        return store
    return None


class _Stopping:
    """The SIGTERM and SIGINT handlers, installed for the life of the command (and the
    ones before put back after): the first signal asks the worker to stop (or, before
    there is one, the start to end), the second abandons.

    A Python signal handler runs between two bytecodes of the main thread, which may hold
    a lock the handler would take (the one inside ``threading.Event.wait``) and would
    then wait for itself for ever. So the handler takes no lock: it counts, asks the
    start's ``StopFlag`` and the worker's ``shutdown()`` (neither takes one), and writes
    its line with ``os.write``; the second signal abandons with ``os._exit``."""

    def __init__(self, lease: float) -> None:
        self.lease = lease
        #: asked by the first signal: what the start (the store's opening) waits on
        self.stop = StopFlag()
        self.worker: Worker | None = None
        self._previous: dict[int, object] = {}
        self._signals = 0

    def __enter__(self) -> _Stopping:
        for sig in (signal.SIGTERM, signal.SIGINT):
            self._previous[sig] = signal.signal(sig, self._signalled)
        return self

    def __exit__(self, *_exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]

    def _signalled(self, signum: int, _frame: FrameType | None) -> None:
        self._signals += 1
        if self._signals > 1:
            _say(f"{signal.Signals(signum).name} again: abandoning; the leases held are not released and expire "
                 f"within {self.lease:g} s, then another worker takes those Runs over")
            os._exit(EXIT_TERMINATED if signum == signal.SIGTERM else EXIT_INTERRUPTED)
        self._stop(signum)

    @property
    def signalled(self) -> bool:
        """Whether a signal came (counted by the handler itself, at once)."""
        return self._signals > 0

    def _stop(self, signum: int) -> None:
        """The first signal, in the handler: stop the worker (or the start)."""
        self.stop.request()
        worker = self.worker
        if worker is None:
            _say(f"{signal.Signals(signum).name}: stopping before the start is done (nothing held yet)")
            return
        worker.shutdown()
        _say(f"{signal.Signals(signum).name}: stopping: {worker.waiting_for()}, then the leases held are "
             "released; a second SIGINT or SIGTERM abandons (the leases then expire)")


def _say(line: str) -> None:
    """One line on stderr, written at once: safe inside a signal handler (no buffered
    stream whose lock the interrupted code may hold)."""
    try:
        os.write(2, f"runkernel worker: {printable(line)}\n".encode("utf-8", "backslashreplace"))
    except OSError:
        pass


class _FoldedClientLog:
    """While the worker runs, what the store's client library logs (psycopg's pool
    warnings while a server is down) is folded into the outage under way, counted in
    its end line, instead of reaching stderr several lines a retry."""

    def __init__(self) -> None:
        self.outage: StoreOutage | None = None
        self._logger = logging.getLogger("psycopg")
        self._handler = _FoldingHandler(self)
        self._propagate = self._logger.propagate

    def __enter__(self) -> _FoldedClientLog:
        self._logger.addHandler(self._handler)
        self._logger.propagate = False
        return self

    def __exit__(self, *_exc: object) -> None:
        self._logger.removeHandler(self._handler)
        self._logger.propagate = self._propagate


class _FoldingHandler(logging.Handler):
    def __init__(self, owner: _FoldedClientLog) -> None:
        super().__init__(logging.DEBUG)
        self.owner = owner

    def emit(self, record: logging.LogRecord) -> None:
        if self.owner.outage is not None:
            self.owner.outage.fold()


def _tell_outage(event: OutageEvent) -> None:
    if isinstance(event, OutageBegan) and event.host is not None:
        _tell_worker(
            f"host {event.host} does not resolve (yet): {event.error}; waiting for it with a capped backoff "
            f"(up to {OUTAGE_MAX_DELAY:g} s)"
        )
    elif isinstance(event, OutageBegan):
        _tell_worker(
            f"store unavailable: {event.error}; retrying with a capped backoff (up to {OUTAGE_MAX_DELAY:g} s) "
            "until it answers"
        )
    elif isinstance(event, OutageEnded):
        folded = f", {plural(event.folded, 'client warning')} folded" if event.folded else ""
        _tell_worker(
            f"store answers again after {event.seconds:.1f} s ({plural(event.retries, 'retry', 'retries')}, "
            f"{plural(event.interrupted, 'drive')} interrupted{folded}); driving resumes"
        )


def _tell_failure(run_id: str, error: BaseException) -> None:
    """One line for the operator per failed drive; the worker goes on with other Runs."""
    what = _first_line(type(error).__name__, str(error))
    _tell(run_id, f"{what} (lease released; the Run is tried again later)")


def _tell_run_failed(run_id: str, cause: EndCause) -> None:
    why = "" if cause.error is None else f": {_first_line(cause.error.type, cause.error.message)}"
    _tell(run_id, f"ended failed{why}")


def _tell_event(event: RuntimeEvent) -> None:
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
    _tell_worker(f"run {run_id}: {what}")


def _tell_worker(what: str) -> None:
    print(f"runkernel worker: {printable(what)}", file=sys.stderr, flush=True)


def _report_line(worker_id: str, report: WorkerReport) -> str:
    return (
        f"worker {worker_id}: {plural(report.drives, 'drive')}, {plural(report.commits, 'commit')}, "
        f"{plural(report.takeovers, 'take-over')}, {report.contended} contended, "
        f"{plural(report.conflicts, 'conflict')}, {plural(report.leases_lost, 'lease', 'leases')} lost, "
        f"{plural(report.failures, 'failure')}, {plural(report.runs_failed, 'run', 'runs')} failed, "
        f"{plural(report.tool_exceptions, 'tool exception')}, {plural(report.model_failures, 'model failure')}, "
        f"at most {report.in_flight_peak} in flight, {plural(report.outages, 'outage', 'outages')} ridden out"
    )


def register_worker(commands: argparse._SubParsersAction[argparse.ArgumentParser], store_option: object) -> None:
    """Add ``worker`` to the parser (``store_option`` adds ``--store``)."""
    worker = commands.add_parser(
        "worker",
        help="drive every Run of an app that has work, under leases",
        description=textwrap.fill(
            "Drive every Run of the app that has work: Running and unleased, an inbox command "
            "(resume, cancel), an expired approval or a due timer. SIGTERM or SIGINT: finish the "
            "commit in flight, start nothing new, release leases, exit 0 (a second one abandons: "
            "the leases then expire). A store that stops answering (a database restart, a dropped "
            "connection, a server down at start, a SQLite lock held past the busy timeout) is "
            "ridden out: one line when it begins, one when it ends, retries with a capped backoff.",
            width=88,
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    assert callable(store_option)
    store_option(worker)
    worker.add_argument(
        "--app", required=True, metavar="MODULE:ATTR", help="the host application, loaded like uvicorn module:app"
    )
    worker.add_argument(
        "--once",
        action="store_true",
        help="drive until nothing is runnable, then exit: 1 if a Run it drove ended failed, else 0",
    )
    worker.add_argument("--lease", type=float, default=30.0, metavar="SECONDS", help="lease duration (default 30)")
    worker.add_argument("--poll", type=float, default=1.0, metavar="SECONDS", help="poll interval (default 1)")
    worker.add_argument("--worker-id", metavar="ID", help="this worker's id (default: host:pid:random)")
    worker.add_argument(
        "--concurrency",
        type=int,
        default=DEFAULT_CONCURRENCY,
        metavar="N",
        help=f"drive up to N Runs at once, each in a slot with its own store connection (default {DEFAULT_CONCURRENCY}; "
        "1: one at a time)",
    )
    worker.add_argument(
        "--otel",
        action="store_true",
        help="record traces and metrics with OpenTelemetry (the otel extra), through the providers "
        "configured for the process, e.g. by opentelemetry-instrument",
    )
    worker.epilog = "The report line printed on stdout when the worker stops counts:\n" + "\n".join(
        textwrap.fill(f"{name}: {meaning}", width=88, initial_indent="  ", subsequent_indent="      ")
        for name, meaning in COUNTERS
    )
    worker.set_defaults(handler=_worker)


