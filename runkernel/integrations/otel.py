"""OpenTelemetry traces and metrics for runkernel's drives (the ``otel`` extra).

``Worker(store, app, telemetry=OpenTelemetry())`` (or ``Runtime(...)``, ``Driver(...)``,
``AsyncDriver(...)``) records, with the tracer and meter providers you configured
(``opentelemetry.trace.set_tracer_provider`` and ``metrics.set_meter_provider``, or
given here):

- spans: ``runkernel.drive`` (one per drive: a start or a pick-up), under it
  ``runkernel.inference`` (each model call), ``runkernel.tool`` (each tool attempt: run,
  thread, call, tool, operation id, attempt, policy, lease epoch), ``runkernel.status``
  (a reconnect tool asked about its operation), ``runkernel.commit`` (version, bytes,
  position, conflict), ``runkernel.recover`` (the recovery row and the effects it
  chose), ``runkernel.command`` (an inbox command applied or refused) and
  ``runkernel.resume`` (an in-process resume applied or refused);
- metrics: ``runkernel.commits``, ``runkernel.commit.conflicts``,
  ``runkernel.commit.duration`` (seconds), ``runkernel.recoveries`` (by row),
  ``runkernel.calls.indeterminate``, ``runkernel.lease.takeovers`` and
  ``runkernel.drives.failed`` (by reason).

One trace per Run: its first drive's span context is stored with its activation, in the
same transaction, outside the commit log; every later drive, in any process, after any
crash, is a child of it. A child Run's activation stores its parent's drive, so a tree
of Runs reads as one trace too. Nothing here decides anything: a span lost with a
killed process loses only its own record.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from attrs import define, field
from opentelemetry import metrics, trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from runkernel.adapters.drive.actions import Action, CheckStatus, Infer, RunCall, RunCalls, WaitFor
from runkernel.adapters.drive.events import position_of
from runkernel.adapters.drive.protocol import CallEnded, InferenceFailed, Report, Resume, Status as StatusReport
from runkernel.adapters.drive.telemetry import Telemetry
from runkernel.adapters.stores.contract import InboxEntry
from runkernel.adapters.stores.serial import commit_text
from runkernel.errors import CommitConflict
from runkernel.kernel.recover import RecoveryDecision
from runkernel.kernel.state import ActiveToolBatch, CallIndeterminate, RunSnapshot, ThreadCommit

__version__ = "1"
_PROPAGATOR = TraceContextTextMapPropagator()


@define
class _Drive:
    """What this process knows of one Run it drives now."""

    span: Span
    context: Context
    #: the Run's root span (a start's), or the context stored with its activation
    run: Context | None
    thread_id: str | None = None
    batch: ActiveToolBatch | None = None
    action: Span | None = None  # the inference, tool attempt or status check in flight
    #: the tool attempts of a concurrent group in flight, by call id
    calls: dict[str, Span] = field(factory=dict)


class OpenTelemetry(Telemetry):
    """Traces and metrics of every drive, through OpenTelemetry (see the module's text).

    ``tracer_provider`` and ``meter_provider`` default to the global ones, so with the
    API alone (no SDK configured) every span is a non-recording one and nothing is
    exported. One instance may serve every driver, runtime and worker of a process."""

    reads_trace = True

    def __init__(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
    ) -> None:
        self._tracer = trace.get_tracer("runkernel", __version__, tracer_provider)
        meter = metrics.get_meter("runkernel", __version__, meter_provider)
        self._commits = meter.create_counter("runkernel.commits", "{commit}", "Commits the store acknowledged")
        self._conflicts = meter.create_counter(
            "runkernel.commit.conflicts", "{commit}", "Commits refused because another writer won"
        )
        self._latency = meter.create_histogram("runkernel.commit.duration", "s", "Time of one store write")
        self._recoveries = meter.create_counter("runkernel.recoveries", "{decision}", "Recovery decisions, by row")
        self._indeterminate = meter.create_counter(
            "runkernel.calls.indeterminate", "{call}", "Calls committed Indeterminate (outcome unknown)"
        )
        self._takeovers = meter.create_counter(
            "runkernel.lease.takeovers", "{lease}", "Leases taken over from another worker"
        )
        self._failed = meter.create_counter("runkernel.drives.failed", "{drive}", "Drives stopped by an error")
        self._drives: dict[str, _Drive] = {}
        #: take-overs told before their drive began (a worker takes the lease first)
        self._taken_over: dict[str, int] = {}

    # --- drives ---------------------------------------------------------------------

    def drive_began(self, run_id: str, trace_context: str | None, *, start: bool) -> None:
        self._close(run_id, None)  # a drive its host dropped without closing
        run: Context | None = None
        if start:
            # the trace's root: ended at once, so it is exported whatever becomes of the
            # process; the activation stores it, and every drive of the Run is its child
            root = self._tracer.start_span("runkernel.run", attributes={"runkernel.run_id": run_id})
            root.end()
            run = trace.set_span_in_context(root)
        elif trace_context is not None:
            run = _PROPAGATOR.extract({"traceparent": trace_context})
        attributes: dict[str, Any] = {"runkernel.run_id": run_id, "runkernel.opening": "start" if start else "pick_up"}
        span = self._tracer.start_span("runkernel.drive", context=run, attributes=attributes)
        self._drives[run_id] = _Drive(span, trace.set_span_in_context(span), run)
        epoch = self._taken_over.pop(run_id, None)
        if epoch is not None:
            span.add_event("runkernel.lease.taken_over", {"runkernel.lease_epoch": epoch})

    def drive_ended(self, run_id: str) -> None:
        self._close(run_id, None)

    def drive_failed(self, run_id: str, reason: str, error: BaseException) -> None:
        self._failed.add(1, {"runkernel.reason": reason})
        self._taken_over.pop(run_id, None)
        self._close(run_id, error)

    def _close(self, run_id: str, error: BaseException | None) -> None:
        drive = self._drives.pop(run_id, None)
        if drive is None:
            return
        for span in [drive.action, *drive.calls.values()]:
            if span is not None:
                span.end()
        if error is not None:
            drive.span.record_exception(error)
            drive.span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
        drive.span.end()

    def activation_context(self, commit: ThreadCommit) -> str | None:
        owner = commit.parent.run_id if commit.parent is not None else commit.run_id
        drive = self._drives.get(owner)
        if drive is None:
            return None
        carrier: dict[str, str] = {}
        # a Run's own activation stores its root; a child's, the parent's drive
        context = drive.run if commit.parent is None else drive.context
        if context is None:
            return None
        _PROPAGATOR.inject(carrier, context)
        return carrier.get("traceparent")

    # --- commits --------------------------------------------------------------------

    @contextmanager
    def commit(self, commit: ThreadCommit, prev: RunSnapshot | None) -> Iterator[None]:
        drive = self._drive_of(commit)
        position = position_of(prev, commit).value
        span = self._tracer.start_span("runkernel.commit", context=drive.context if drive else None)
        started = time.perf_counter()
        conflict = False
        try:
            yield
        except CommitConflict:
            conflict = True
            self._conflicts.add(1)
            raise
        except BaseException as error:
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, type(error).__name__))
            raise
        finally:
            self._latency.record(time.perf_counter() - started, {"runkernel.commit.position": position})
            if span.is_recording():  # the commit's size costs an encoding: only when recorded
                span.set_attributes(
                    {
                        "runkernel.run_id": commit.run_id,
                        "runkernel.thread_id": commit.thread_id,
                        "runkernel.commit.version": commit.version,
                        "runkernel.commit.position": position,
                        "runkernel.commit.bytes": len(commit_text(commit).encode()),
                        "runkernel.commit.conflict": conflict,
                    }
                )
            span.end()
        self._commits.add(1, {"runkernel.commit.position": position})
        indeterminate = _newly_indeterminate(prev, commit)
        if indeterminate:
            self._indeterminate.add(indeterminate)
        if drive is not None and commit.run_id in self._drives:
            drive.thread_id = commit.thread_id
            drive.batch = commit.batch if commit.batch is not None else drive.batch

    def _drive_of(self, commit: ThreadCommit) -> _Drive | None:
        drive = self._drives.get(commit.run_id)
        if drive is None and commit.parent is not None:
            drive = self._drives.get(commit.parent.run_id)  # a child's activation, by its parent
        return drive

    # --- actions --------------------------------------------------------------------

    def handed(self, action: Action) -> None:
        drive = self._drives.get(action.run_id)
        if drive is None:
            return
        if isinstance(action, RunCalls):  # a span per call, from its first hand-out to its answer
            for call in action.calls:
                if call.call_id not in drive.calls:
                    drive.calls[call.call_id] = self._action_span(drive, call)
            return
        if not isinstance(action, (Infer, RunCall, CheckStatus)):
            return
        if drive.action is not None:
            drive.action.end()  # the host polled instead of answering: that attempt is over
        drive.action = self._action_span(drive, action)

    def _action_span(self, drive: _Drive, action: Infer | RunCall | CheckStatus) -> Span:
        attributes: dict[str, Any] = {"runkernel.run_id": action.run_id}
        if drive.thread_id is not None:
            attributes["runkernel.thread_id"] = drive.thread_id
        attributes["runkernel.attempt"] = action.attempt
        if isinstance(action, Infer):
            name = "runkernel.inference"
            attributes["runkernel.step"] = action.step
        else:
            name = "runkernel.tool" if isinstance(action, RunCall) else "runkernel.status"
            attributes.update(
                {
                    "runkernel.call_id": action.call_id,
                    "runkernel.tool": action.tool,
                    "runkernel.operation_id": action.operation_id,
                }
            )
            if isinstance(action, CheckStatus) and action.lease_epoch is not None:
                attributes["runkernel.lease_epoch"] = action.lease_epoch
            call = drive.batch.call(action.call_id) if drive.batch is not None else None
            if call is not None and call.policy is not None:
                attributes["runkernel.policy"] = call.policy.recovery.mode.value
        return self._tracer.start_span(name, context=drive.context, attributes=attributes)

    def executing(self, action: RunCall) -> None:
        drive = self._drives.get(action.run_id)
        if drive is None or action.lease_epoch is None:
            return
        span = drive.calls.get(action.call_id, drive.action)
        if span is not None:
            span.set_attribute("runkernel.lease_epoch", action.lease_epoch)

    def reported(self, action: Action, report: Report, refusal: str | None) -> None:
        drive = self._drives.get(action.run_id)
        if drive is None:
            return
        if isinstance(action, WaitFor) and isinstance(report, Resume):
            self._instant(
                drive, "runkernel.resume", action.run_id, refusal,
                {"runkernel.call_id": action.call.call_id, "runkernel.resume": type(report.payload).__name__},
            )
            return
        in_group = isinstance(action, RunCalls) and isinstance(report, CallEnded)
        span = drive.calls.get(report.call_id) if in_group and isinstance(report, CallEnded) else drive.action
        if span is None:
            return
        if refusal is not None:
            span.add_event("runkernel.refused", {"runkernel.reason": refusal})
            return
        if isinstance(report, InferenceFailed):
            span.record_exception(report.error)
            span.set_status(Status(StatusCode.ERROR, type(report.error).__name__))
        elif isinstance(report, CallEnded):
            span.set_attribute("runkernel.outcome", type(report.outcome).__name__)
        elif isinstance(report, StatusReport):
            span.set_attribute("runkernel.status", report.status.value)
        span.end()
        if in_group and isinstance(report, CallEnded):
            del drive.calls[report.call_id]
        else:
            drive.action = None

    # --- decisions ------------------------------------------------------------------

    def recovered(self, run_id: str, plan: RecoveryDecision) -> None:
        row = plan.row.value
        self._recoveries.add(1, {"runkernel.recovery.row": row})
        drive = self._drives.get(run_id)
        if drive is None:
            return
        drive.thread_id = plan.decision.state.thread_id
        if plan.decision.state.batch is not None:
            drive.batch = plan.decision.state.batch
        effects = ",".join(type(effect).__name__ for effect in plan.decision.effects)
        self._instant(
            drive, "runkernel.recover", run_id, None,
            {"runkernel.recovery.row": row, "runkernel.recovery.effects": effects},
        )

    def settled(self, entry: InboxEntry, outcome: str) -> None:
        drive = self._drives.get(entry.run_id)
        if drive is None:
            return
        body = entry.body
        kind = body.get("type") if isinstance(body, dict) else None
        refusal = None if outcome == "applied" else outcome
        self._instant(
            drive, "runkernel.command", entry.run_id, refusal,
            {"runkernel.command.entry": entry.entry_id, "runkernel.command.kind": str(kind)},
        )

    def taken_over(self, run_id: str, epoch: int) -> None:
        self._takeovers.add(1)
        self._taken_over[run_id] = epoch  # marked on the drive that begins next

    def _instant(
        self, drive: _Drive, name: str, run_id: str, refusal: str | None, attributes: dict[str, Any]
    ) -> None:
        """A span for a decision made at one point: applied, or refused with its reason."""
        span = self._tracer.start_span(name, context=drive.context)
        if span.is_recording():
            span.set_attributes({"runkernel.run_id": run_id, **attributes})
            span.set_attribute("runkernel.outcome", "applied" if refusal is None else "refused")
            if refusal is not None:
                span.set_attribute("runkernel.refusal", refusal)
        span.end()


def _newly_indeterminate(prev: RunSnapshot | None, commit: ThreadCommit) -> int:
    """How many calls ``commit`` makes Indeterminate."""
    batch = commit.batch
    if batch is None:
        return 0
    before = prev.batch if prev is not None else None
    count = 0
    for call in batch.calls:
        if not isinstance(call.status, CallIndeterminate):
            continue
        old = before.call(call.call_id) if before is not None and before.batch_id == batch.batch_id else None
        if old is None or not isinstance(old.status, CallIndeterminate):
            count += 1
    return count


__all__ = ["OpenTelemetry"]
